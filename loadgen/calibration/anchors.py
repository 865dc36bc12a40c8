"""Published figures the reference profile is fitted to (role "fit") or checked against ("held_out"),
and published floors it must stay above (role "floor": a CI threshold is a minimum, never a target).

Each anchor is rebuilt as the workload its publication measured, run on the simulated scheduler
with a profile, and measured the way the publication measured it (throughput over the measured
jobs). `gangstorm calibrate --anchors` fits the reference profile to the fit anchors and validates
it on the held-out ones; `gangstorm profile anchors` prints the table.

An anchor checks one profile. The reference profile's figures are published (the source names the
version); the local profile's are the same kind of benchmark measured on this machine class, read
from the result file its command wrote under results/ (`measured_file`: JSON with at least
`figure` and `command`), so re-running the benchmark updates the anchor.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.calibration.fidelity import GOAL_RATIO
from loadgen.drive.runner import run_virtual
from loadgen.input.profile import Profile
from loadgen.input.scenario import Scenario, from_dict
from loadgen.measure.bursts import bursts, stream_ms_per_pod
from loadgen.measure.recorder import Recorder
from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext

K8S_PR131345 = ("kubernetes/kubernetes PR #131345, comment of 2025-04-23: two runs of scheduler_perf "
                "SchedulingBasic/5000Nodes_10000Pods on master at the v1.33.0 release, on the contributor's machine "
                "(hardware not named); the figure is the mean of the two runs' SchedulingThroughput Average computed "
                "from the posted 1-s samples (622.1 and 616.2 pods/s); in-process apiserver, client QPS 5000")
K8S_GODEL = ("kubewharf/godel-scheduler docs/performance/best-practice.md: kube-scheduler of Kubernetes v1.29.14 on "
             "30,000 KWOK nodes, the whole control plane on one Xeon Platinum 8260 (48 cores / 96 threads, 384 GB, "
             "NVMe), pods created directly at 2,000/s, clientConnection QPS/burst 10,000, log level 4: "
             "'about 300 pods/s' end to end (430 at the peak), read off their chart")
K8S_FLOOR = ("kubernetes v1.36.1 test/integration/scheduler_perf/misc/performance-config.yaml, "
             "SchedulingBasic/5000Nodes_10000Pods threshold 270: a CI floor set below the lowest SchedulingThroughput "
             "Average of recent ci-benchmark-scheduler-perf runs (README 'How to calculate the threshold', PR "
             "#136276), not a throughput: the simulation must stay above it")
SLURM_DOC = ("Slurm documentation doc/html/slurm.shtml (Performance): \"can accept 1,000 job submissions per "
             "second and fully execute 500 simple jobs per second (depending upon hardware and system "
             "configuration)\"; written 2012-05-17 (SchedMD/slurm commit b77ebb3e62, first in the Slurm 2.5 "
             "tags), unchanged in 22.05 and master; the page names no version, hardware, fleet size, job "
             "shape or configuration, so it is a capability claim, not a run that can be rebuilt exactly")
RAY_PR = ("ray-project/ray PR #63839 (June 2026), release test placement_group_performance_test.py: 100 groups "
          "of N bundles {custom: 0.001}, SPREAD over 5 nodes, create + wait + remove, Ray's timeit; the PR column, "
          "the code of Ray 2.60.0 (its raylets answer the RemovePlacementGroupBundles call that PR introduced; the "
          "baseline column, 685.94 / 247.09 / 112.96 / 38.62, is master before it)")
RAY_LOCAL = ("Ray's placement_group_performance_test shape on this machine class: 100 SPREAD groups of N bundles "
             "{custom: 0.001} over 5 real raylets (+ a resource-less head), create + wait + remove, Ray's timeit "
             "(python -m fakes.ray.pgperf)")
K8S_PERF_HERE = ("kubernetes v1.36.1 test/integration/scheduler_perf SchedulingBasic run on this machine class "
                 "(tools/k8s/scheduler-perf/performance-config.yaml; make scheduler-perf; python -m "
                 "fakes.kube.schedperf): SchedulingThroughput Average, in-process apiserver, client QPS 5000")
VC_DOC = ("volcano docs/user-guide/how_to_tune_volcano_performance.md: 10,000 jobs x 1 pod in about 180 s "
          "with the admission webhook disabled (8-core Kind cluster; the benchmark, wzshiming/kube-scheduling-perf, "
          "runs vc-controller-manager and vc-scheduler with --kube-api-qps/--kube-api-burst 1000)")

# 2,000 jobs, not the guide's 10,000: vc-controller-manager creates the pods at about 6 a second
# here, so 10,000 would hold the machine for about half an hour
VC_BENCH_JOBS = 2000
VC_HERE = ("Volcano's tuning-guide case (benchmark 1 of docs/user-guide/how_to_tune_volcano_performance.md) on this "
           f"machine class: {VC_BENCH_JOBS:,} one-pod vcjobs created at once by 16 client threads onto 2,000 KWOK "
           "nodes, no admission webhook, vc-scheduler v1.14.1 and vc-controller-manager at "
           "--kube-api-qps/--kube-api-burst 1000 (python -m fakes.volcano.costcurve --sizes 2000 --bench-jobs "
           f"{VC_BENCH_JOBS}); pods bound per second from the first create to the last bind")
VC_BENCH = f"results/fidelity-scale/volcano/bench-{VC_BENCH_JOBS}-jobs-2000n.json"
# the same command again on 2026-12-07, after the twin's controller was given the machine's cores:
# no part of the twin was looked at against it before it ran
VC_BENCH_RERUN = f"results/fidelity-scale/volcano/bench-heldout-2026-12-07/bench-{VC_BENCH_JOBS}-jobs-2000n.json"
VC_CURVE_CLIENT = {"fleet.nodes": 2000, "schedulers.volcano.controller_qps": 1000.0,
                   "schedulers.volcano.controller_burst": 1000,
                   "schedulers.volcano.api_qps": 1000.0, "schedulers.volcano.api_burst": 1000}


ROOT = Path(os.environ.get("GANGSTORM_ROOT") or Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class Anchor:
    scheduler: str
    name: str
    published: float | None                           # the publication's figure; None: measured here
    unit: str
    source: str
    role: str                                         # "fit", "held_out" or "floor" (a minimum, never a target)
    scenario: dict                                    # scenario overrides (fleet, scheduler settings)
    jobs: Callable[[], list[Job]]                     # the workload
    measured: Callable[[Recorder], float]             # the figure, as the publication measures it
    end_s: float = 3600.0
    notes: str = ""
    extra: dict = field(default_factory=dict)
    profile: str = "reference"                        # the profile this anchor checks
    measured_file: str = ""                           # measured here: the result file (under ROOT)
    # measured here: what the machine's load set during the run (the apiserver's latencies), read
    # from the result file, as the held-out cases re-measure them; the scheduler's costs stay
    remeasured: Callable[[], dict] | None = None
    # measured here: one line of what the run and the twin measured beside the figure (its result
    # file's data, the twin's recorder and target), where a ratio alone does not say why
    explain: Callable[[dict, Recorder, Any], str] | None = None
    # outside the goal band: why, measured when the validation runs (the profile it ran on given),
    # so every result that prints OUTSIDE prints the measured reason beside it
    outside_because: Callable[[Profile], str] | None = None


def figure(anchor: Anchor) -> tuple[float | None, str]:
    """The anchor's figure and its origin: the publication's, or the one its benchmark measured
    here (None until that benchmark has run: the origin then names the command to run)."""
    if not anchor.measured_file:
        return anchor.published, "published"
    path = ROOT / anchor.measured_file
    try:
        data = json.loads(path.read_text())
        value = float(data["figure"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, f"not measured yet ({anchor.measured_file}; {anchor.source})"
    return value, f"measured here: {data.get('command') or anchor.source}"


def anchors_for(profile_name: str) -> list[Anchor]:
    """The anchors that check a profile: its own, or the published ones for a profile without any."""
    own = [a for a in ANCHORS if a.profile == profile_name]
    return own or [a for a in ANCHORS if a.profile == "reference"]


def _job(i: int, t: float, members: int = 1, gpus: int = 1, dur: float = 1e6, cls: str = "small") -> Job:
    return Job(id=i, tenant="perf", queue="perf", cls=cls, members=members, gpus_per_member=gpus,
               duration_s=dur, submit_s=t, min_available=members, cpus_per_member=0)


def _burst(n_init: int, n_measured: int, **kw) -> Callable[[], list[Job]]:
    """scheduler_perf's shape: init pods first, then the measured pods, all created at once."""
    return lambda: ([_job(i, 0.0, **kw) for i in range(n_init)]
                    + [_job(n_init + i, 1.0, **kw) for i in range(n_measured)])


