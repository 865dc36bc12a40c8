# Calibration of the simulated schedulers (docs/fidelity.md). Benchmarks, not CI tests: `fidelity`
# starts every real backend at two small scales on two scenarios plus two held-out cases, three
# runs each (about 3 hours on 2 cores), fits the local profile and prints the held-out table; real
# runs are kept in results/calibration and reused, so an interrupted run resumes.
.PHONY: fidelity anchors
FIDELITY_SCHEDULERS ?= slurm,ray,kube,volcano

fidelity: $(STAMP) real-deps
	$(BIN)/gangstorm calibrate --schedulers $(FIDELITY_SCHEDULERS) --profile local \
	  --write-profile fakes/profiles/local.yaml --out results/calibration

# The reference profile: throughput refitted to published figures (no backend started), then the table.
anchors: $(STAMP)
	$(BIN)/gangstorm calibrate --anchors --schedulers kube,volcano,ray,slurm --profile local \
	  --write-profile fakes/profiles/reference.yaml
	$(BIN)/gangstorm profile anchors reference
