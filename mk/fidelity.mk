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

# Fidelity at scale (issue 32, docs/fidelity.md "At scale"): each real scheduler's cost curve at
# 500-10,000 nodes, its own benchmark replicated here, a held-out case at 2,000 nodes. Benchmarks,
# not tests: each line starts real components, one at a time (flock on a shared machine).
.PHONY: fidelity-scale fidelity-scale-slurm
fidelity-scale: fidelity-scale-slurm

# Slurm: about 80 minutes on 2 cores (10,000 slurmd need ~11 GB). The last line refits the twin's
# slurmctld costs from the curve (5,000 nodes held out) and writes the twin's figures beside the real ones.
fidelity-scale-slurm: $(STAMP) slurm-deps
	$(BIN)/python -m fakes.slurm.costcurve --sizes 64 --out results/fidelity-scale/slurm
	$(BIN)/python -m fakes.slurm.costcurve --sizes 500,2000 --burst 1000 --execute 1000 --settle 300 \
	  --out results/fidelity-scale/slurm
	$(BIN)/python -m fakes.slurm.costcurve --sizes 5000,10000 --burst 1000 --settle 300 \
	  --out results/fidelity-scale/slurm
	$(BIN)/python -m loadgen.calibration.scale_check --scheduler slurm --nodes 2000 --duration-h 0.25 --time-scale 1
	$(BIN)/python -m loadgen.calibration.slurm_curve --hold-out 5000 --write-profile fakes/profiles/local.yaml --fill
	$(BIN)/gangstorm profile anchors local --schedulers slurm
