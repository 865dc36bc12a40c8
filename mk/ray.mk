# Real Ray (docs/ray.md): raylets with declared fake GPUs on 127.0.0.1. Ray itself comes from the
# venv (pyproject depends on ray[default]). ray-deps fails loudly if it is missing. fakelet-front, the
# fakelets' compiled front (docs/ray-fakelets.md), is built with go from fakes/ray/fakelets/front.
RAY_NODES ?= 16
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin
FAKELET_FRONT := $(GANGSTORM_BIN_DIR)/fakelet-front
FAKELET_FRONT_SRC := $(wildcard fakes/ray/fakelets/front/*.go) fakes/ray/fakelets/front/go.mod fakes/ray/fakelets/front/go.sum

.PHONY: ray-deps ray-test ray-bench ray-bench-fake ray-calibrate-fake fakelet-front
ray-deps: $(STAMP) $(FAKELET_FRONT)
	@$(BIN)/python -c "import ray; print('ray-deps: ray', ray.__version__)" 2>/dev/null \
	  || { echo "ray-deps: ray is not importable from $(BIN)/python: run 'make venv'" >&2; exit 1; }

fakelet-front: $(FAKELET_FRONT)
$(FAKELET_FRONT): $(FAKELET_FRONT_SRC)
	@command -v go >/dev/null || { echo "fakelet-front: go is not installed (needs Go >= 1.24)" >&2; exit 1; }
	mkdir -p $(GANGSTORM_BIN_DIR)
	cd fakes/ray/fakelets/front && go build -trimpath -o $(FAKELET_FRONT) .

ray-test: ray-deps
	$(BIN)/pytest -q -rfE --durations=10 tests/test_ray_real.py tests/test_ray_startup_real.py tests/test_ray_fakelets_real.py tests/test_ray_fakelets_calibration_real.py tests/test_ray_fakelets_front_real.py tests/test_existing_ray_fakelets_real.py

# Boot time, memory per raylet, serial STRICT_SPREAD latency, sustained groups/s: make ray-bench RAY_NODES=32
ray-bench: ray-deps
	$(BIN)/python -m fakes.ray.bench --nodes $(RAY_NODES)

# The real GCS on fakelets (fake raylets, docs/ray-fakelets.md): boot, memory per node, GCS CPU and
# memory, placement groups/s at 1/8/64 bundles, per fleet size. About 30 minutes at the default sizes
# on 2 cores (the 10,000-node size is most of it).
RAY_FAKE_SIZES ?= 1000,5000,10000
RAY_FAKE_BUNDLES ?= 1,8,64
RAY_FAKE_FRONT ?= go
ray-bench-fake: ray-deps
	$(BIN)/python -m fakes.ray.fakelets.bench --sizes $(RAY_FAKE_SIZES) --bundles $(RAY_FAKE_BUNDLES) \
	  --front $(RAY_FAKE_FRONT) --out results/ray-fakelets/bench.json

# Fakelets against real raylets on the same trace (fakes/ray/fakelets/calibrate.py, band in BAND):
# about 20 minutes at 32 nodes; exits 1 outside the band
RAY_CAL_NODES ?= 32
ray-calibrate-fake: ray-deps
	$(BIN)/python -m fakes.ray.fakelets.calibrate --nodes $(RAY_CAL_NODES) --repeat 2 --check

TEST_DEPS += ray-deps
