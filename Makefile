# gangstorm: `make run` and `make test` are the two commands a newcomer needs.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
SCENARIO ?= scenarios/baseline-3x.yaml
# `make run` repeats the scenario over this many seeds (its seed and the next ones) and prints each
# figure as a median [interval] with the paired tests (docs/seeds.md); SEEDS=1 is one ordinary run.
SEEDS   ?= 10

# Backend make fragments (Slurm packages, Go binaries, ...) add to TEST_DEPS and define targets.
TEST_DEPS :=
-include mk/*.mk

# Every real backend's dependencies. Fragments depend on this name, not on $(TEST_DEPS), because a
# rule's prerequisites are expanded when make reads it, before later fragments have added theirs.
.PHONY: real-deps
real-deps: $(TEST_DEPS)

.PHONY: venv run lint test test-fast bench bench-tests clean
venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -e .
	rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	$(BIN)/gangstorm run $(SCENARIO) --seeds $(SEEDS)

# The rule set is in pyproject.toml ([tool.ruff.lint]); `make test` lints first, so CI fails on a finding.
lint: $(STAMP)
	$(BIN)/ruff check .

# Tests marked `bench` (full scale, minutes each) are left out to keep CI within its hour: `make bench-tests`.
# The simulated tests are CPU-bound and share nothing, so they run on two workers (a file per worker);
# the real ones start servers and some compare wall-clock costs with a twin, so they run one at a time.
# Both passes always run; the target fails if either does.
test: lint $(STAMP) $(TEST_DEPS)
	$(BIN)/pytest -q -rfE --durations=20 -n 2 --dist loadfile -m "not bench and not real"; sim=$$?; \
	$(BIN)/pytest -q -rfE --durations=30 -m "not bench and real"; real=$$?; \
	test $$sim -eq 0 -a $$real -eq 0

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not real and not browser and not slow"

bench: $(STAMP)
	$(BIN)/python -m loadgen.bench.run

bench-tests: $(STAMP) $(TEST_DEPS)
	$(BIN)/pytest -q -rfE --durations=15 -m bench

clean:
	rm -rf $(VENV) build *.egg-info
