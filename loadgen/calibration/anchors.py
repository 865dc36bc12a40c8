"""Published figures the reference profile is fitted to (role "fit") or checked against ("held_out").

Each anchor is rebuilt as the workload its publication measured, run on the simulated scheduler
with a profile, and measured the way the publication measured it (throughput over the measured
jobs). `gangstorm calibrate --anchors` fits the reference profile to the fit anchors and validates
it on the held-out ones; `gangstorm profile anchors` prints the table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext
from loadgen.profile import Profile
from loadgen.recorder import Recorder
from loadgen.runner import run_virtual
from loadgen.scenario import Scenario, from_dict

K8S_PERF = ("kubernetes test/integration/scheduler_perf/misc/performance-config.yaml, SchedulingBasic "
            "(throughput threshold = minimum average pods/s; in-process apiserver, client QPS 5000)")
SLURM_DOC = "Slurm documentation doc/html/slurm.shtml (Performance)"
RAY_PR = ("ray-project/ray PR #63839 release test placement_group_performance_test.py: 100 groups of N "
          "bundles, SPREAD over 5 nodes, create + wait + remove (baseline column)")
VC_DOC = ("volcano docs/user-guide/how_to_tune_volcano_performance.md: 10,000 jobs x 1 pod in about 180 s "
          "with the admission webhook disabled (8-core Kind cluster)")


@dataclass(frozen=True)
class Anchor:
    scheduler: str
    name: str
    published: float
    unit: str
    source: str
    role: str                                         # "fit" or "held_out"
    scenario: dict                                    # scenario overrides (fleet, scheduler settings)
    jobs: Callable[[], list[Job]]                     # the workload
    measured: Callable[[Recorder], float]             # the figure, as the publication measures it
    end_s: float = 3600.0
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _job(i: int, t: float, members: int = 1, gpus: int = 1, dur: float = 1e6, cls: str = "small") -> Job:
    return Job(id=i, tenant="perf", queue="perf", cls=cls, members=members, gpus_per_member=gpus,
               duration_s=dur, submit_s=t, min_available=members, cpus_per_member=0)


def _burst(n_init: int, n_measured: int, **kw) -> Callable[[], list[Job]]:
    """scheduler_perf's shape: init pods first, then the measured pods, all created at once."""
    return lambda: ([_job(i, 0.0, **kw) for i in range(n_init)]
                    + [_job(n_init + i, 1.0, **kw) for i in range(n_measured)])


def throughput(first_id: int, of: str = "admit") -> Callable[[Recorder], float]:
    """Measured jobs (id >= first_id) per second, from the first one's submission to the last one's
    admission (or finish)."""
    def measure(rec: Recorder) -> float:
        ids = np.array([j.id for j in rec.jobs]) >= first_id
        end = rec.admit if of == "admit" else rec.finish
        done = end[ids]
        if np.isnan(done).any() or not len(done):
            return float("nan")
        return float(ids.sum() / (done.max() - rec.submit[ids].min()))
    return measure


def _stream(rate: float, seconds: float, dur: float) -> Callable[[], list[Job]]:
    return lambda: [_job(i, i / rate, dur=dur) for i in range(int(rate * seconds))]


def _ray(bundles: int) -> Callable[[], list[Job]]:
    return lambda: [_job(i, 0.0, members=bundles, dur=1e-3, cls="large" if bundles > 1 else "small")
                    for i in range(100)]


def _ray_anchor(bundles: int, published: float, role: str) -> Anchor:
    # 5 nodes; bundles take one GPU each and 64 GPUs a node is room for any 40-bundle SPREAD group.
    return Anchor("ray", f"ray-100-groups-{bundles}-bundles", published, "groups/s", RAY_PR, role,
                  {"fleet.nodes": 5, "fleet.gpus_per_node": 64, "schedulers.ray.multi_node_strategy": "SPREAD",
                   "schedulers.ray.single_node_strategy": "SPREAD"},
                  _ray(bundles), throughput(0, of="finish"), end_s=600.0)


ANCHORS: list[Anchor] = [
    Anchor("kube", "kube-5000-nodes-10k-pods", 680.0, "pods/s", K8S_PERF, "fit",
           {"fleet.nodes": 5000, "schedulers.kube.api_qps": 5000.0, "schedulers.kube.api_burst": 5000},
           _burst(1000, 10_000), throughput(1000)),
    Anchor("kube", "kube-5000-nodes-50k-pods", 810.0, "pods/s", K8S_PERF, "held_out",
           {"fleet.nodes": 5000, "schedulers.kube.api_qps": 5000.0, "schedulers.kube.api_burst": 5000},
           _burst(5000, 30_000), throughput(5000),
           notes="50,000 measured pods in the publication; 30,000 here (5,000 nodes x 8 GPUs hold 40,000)"),
    Anchor("slurm", "slurm-accept-1000-submissions-per-s", 1000.0, "jobs/s", SLURM_DOC, "fit",
           {"fleet.nodes": 10_000}, _stream(2000.0, 20.0, 1e6), throughput(0, of="admit"),
           notes="submissions accepted per second: measured as jobs admitted when nothing else limits them"),
    Anchor("slurm", "slurm-execute-500-jobs-per-s", 500.0, "jobs/s", SLURM_DOC, "fit",
           {"fleet.nodes": 1000}, _stream(1000.0, 20.0, 1.0), throughput(0, of="finish")),
    _ray_anchor(1, 685.94, "fit"),
    _ray_anchor(10, 247.09, "fit"),
    _ray_anchor(20, 112.96, "held_out"),
    _ray_anchor(40, 38.62, "fit"),
    Anchor("volcano", "volcano-10k-jobs-1-pod", 10_000 / 180.0, "pods/s", VC_DOC, "fit",
           {"fleet.nodes": 2000}, _burst(0, 10_000), throughput(0)),
]


def scenario_for(anchor: Anchor, profile: Profile) -> Scenario:
    over = {"duration_h": 1.0, "warmup_h": 0.0, "drain_h": 0.0, **anchor.scenario,
            f"schedulers.{anchor.scheduler}.observe_ms": 0.0}
    return from_dict({}, f"<anchor {anchor.name}>", profile).with_overrides(**over)


def reproduce(anchor: Anchor, profile: Profile) -> float:
    """The anchor's figure from the simulated scheduler timed by `profile`."""
    sc = scenario_for(anchor, profile)
    jobs = anchor.jobs()
    target = target_class(anchor.scheduler, "sim")(TargetContext(
        fleet=sc.fleet(), config=sc.scheduler_config(anchor.scheduler),
        control_plane=sc.section("control_plane"), seed=sc.seed))
    rec = Recorder(jobs)
    target.start()
    run_virtual(target, jobs, [], anchor.end_s, anchor.end_s, rec)
    return anchor.measured(rec)


def table(profile: Profile, anchors: list[Anchor] | None = None) -> list[dict]:
    rows = []
    for a in anchors or ANCHORS:
        sim = reproduce(a, profile)
        rows.append({"scheduler": a.scheduler, "anchor": a.name, "role": a.role, "unit": a.unit,
                     "published": a.published, "sim": round(sim, 2),
                     "ratio": round(a.published / sim, 3) if sim and sim == sim else None, "source": a.source,
                     **({"notes": a.notes} if a.notes else {})})
    return rows
