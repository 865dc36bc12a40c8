# Control-plane ceilings on the real schedulers (docs/ceilings.md). A benchmark, not a
# CI test (tests/test_ceiling_real.py runs two points per scheduler): each point starts the real
# control plane on 32 fake nodes; about 10-25 minutes per scheduler on 2 cores.
.PHONY: ceiling ceiling-real
CEILING_SCHEDULERS ?= kube,volcano,ray,slurm

ceiling: $(STAMP)
	$(BIN)/gangstorm ceiling scenarios/ceiling-10k.yaml

ceiling-real: $(STAMP) real-deps
	$(BIN)/gangstorm ceiling scenarios/ceiling-real.yaml --backend real --schedulers $(CEILING_SCHEDULERS)