def throughput(first_id: int, of: str = "admit") -> Callable[[Recorder], float]:
    """Measured jobs (id >= first_id) per second, from the first one's submission, or from the last
    init job's admission if later (scheduler_perf starts measuring once its init pods are
    scheduled), to the last measured one's acceptance, admission or finish (`of`)."""
    def measure(rec: Recorder) -> float:
        ids = np.array([j.id for j in rec.jobs]) >= first_id
        end = {"accept": rec.accepted_t, "admit": rec.admit, "finish": rec.finish}[of]
        done = end[ids]
        if np.isnan(done).any() or not len(done):
            return float("nan")
        start = rec.submit[ids].min()
        if (~ids).any():
            start = max(start, float(np.nanmax(rec.admit[~ids])))
        return float(ids.sum() / (done.max() - start))
    return measure


def sampled_throughput(first_id: int, interval_s: float = 1.0) -> Callable[[Recorder], float]:
    """scheduler_perf's SchedulingThroughput Average (test/integration/scheduler_perf/util.go
    throughputCollector): from the start of the measured pods (their submission, or the last init
    job's admission if later), a sample every interval_s; the first tick that sees a measured pod
    admitted starts the count, each later tick that sees more gives (new admissions) / (time since
    the last counted tick), repeated for ticks that saw none; the pods admitted after the last tick
    are not sampled (the collector stops when all are scheduled). The figure is the samples' mean; a
    run too short for one sample (scheduler_perf then reports none) gives the plain throughput."""
    def measure(rec: Recorder) -> float:
        ids = np.array([j.id for j in rec.jobs]) >= first_id
        done = np.sort(rec.admit[ids])
        if np.isnan(done).any() or not len(done):
            return float("nan")
        start = rec.submit[ids].min()
        if (~ids).any():
            start = max(start, float(np.nanmax(rec.admit[~ids])))
        samples: list[float] = []
        last_n, last_t, skipped, started = 0, start, 0, False
        tick = start + interval_s
        while tick <= done[-1]:
            n = int(np.searchsorted(done, tick, side="right"))
            if n and not started:
                started, last_n, last_t = True, n, tick
            elif started and n > last_n:
                samples += [(n - last_n) / (tick - last_t)] * (skipped + 1)
                last_n, last_t, skipped = n, tick, 0
            elif started:
                skipped += 1
            tick += interval_s
        return float(np.mean(samples)) if samples else float(ids.sum() / (done[-1] - start))
    return measure


