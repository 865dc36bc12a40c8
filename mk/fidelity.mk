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

# Fidelity at scale (issue 32, docs/fidelity.md "At scale"): each scheduler's real cost curve at
# 500-10,000 nodes and its own benchmark replicated here, as JSON evidence under
# results/fidelity-scale/<scheduler>/. Benchmarks, never part of `make test`; each starts real
# components (set CPU_LOCK=/path to serialize them on a shared machine).
.PHONY: fidelity-scale fidelity-scale-kube fidelity-scale-slurm fidelity-scale-ray fidelity-scale-volcano
fidelity-scale: fidelity-scale-kube fidelity-scale-slurm fidelity-scale-ray fidelity-scale-volcano

# kube: the KWOK stack's cost curve plus scheduler_perf SchedulingBasic at each size (about 45
# minutes on 2 cores), then the twin's figures for the same workloads; and gangstorm's own create
# rate, old client vs the adapters' create path, against 0 and 500 KWOK nodes (about 10 minutes);
# the create bursts of the adapters' path and every scheduler_perf workload with its CPU readings
# (about 25 minutes), then the shared cores fitted from them (loadgen/calibration/shared_cores.py).
fidelity-scale-kube: $(STAMP) k8s-bins scheduler-perf
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.costcurve --sizes 500,2000,5000,10000 --perf \
	  --out results/fidelity-scale/kube
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.createrate --nodes 0 \
	  --rates max,100,200,300,400,600,max --out results/fidelity-scale/kube
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.createrate --nodes 500 \
	  --rates max,100,200,300,400,600,max --out results/fidelity-scale/kube
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.costcurve --sizes 500 --burst-only --client new \
	  --burst-pods 6000 --out results/fidelity-scale/kube
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.costcurve --sizes 2000,10000 --burst-only --client new \
	  --burst-pods 6000 --out results/fidelity-scale/kube
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.kube.schedperf \
	  --workloads 500Nodes,500Nodes_5000Pods,2000Nodes,2000Nodes_10000Pods,5000Nodes_10000Pods,10000Nodes_10000Pods \
	  --runs 3 --out results/fidelity-scale/kube
	$(BIN)/python -m loadgen.calibration.kube_curve --dir results/fidelity-scale/kube
	$(BIN)/python -m loadgen.calibration.shared_cores --write-profile fakes/profiles/local.yaml
	$(BIN)/gangstorm profile anchors local --schedulers kube