def _stream(rate: float, seconds: float, dur: float) -> Callable[[], list[Job]]:
    return lambda: [_job(i, i / rate, dur=dur) for i in range(int(rate * seconds))]


def _replayed(measured_file: str, dur: float, fallback_rate: float = 200.0,
              fallback_n: int = 1000) -> Callable[[], list[Job]]:
    """The submissions a burst benchmark made here, at the offsets its sbatch calls started
    (`offsets_s` in its result file), shifted by how long after slurmctld's full-queue pass the
    burst began (the twin's t=0 is that pass): the twin is offered exactly what slurmctld was
    offered. Until the benchmark has run, `fallback_n` jobs at `fallback_rate` a second."""
    def jobs() -> list[Job]:
        try:
            data = json.loads((ROOT / measured_file).read_text())
            shift = float((data.get("aligned") or {}).get("since_full_pass_s") or 0.0)
            offsets = [shift + float(x) for x in data["offsets_s"]]
        except (OSError, ValueError, KeyError, TypeError):
            offsets = [i / fallback_rate for i in range(fallback_n)]
        return [_job(i, t, dur=dur) for i, t in enumerate(offsets)]
    return jobs


# which of the apiserver's requests in a Volcano bench are the twin's creates and its writes
VC_CREATES = ("POST pods", "POST podgroups")
VC_WRITES = ("PUT jobs/status", "PUT podgroups", "POST pods/binding")