# Slurm: about 100 minutes on 2 cores (10,000 slurmd need ~11 GB): slurmctld's cost curve (sdiag)
# with the submit-and-start and submit-and-execute bursts; the twin's slurmctld costs refitted from it
# (5,000 nodes held out) and its figures written beside the real ones; the held-out run at 2,000
# nodes (admission real vs twin); the burst anchors (500 nodes fit, 2,000 held out).
fidelity-scale-slurm: $(STAMP) slurm-deps
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.slurm.costcurve --sizes 64 --out results/fidelity-scale/slurm
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.slurm.costcurve --sizes 500,2000 --burst 1000 --execute 1000 \
	  --settle 300 --out results/fidelity-scale/slurm
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m fakes.slurm.costcurve --sizes 5000,10000 --burst 1000 --settle 300 \
	  --out results/fidelity-scale/slurm
	$(BIN)/python -m loadgen.calibration.slurm_curve --hold-out 5000,10000 --write-profile fakes/profiles/local.yaml --fill
	$(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python -m loadgen.calibration.scale_check --scheduler slurm --nodes 2000 \
	  --duration-h 0.25 --time-scale 1
	$(BIN)/gangstorm profile anchors local --schedulers slurm

# Ray (about 30 minutes on 2 cores): the real GCS's cost against nodes on fakelets, Ray's placement-group
# release test on 5 raylets (with and without the GCS's statistics printing) and on 5 fakelets; then
# the measured costs into the local profile (its lags re-fitted on the kept calibration runs, no
# backend), the reference profile's Ray costs by measured ratios, the twin's values into the curve
# files, the held-out burst on 2,000 (twice) and 5,000 fakelets against its twin, and the local anchors.
# Each step that starts real components takes CPU_LOCK when set.
RAY_LOCK = $(if $(CPU_LOCK),flock $(CPU_LOCK))
fidelity-scale-ray: ray-deps
	$(RAY_LOCK) $(BIN)/python -m fakes.ray.costcurve --sizes 500,2000,5000,10000 --bundles 1,4,16,64 --groups 30 \
	  --out results/fidelity-scale/ray
	$(RAY_LOCK) $(BIN)/python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 3 --out results/fidelity-scale/ray
	$(RAY_LOCK) $(BIN)/python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 3 --add --out results/fidelity-scale/ray
	$(RAY_LOCK) $(BIN)/python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 1 --gcs-stats --out results/fidelity-scale/ray
	$(RAY_LOCK) $(BIN)/python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 1 --kind fakelet --out results/fidelity-scale/ray
	rm -rf results/fidelity-scale/ray/heldout-2000n results/fidelity-scale/ray/heldout-5000n
	$(BIN)/python -m loadgen.calibration.raycurve --write-profile fakes/profiles/local.yaml --write
	$(BIN)/gangstorm calibrate --schedulers ray --profile local --write-profile fakes/profiles/local.yaml \
	  --out results/calibration
	$(BIN)/gangstorm calibrate --anchors --schedulers ray --profile local --write-profile fakes/profiles/reference.yaml
	$(RAY_LOCK) $(BIN)/python -m loadgen.calibration.heldout run scenarios/ray-burst-heldout.yaml --nodes 2000 --repeat 2 \
	  --fakelet-costs results/fidelity-scale/ray --out results/fidelity-scale/ray/heldout-2000n
	$(RAY_LOCK) $(BIN)/python -m loadgen.calibration.heldout run scenarios/ray-burst-heldout.yaml --nodes 5000 \
	  --fakelet-costs results/fidelity-scale/ray --out results/fidelity-scale/ray/heldout-5000n
	$(BIN)/gangstorm profile anchors local --schedulers ray

# Volcano (about 40 minutes on 2 cores): vc-scheduler's session, action and plugin latency at 500-10,000
# KWOK nodes, idle, under a light stream and with 100 / 1,000 unplaceable jobs on a full fleet; its
# tuning guide's one-pod jobs (2,000 of them: the guide's 10,000 take half an hour here) on 2,000 nodes; then the twin's session costs from the curve
# (5,000 and 10,000 nodes held out) into the local profile, the twin's figures into the curve files, the anchors.
VOLCANO_LOCK = $(if $(CPU_LOCK),flock $(CPU_LOCK))
fidelity-scale-volcano: $(STAMP) k8s-bins volcano-bins
	$(VOLCANO_LOCK) $(BIN)/python -m fakes.volcano.costcurve --sizes 500,2000,5000,10000 --out results/fidelity-scale/volcano
	$(VOLCANO_LOCK) $(BIN)/python -m fakes.volcano.costcurve --sizes 2000 --bench-jobs 2000 \
	  --out results/fidelity-scale/volcano
	$(BIN)/python -m loadgen.calibration.volcano_curve --hold-out 5000,10000 --write-profile fakes/profiles/local.yaml
	$(BIN)/gangstorm profile anchors local --schedulers volcano

# Fidelity of the gang twins (issue 28, docs/kube-gang.md): kube-gang and coscheduling, a fitting and a
# held-out case, 3 real runs each on 4-6 KWOK nodes (one run at a time, CPU_LOCK between runs; about
# 20 minutes on 2 cores), then the gang costs measured from the fitting runs into the local profile and
# the table again with them. Not a CI test: one real run of a case is 40-110 s, over the 60 s a guard
# may take. Real runs are kept in results/fidelity/<scheduler>/<case>/runN and reused (remove one to redo it).
.PHONY: fidelity-gangs
GANG_CASES = fit heldout
fidelity-gangs: $(STAMP) k8s-bins sp-bins
	for case in $(GANG_CASES); do for k in 1 2 3; do for s in kube-gang coscheduling; do \
	  $(if $(CPU_LOCK),flock $(CPU_LOCK)) $(BIN)/python tools/gangs/fidelity.py --schedulers $$s --cases $$case \
	    --runs $$k > /dev/null || exit 1; done; done; done
	$(BIN)/python -m loadgen.calibration.gangcosts --write-profile fakes/profiles/local.yaml
	$(BIN)/python tools/gangs/fidelity.py --no-run --write-profile fakes/profiles/local.yaml