def vc_latencies(measured_file: str) -> Callable[[], dict]:
    """The apiserver's mean latency over the Volcano bench (its `apiserver_requests`): the job
    controller's and scheduler's creates as control_plane.create_ms, their status updates and binds
    as write_ms, each the count-weighted mean; nothing if the file has no such record."""
    def over() -> dict:
        try:
            req = json.loads((ROOT / measured_file).read_text())["metrics"]["bench"]["apiserver_requests"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        out = {}
        for key, kinds in (("control_plane.create_ms", VC_CREATES), ("control_plane.write_ms", VC_WRITES)):
            rows = [req[k] for k in kinds if k in req and req[k].get("n")]
            n = sum(r["n"] for r in rows)
            if n:
                out[key] = round(sum(r["n"] * r["mean_ms"] for r in rows) / n, 4)
        return out
    return over


def vc_bind_pace(data: dict, rec: Recorder, target) -> str:
    """The bench's pace inside its long sessions against the twin's (loadgen/measure/bursts.py)."""
    bench = data["metrics"]["bench"]
    real = stream_ms_per_pod(bursts(bench["pods_bound_s"]))
    sim = stream_ms_per_pod(bursts(rec.admit[~np.isnan(rec.admit)].tolist()))
    if real is None or sim is None:
        return ""
    return (f"inside the sessions that bound 100 pods or more a pod was bound every {real:.1f} ms here, every "
            f"{sim:.1f} ms in the twin (its walk costs fitted on the cost curve's light phase); the machine "
            f"used {bench.get('machine_cores')} cores over the run")


def _vc_here(path: str, suffix: str) -> Anchor:
    return Anchor("volcano", f"volcano-{VC_BENCH_JOBS // 1000}k-jobs-1-pod-here{suffix}", None, "pods/s", VC_HERE,
                  "held_out", VC_CURVE_CLIENT, _replayed(path, 1e6, fallback_rate=100.0, fallback_n=VC_BENCH_JOBS),
                  throughput(0), profile="local", measured_file=path, remeasured=vc_latencies(path),
                  explain=vc_bind_pace,
                  notes="pods bound per second from the first vcjob create to the last bind; the twin is offered the "
                        "benchmark's own create times and the apiserver's latencies over it")


SLURM_BURST = ("fakes/slurm/burst.py on this machine (Slurm 22.05.8, 2 shared cores): 1,000 one-GPU jobs "
               "submitted as fast as 4 sbatch workers allow onto an idle fleet, Slurm's scheduler defaults")


def _slurm_burst(what: str, nodes: int, role: str) -> Anchor:
    path = f"results/fidelity-scale/slurm/bench-burst-{what}-{nodes}n.json"
    of, dur = {"accept": ("accept", 120.0), "start": ("admit", 120.0), "execute": ("finish", 0.0)}[what]
    return Anchor("slurm", f"slurm-burst-{what}-{nodes}n", None, "jobs/s", SLURM_BURST, role,
                  {"fleet.nodes": nodes}, _replayed(path, dur), throughput(0, of=of), end_s=900.0,
                  profile="local", measured_file=path,
                  notes=f"{what}ed jobs per second; the twin is offered the benchmark's own submission times")


SLURM_EXECUTE_HERE = "results/fidelity-scale/slurm/bench-burst-execute-500n.json"


def slurm_cadence(profile: Profile) -> str:
    """Why no CPU factor reaches the page's 500 executions/s: the real slurmctld's CPU in the same
    kind of burst here, and the twin's rate with slurmctld's costs 1,000x smaller."""
    data = json.loads((ROOT / SLURM_EXECUTE_HERE).read_text())
    w = data["window"]
    faster = _scaled(profile, "slurm", {("knob", "slurmctld"): 0.001})
    fast = reproduce(_by_name("slurm-execute-500-jobs-per-s"), faster)
    return (f"at Slurm's default scheduler settings the scheduling cadence, not the CPU, sets the execution rate: "
            f"here the real slurmctld executed {data['executed_per_s']:g} jobs/s on {data['nodes']:,} nodes using "
            f"{w['slurmctld_cpu_s']:g} CPU-s in {w['duration_s']:g} s ({SLURM_EXECUTE_HERE}), and the twin with "
            f"slurmctld's costs 1,000x smaller executes {fast:.0f} jobs/s, so 500/s needs settings the page does "
            f"not name")


def perf_cycle(data: dict, rec: Recorder, target) -> str:
    """The benchmark's own scheduling_algorithm_duration beside the twin's serial cycle."""
    h = data["histograms_ms"]["scheduling_algorithm_duration"]
    cp = target.control_plane()
    wins = [w for w in data.get("runs_window", []) if w]
    full = (f"; while its measured pods bound it used {np.median([w['benchmark_cores'] for w in wins]):.2f} cores, "
            f"{np.median([w['cpu_ms_per_pod'] for w in wins]):.2f} ms of CPU a pod" if wins else "")
    shared = (f", {cp['cycles_short_of_cores'] / max(cp.get('scheduled_pods', 1), 1):.0%} of them short of cores"
              if "cycles_short_of_cores" in cp else "")
    return (f"scheduling_algorithm_duration here: mean {h['Average']:.2f} ms, p50 {h['Perc50']:.2f}, p90 "
            f"{h['Perc90']:.2f}, p99 {h['Perc99']:.2f}{full}; the twin's serial cycle "
            f"{cp['scheduling_cycle_ms_mean']:.2f} ms (the KWOK stack's quiet costs{shared})")


# scheduler_perf's client (scheduler_perf/util.go): QPS and burst 5000, and the pods created by the
# benchmark's own Go client in the same process, not at the pace of gangstorm's Python client
PERF_CLIENT = {"schedulers.kube.api_qps": 5000.0, "schedulers.kube.api_burst": 5000,
               "schedulers.kube.client_create_ms": 0.0}


SHARED_CORES = "results/fidelity-scale/kube/shared-cores.json"


def perf_machine() -> dict:
    """scheduler_perf's machine as the twin sees it: the cores it fills and its own CPU per pod
    besides the cycle (in-process apiserver, etcd, client, garbage collector), from
    loadgen/calibration/shared_cores.py; without that file, nothing shared (cores 0)."""
    try:
        fit = json.loads((ROOT / SHARED_CORES).read_text())
        return {"control_plane.cores": float(fit["cores"]), "control_plane.idle_cores": 0.0,
                "control_plane.pod_cpu_ms": float(fit["inprocess_pod_cpu_ms"])}
    except (OSError, ValueError, KeyError, TypeError):
        return {"control_plane.cores": 0.0}


def _perf_here(workload: str, nodes: int, init: int, measured: int, role: str) -> Anchor:
    """scheduler_perf SchedulingBasic/<workload> as measured here: init pods, then the measured ones
    all at once, on `nodes` empty nodes; the figure is measured the way scheduler_perf measures it.
    Its nodes hold 40 of its pods (4 CPUs, 100m each); ours one per GPU, so enough GPUs for all."""
    gpus = max(8, -(-(init + measured) // nodes) + 1)
    return Anchor("kube", f"kube-perf-{workload}", None, "pods/s", K8S_PERF_HERE, role,
                  {**PERF_CLIENT, "fleet.nodes": nodes, "fleet.gpus_per_node": gpus},
                  _burst(init, measured), sampled_throughput(init), profile="local",
                  measured_file=f"results/fidelity-scale/kube/bench-{workload}.json", remeasured=perf_machine,
                  explain=perf_cycle)


def _ray(bundles: int) -> Callable[[], list[Job]]:
    return lambda: [_job(i, 0.0, members=bundles, dur=1e-3, cls="large" if bundles > 1 else "small")
                    for i in range(100)]


def _ray_anchor(bundles: int, published: float | None, role: str, profile: str = "reference") -> Anchor:
    # 5 nodes; bundles take one GPU each and 64 GPUs a node is room for any 40-bundle SPREAD group.
    local = profile == "local"
    return Anchor("ray", f"ray-100-groups-{bundles}-bundles", published, "groups/s", RAY_LOCAL if local else RAY_PR,
                  role, {"fleet.nodes": 5, "fleet.gpus_per_node": 64, "schedulers.ray.multi_node_strategy": "SPREAD",
                         "schedulers.ray.single_node_strategy": "SPREAD"},
                  _ray(bundles), throughput(0, of="finish"), end_s=600.0, profile=profile,
                  measured_file=f"results/fidelity-scale/ray/bench-pg-100x{bundles}.json" if local else "")


ANCHORS: list[Anchor] = [
    Anchor("kube", "kube-perf-5000Nodes_10000Pods-pr131345", 619.1, "pods/s", K8S_PR131345, "fit",
           {**PERF_CLIENT, "fleet.nodes": 5000},
           _burst(1000, 10_000), sampled_throughput(1000)),
    Anchor("kube", "kube-30000-nodes-created-2000-per-s", 300.0, "pods/s", K8S_GODEL, "held_out",
           {"fleet.nodes": 30_000, "schedulers.kube.api_qps": 10_000.0, "schedulers.kube.api_burst": 10_000,
            "schedulers.kube.client_create_ms": 0.0},
           _stream(2000.0, 30.0, 1e6), throughput(0),
           notes="60,000 pods created at 2,000/s (the publication: 800,000 on nodes that hold 27 each); measured: "
                 "pods bound per second from the first create to the last bind"),
    Anchor("kube", "kube-perf-5000Nodes_10000Pods-ci-floor", 270.0, "pods/s", K8S_FLOOR, "floor",
           {**PERF_CLIENT, "fleet.nodes": 5000},
           _burst(1000, 10_000), sampled_throughput(1000)),
    # the shared cores' line is fitted on these two (loadgen/calibration/shared_cores.py)
    _perf_here("500Nodes", 500, 500, 1000, "fit"),
    _perf_here("2000Nodes", 2000, 1000, 4000, "fit"),
    _perf_here("5000Nodes_10000Pods", 5000, 1000, 10_000, "held_out"),
    _perf_here("10000Nodes_10000Pods", 10_000, 1000, 10_000, "held_out"),
    _perf_here("500Nodes_5000Pods", 500, 500, 5000, "held_out"),          # longer runs at the smaller sizes
    _perf_here("2000Nodes_10000Pods", 2000, 1000, 10_000, "held_out"),
    # The page names no fleet size. The submit RPC tests every node (0.6 ms + 2.4 us a node here,
    # results/fidelity-scale/slurm/curve-*n.json), so the size sets the factor: at 10,000 nodes 1,000
    # submissions/s would need a CPU ~25x faster than this machine's, at 1,000 nodes ~3x; both use 1,000.
    Anchor("slurm", "slurm-accept-1000-submissions-per-s", 1000.0, "jobs/s", SLURM_DOC, "fit",
           {"fleet.nodes": 1000}, _stream(2000.0, 5.0, 1e6), throughput(0, of="accept"),
           notes="submissions offered at 2,000/s; measured: submit RPCs answered per second; 1,000 nodes "
                 "(the page names none)"),
    Anchor("slurm", "slurm-execute-500-jobs-per-s", 500.0, "jobs/s", SLURM_DOC, "held_out",
           {"fleet.nodes": 1000}, _stream(1000.0, 10.0, 1.0), throughput(0, of="finish"),
           notes="1-second jobs offered at 1,000/s for 10 s onto 1,000 nodes; measured: jobs finished per "
                 "second; predicted with the factor the submission figure gave",
           outside_because=slurm_cadence),
    _ray_anchor(1, 712.92, "fit"),
    _ray_anchor(10, 264.07, "fit"),
    _ray_anchor(20, 130.95, "held_out"),
    _ray_anchor(40, 46.33, "fit"),
    # the same shape measured here on 5 real raylets (python -m fakes.ray.pgperf); the 20-bundle run is
    # held out whole: neither its figure nor its GCS statistics enter the local profile
    _ray_anchor(1, None, "fit", "local"),
    _ray_anchor(10, None, "fit", "local"),
    _ray_anchor(20, None, "held_out", "local"),
    _ray_anchor(40, None, "fit", "local"),
    *[_slurm_burst(what, nodes, role) for nodes, role in ((500, "fit"), (2000, "held_out"))
      for what in ("accept", "start", "execute")],
    # the same burst inside the 5,000- and 10,000-node cost-curve runs (no execute phase there)
    *[_slurm_burst(what, nodes, "held_out") for nodes in (5000, 10000) for what in ("accept", "start")],
    Anchor("volcano", "volcano-10k-jobs-1-pod", 10_000 / 180.0, "pods/s", VC_DOC, "held_out",
           VC_CURVE_CLIENT, _burst(0, 10_000), throughput(0)),
    # the same case measured here, held out: the local profile's session costs come from the cost
    # curve (python -m loadgen.calibration.volcano_curve), never from this run; the twin is offered
    # the run's own create times (the Python client's pace is not Volcano's)
    _vc_here(VC_BENCH, ""),
    _vc_here(VC_BENCH_RERUN, "-rerun"),
]


def scenario_for(anchor: Anchor, profile: Profile) -> Scenario:
    over = {"duration_h": 1.0, "warmup_h": 0.0, "drain_h": 0.0, **anchor.scenario,
            **(anchor.remeasured() if anchor.remeasured else {}),
            f"schedulers.{anchor.scheduler}.observe_ms": 0.0}
    return from_dict({}, f"<anchor {anchor.name}>", profile, overrides=over)


def explanation(anchor: Anchor, rec: Recorder, target) -> str:
    """The anchor's explain line, or "" without one (or before its benchmark has run)."""
    if anchor.explain is None or not anchor.measured_file:
        return ""
    try:
        data = json.loads((ROOT / anchor.measured_file).read_text())
        return anchor.explain(data, rec, target)
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def simulate(anchor: Anchor, profile: Profile):
    """The anchor's workload on the simulated scheduler timed by `profile`: (recorder, target)."""
    sc = scenario_for(anchor, profile)
    jobs = anchor.jobs()
    target = target_class(anchor.scheduler, "sim")(TargetContext(
        fleet=sc.fleet(), config=sc.scheduler_config(anchor.scheduler),
        control_plane=sc.section("control_plane"), seed=sc.seed))
    rec = Recorder(jobs)
    target.start()
    run_virtual(target, jobs, [], anchor.end_s, anchor.end_s, rec)
    return rec, target


def reproduce(anchor: Anchor, profile: Profile) -> float:
    """The anchor's figure from the simulated scheduler timed by `profile`."""
    return anchor.measured(simulate(anchor, profile)[0])


def table(profile: Profile, anchors: list[Anchor] | None = None) -> list[dict]:
    """One row per anchor: its figure (published or measured here), the simulated figure and
    their ratio (figure / sim)."""
    rows = []
    for a in anchors if anchors is not None else anchors_for(profile.name):
        value, origin = figure(a)
        rec, target = simulate(a, profile)
        sim = a.measured(rec)
        why = explanation(a, rec, target)
        ok = value is not None and sim and sim == sim
        ratio = round(value / sim, 3) if ok else None
        outside = ratio is not None and a.role == "held_out" and not GOAL_RATIO[0] <= ratio <= GOAL_RATIO[1]
        because = a.outside_because(profile) if outside and a.outside_because else ""
        rows.append({"scheduler": a.scheduler, "anchor": a.name, "role": a.role, "unit": a.unit,
                     "figure": value, "origin": origin, "sim": round(sim, 2),
                     "ratio": ratio, "source": a.source,
                     **({"meets_floor": bool(ok and sim >= value)} if a.role == "floor" else {}),
                     **({"published": a.published} if origin == "published" else {}),
                     **({"notes": a.notes} if a.notes else {}),
                     **({"explain": why} if why else {}),
                     **({"outside_because": because} if because else {})})
    return rows


# What the reference fit may move, per scheduler. A list of parameters is one knob that scales
# them together (one published figure cannot split a fixed from a per-node cost, so their measured
# ratio is kept); a (section, key, lo, hi) tuple is a knob that sets that parameter's value.
KNOBS: dict[str, dict[str, list[tuple[str, str]] | tuple[str, str, float, float]]] = {
    "kube": {"cycle": [("kube", "cycle_base_ms"), ("kube", "cycle_per_node_us"), ("kube", "score_per_node_us")]},
    # one factor for all of slurmctld's work (one C process serialised by one set of locks, so a
    # faster CPU speeds every part alike): fitted to the submission figure, the execution figure held out
    "slurm": {"slurmctld": [("slurm", k) for k in (
        "rpc_ms", "rpc_per_node_us", "main_cycle_base_ms", "main_cycle_per_pending_us", "main_cycle_per_job_us",
        "main_cycle_per_job_node_ns", "main_cycle_per_fail_us", "main_cycle_per_fail_node_ns",
        "main_cycle_per_skip_us", "bf_cycle_base_ms", "bf_cycle_per_job_us", "bf_cycle_per_job_node_ns",
        "bf_cycle_per_start_us", "bf_cycle_per_start_node_ns", "agent_ms")]},
    "volcano": {"session": [("volcano", "session_base_ms"), ("volcano", "session_per_node_us"),
                            ("volcano", "session_per_task_us"), ("volcano", "reject_per_node_us"),
                            ("volcano", "feasible_per_node_us")]},
}


# Schedulers whose reference costs are this machine's measured costs times measured ratios of the
# same benchmark, published over measured here (no search). For Ray the benchmark's time per group
# is (1 + gcs_followup_ratio) x the GCS's scheduling time, a per-group part a (base + two round trips)
# plus a per-bundle part p(B) (per_bundle x B + sq x sum k^2); the two ratios f_group, f_bundle are
# the ones that turn this machine's a and p(B) into the published times at the fit anchors (linear
# least squares of the relative error; the same anchors the local profile is measured on, 1, 10 and
# 40 bundles, so 20 is held out in both). The per-node costs (the GCS's own work, measured
# here on fakelets where no raylet shares the cost) take the per-group ratio; the per-bundle ratio
# also carries the raylets' share of this machine's two cores.
RATIOS: dict[str, dict[str, Any]] = {
    "ray": {"fit": [("ray-100-groups-1-bundles", 1), ("ray-100-groups-10-bundles", 10),
                    ("ray-100-groups-40-bundles", 40)],
            "nodes": 5,
            "per_group": [("ray", "gcs_base_ms"), ("ray", "commit_rtt_ms"), ("ray", "commit_per_node_ms"),
                          ("ray", "gcs_per_node_us"), ("ray", "gcs_per_node_scored_ns")],
            "per_bundle": [("ray", "gcs_per_bundle_ms"), ("ray", "gcs_per_bundle_sq_us")]},
}


def _ray_parts(profile: Profile, bundles: int, nodes: int) -> tuple[float, float, float]:
    """(per-group ms, per-bundle ms, 1 + follow-up ratio) of a SPREAD group of `bundles` on `nodes` nodes."""
    r = {k: v.value for k, v in profile.params["ray"].items()}
    per, extra = divmod(bundles, nodes)
    same = (nodes - extra) * per * per + extra * (per + 1) ** 2 if bundles >= nodes else bundles
    group = r["gcs_base_ms"] + 2 * r["commit_rtt_ms"] + 2 * r["commit_per_node_ms"] * min(bundles, nodes)
    return group, r["gcs_per_bundle_ms"] * bundles + r["gcs_per_bundle_sq_us"] * same / 1e3, 1 + r["gcs_followup_ratio"]


def measured_ratios(scheduler: str, profile: Profile) -> tuple[dict[str, float], str]:
    """{"per_group": f, "per_bundle": f} (reference cost = local cost x f) and how they were measured."""
    spec = RATIOS[scheduler]
    pub = {a.name: figure(a)[0] for a in anchors_for("reference") if a.scheduler == scheduler}
    loc = {a.name: figure(a) for a in anchors_for("local") if a.scheduler == scheduler}
    missing = [name for name, _ in spec["fit"] if loc.get(name, (None,))[0] is None]
    if missing:
        raise ValueError(f"{scheduler}: the local figures of {', '.join(missing)} are not measured yet")
    rows, rhs = [], []
    for name, b in spec["fit"]:
        group, bundle, k = _ray_parts(profile, b, spec["nodes"])
        t = 1e3 / pub[name] / k                       # the published time per group, per unit of (1 + follow-up)
        rows.append([group / t, bundle / t])
        rhs.append(1.0)
    f_group, f_bundle = (float(v) for v in np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0])
    text = (f"the release-test shape, published [{RAY_PR}] against measured here ({loc[spec['fit'][0][0]][1]}), "
            "time per group published / here: " + "; ".join(
                f"{b} bundles {1e3 / pub[name]:.4g} / {1e3 / loc[name][0]:.4g} ms" for name, b in spec["fit"])
            + f"; the local profile's per-group and per-bundle parts times {f_group:.4g} and {f_bundle:.4g} give "
            "the published times (least squares)")
    return {"per_group": f_group, "per_bundle": f_bundle}, text


def ratio_reference(profile: Profile, scheduler: str) -> tuple[Profile, list[dict], dict]:
    """The local costs times the measured ratios; the anchor rows (fit = the two the ratios come from)."""
    from loadgen.calibration.calibrate import with_values
    factors, text = measured_ratios(scheduler, profile)
    values = {key: profile.params[key[0]][key[1]].value * factors[kind]
              for kind in ("per_group", "per_bundle") for key in RATIOS[scheduler][kind]}
    scaled = with_values(profile, values)
    rows = table(scaled, [a for a in anchors_for("reference") if a.scheduler == scheduler])
    return scaled, rows, {"factors": {k: round(v, 4) for k, v in factors.items()}, "measured": text}


# Knobs no published figure of the scheduler's own can fit take the hardware factor another
# scheduler's fit found. Volcano's one figure (a 10,000-job burst on an 8-core Kind cluster) is
# set by more than the session cost: fitted to it, sessions at 2,000 nodes took 39 s. Volcano's
# session runs the same kind of Go predicate/score loop over nodes as kube-scheduler's cycle, so
# it takes kube-scheduler's factor (scheduler_perf vs this machine) and the figure is held out.
BORROWED: dict[str, tuple[str, str, str]] = {"volcano": ("kube", "cycle", "session")}


# Knobs set by a measured ratio instead of a search: the same benchmark measured here (a local
# anchor) and published (a reference fit anchor). The reference profile's costs are then this machine
# class's measured costs x (figure here / published figure), a hardware ratio with both ends measured.
MEASURED_RATIO: dict[str, tuple[str, str, str]] = {
    "kube": ("cycle", "kube-perf-5000Nodes_10000Pods", "kube-perf-5000Nodes_10000Pods-pr131345")}


# What the reference profile sets itself rather than taking from the base profile: sim runs model
# the schedulers, and the generator must never be what limits them (issue 32), so the reference
# client sends pods at no pace of its own; local keeps the pace of gangstorm's Python client here.
REFERENCE_OWN: dict[tuple[str, str], tuple[float, str, str, str]] = {
    ("kube", "client_create_ms"): (0.0, "ms", "sourced", "an ideal client: the reference profile times the "
                                   "schedulers, and the generator must never be what limits them (issue 32); local "
                                   "carries the pace of gangstorm's own Python client on this machine"),
}


def _by_name(name: str) -> Anchor:
    return next(a for a in ANCHORS if a.name == name)


def _measured_ratio(profile: Profile, scheduler: str) -> tuple[Profile, list[dict], dict]:
    knob, here_name, published_name = MEASURED_RATIO[scheduler]
    here, origin = figure(_by_name(here_name))
    published = _by_name(published_name).published
    if here is None:
        raise ValueError(f"{scheduler}: the benchmark {here_name} has not run here yet ({origin})")
    factor = here / published
    fitted = _scaled(profile, scheduler, {("knob", knob): factor})
    rows = table(fitted, [a for a in anchors_for("reference") if a.scheduler == scheduler])
    return fitted, rows, {"factors": {knob: round(factor, 4)},
                          "measured_ratio": {"here": here_name, "here_figure": here, "here_origin": origin,
                                             "published": published_name, "published_figure": published}}


def _knob_params(scheduler: str, knob: str) -> list[tuple[str, str]]:
    spec = KNOBS[scheduler][knob]
    return [spec[:2]] if isinstance(spec, tuple) else list(spec)


def _scaled(profile: Profile, scheduler: str, factors: dict[tuple[str, str], float]) -> Profile:
    from loadgen.calibration.calibrate import with_values
    values = {}
    for (_, knob), f in factors.items():
        spec = KNOBS[scheduler][knob]
        if isinstance(spec, tuple):
            values[spec[:2]] = f
        else:
            for section, key in spec:
                values[(section, key)] = profile.params[section][key].value * f
    return with_values(profile, values)


def fit_reference(profile: Profile, scheduler: str) -> tuple[Profile, list[dict], dict]:
    """Fit `scheduler`'s knobs to its fit anchors; returns the fitted profile, the anchor rows
    (fit and held-out) and the factors found."""
    import math

    from loadgen.calibration.fit import Free, search
    fit = [a for a in anchors_for("reference") if a.scheduler == scheduler and a.role == "fit"]
    free = [Free("knob", k, *(spec[2:] if isinstance(spec, tuple) else (1e-3, 1e3)))
            for k, spec in KNOBS[scheduler].items()]
    start = {("knob", k): (profile.params[spec[0]][spec[1]].value if isinstance(spec, tuple) else 1.0)
             for k, spec in KNOBS[scheduler].items()}

    def objective(factors):
        prof = _scaled(profile, scheduler, factors)
        err = 0.0
        for a in fit:
            sim = reproduce(a, prof)
            err += 100.0 if not sim or sim != sim else math.log(sim / figure(a)[0]) ** 2
        return err

    best, loss, evals = search(objective, start, free, max_evals=30 * len(free) + 20)
    fitted = _scaled(profile, scheduler, best)
    rows = table(fitted, [a for a in anchors_for("reference") if a.scheduler == scheduler])
    return fitted, rows, {"factors": {k: round(v, 4) for (_, k), v in best.items()}, "loss": round(loss, 6),
                          "evaluations": evals}


def _borrowed(profile: Profile, scheduler: str, donor: dict) -> tuple[Profile, list[dict], dict]:
    _, donor_knob, knob = BORROWED[scheduler]
    factor = donor["factors"][donor_knob]
    fitted = _scaled(profile, scheduler, {("knob", knob): factor})
    rows = table(fitted, [a for a in anchors_for("reference") if a.scheduler == scheduler])
    return fitted, rows, {"factors": {knob: factor}, "borrowed_from": f"{BORROWED[scheduler][0]} {donor_knob}"}


# the machine's cores shared by the control plane (fakes/sim/cores.py): this machine class's two
# cores and what the stack asks of them; a production-class control plane has machines of its own
SHARED_CORES_PARAMS = (("control_plane", "cores"), ("control_plane", "idle_cores"), ("control_plane", "pod_cpu_ms"),
                       ("kube", "cycle_cores"))


def without_shared_cores(base: Profile) -> Profile:
    """`base` without the shared-cores parameters (each then falls back to off): the published
    anchors ran on machines of their own, and the profile fitted to them describes such machines."""
    import copy
    out = copy.deepcopy(base)
    for section, key in SHARED_CORES_PARAMS:
        out.params.get(section, {}).pop(key, None)
    return out


def calibrate_to_anchors(schedulers: list[str], base: Profile, name: str, description: str,
                         command: str) -> tuple[Profile, dict]:
    """A profile whose throughput knobs are fitted to the published anchors (or scaled by measured
    ratios, RATIOS); the rest is `base`'s. A scheduler counts as calibrated only when it has a
    held-out anchor to validate on."""
    import copy

    from loadgen.input.profile import Param
    base = without_shared_cores(base)
    out = copy.deepcopy(base)
    out.name, out.description = name, description
    report = {}
    fits: dict[str, tuple[Profile, list[dict], dict]] = {}

    def fit_of(s: str) -> tuple[Profile, list[dict], dict]:
        if s not in fits:
            fits[s] = (_measured_ratio(base, s) if s in MEASURED_RATIO else fit_reference(base, s) if s not in BORROWED
                       else _borrowed(base, s, fit_of(BORROWED[s][0])[2]))
        return fits[s]

    for (section, key), (value, unit, prov, src) in REFERENCE_OWN.items():
        if section in schedulers and key in out.params.get(section, {}):
            out.params[section][key] = Param(value, unit, prov, src)
    for s in schedulers:
        if s in RATIOS:
            scaled, rows, info = ratio_reference(base, s)
            for kind in ("per_group", "per_bundle"):
                for section, key in RATIOS[s][kind]:
                    old = base.params[section][key]
                    out.params[section][key] = Param(
                        round(scaled.params[section][key].value, 6), old.unit, "measured",
                        f"local {old.provenance} value {old.value:g} ({old.source}) x {info['factors'][kind]:g}, "
                        f"the measured {kind.replace('_', '-')} ratio of {info['measured']}", command)
            report[s] = out.validation[s] = _validation(rows, info)
            continue
        fitted, rows, info = fit_of(s)
        fit_rows = [r for r in rows if r["role"] == "fit"]
        fit_text = "; ".join(f"{r['anchor']} {r['published']:g} {r['unit']}" for r in fit_rows)
        for knob, spec in KNOBS[s].items():
            for section, key in _knob_params(s, knob):
                old = base.params[section][key]
                how = (f"set to {info['factors'][knob]:g}" if isinstance(spec, tuple) else
                       f"{old.provenance} value {old.value:g} ({old.source}) scaled by {info['factors'][knob]:g}")
                m = info.get("measured_ratio")
                why = (f"= {m['here_figure']:g} / {m['published_figure']:g}, the same benchmark measured here "
                       f"({m['here']}: {m['here_origin']}) and published ({m['published']} [{fit_rows[0]['source']}])"
                       if m else
                       f"to match published figures: {fit_text} [{fit_rows[0]['source']}]" if fit_rows else
                       f"= the {BORROWED[s][0]} reference factor (its fit to "
                       f"{', '.join(a.name for a in ANCHORS if a.scheduler == BORROWED[s][0] and a.role == 'fit')}): "
                       "no published figure of its own isolates this cost")
                out.params[section][key] = Param(round(fitted.params[section][key].value, 6), old.unit, "fitted",
                                                 f"{how} {why}", command)
        out.validation[s] = report[s] = _validation(rows, info)
    return out, report


def revalidate(profile: Profile, schedulers: list[str]) -> dict:
    """Each scheduler's anchors run again on the profile as it is (nothing refitted): the validation
    a model change leaves, with the fit's record kept."""
    report = {}
    for s in schedulers:
        rows = table(profile, [a for a in anchors_for(profile.name) if a.scheduler == s])
        profile.validation[s] = report[s] = _validation(rows, (profile.validation.get(s) or {}).get("fit") or {})
    return report


def _validation(rows: list[dict], info: dict) -> dict:
    entry: dict[str, Any] = {"anchors": rows, "fit": info}
    floors = [r for r in rows if r["role"] == "floor"]
    if floors:
        entry["floors"] = {r["anchor"]: {"floor": r["figure"], "sim": r["sim"],
                                         "met": r["meets_floor"]} for r in floors}
    held = [r for r in rows if r["role"] == "held_out"]
    if held:
        ratios = [r["ratio"] for r in held if r["ratio"] is not None]
        entry["held_out"] = {"anchors": ", ".join(r["anchor"] for r in held),
                             "ratio": [min(ratios), max(ratios)] if ratios else None,
                             "within_goal": all(GOAL_RATIO[0] <= x <= GOAL_RATIO[1] for x in ratios) and bool(ratios)}
        because = "; ".join(f"{r['anchor']}: {r['outside_because']}" for r in held if r.get("outside_because"))
        if because:
            entry["held_out"]["because"] = because
    return entry
