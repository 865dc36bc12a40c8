"""Measure the simulated Kueue's profile parameters on the real one (kueue-manager v0.19.2 and
kube-scheduler on 4 KWOK nodes, this machine), as fakes/kueue/sim.py cuts an admission:

  workload_create_ms  last pod's create returned -> Workload seen        (mean over gangs)
  admission_cycle_ms  kueue_admission_attempt_duration_seconds            (sum / count)
  ungate_ms           Workload Admitted seen -> first member seen bound   (mean)
  pod_bind_ms         between members seen bound                          (mean gap)
  release_ms          gang FINISHED seen -> the waiting gang's Admitted seen, less what a gang
                      with free quota takes from queued to Admitted (mean of each)
  observe_ms          0: every stage above is measured between instants this client saw, so the
                      watch's lag is inside them

Usage: PYTHONPATH=. python tools/kueue/measure.py [--gangs 12] [--out results/kueue-measure.json]
(under `flock /work/cpu.lock` on a shared machine). Prints the figures as JSON.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from fakes.kueue.target import RealKueue
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import TargetContext


def gang(i: int, members: int, duration_s: float) -> Job:
    return Job(id=i, tenant="measure", queue="measure", cls="large" if members > 1 else "small", members=members,
               gpus_per_member=8, duration_s=duration_s, submit_s=0.0, min_available=members, cpus_per_member=8)


def run(gangs: int, run_dir: Path) -> dict:
    ctx = TargetContext(fleet=Fleet(nodes=4, leaf_size=2, leaves_per_spine=2), seed=1, run_dir=run_dir,
                        config={"queues": {"nominal_gpus": {"measure": 32}}},
                        control_plane={"etcd_quota_bytes": 512 * 1024**2})
    target = RealKueue(ctx)
    events = []
    t0 = time.monotonic()
    try:
        target.start()
        now = lambda: time.monotonic() - t0     # noqa: E731
        # two 16-GPU gangs fill the 32 GPUs; each next one waits for a finish (release)
        for i in range(gangs):
            events += target.submit(gang(i, 2, 3.0 + 0.5 * (i % 3)), now())
        deadline = time.monotonic() + 60 + 10 * gangs
        while sum(e.kind == Kind.FINISHED for e in events) < gangs:
            if time.monotonic() > deadline:
                raise TimeoutError("gangs did not finish")
            events += target.advance(now())
            time.sleep(0.02)
        figures = target.kueue_figures()
        manager = target.control_plane()["kueue"]["manager"]
    finally:
        target.stop()
    stages = figures["stages_s"]
    cycle_ms = manager["admission_attempt_ms_mean"]
    finished = sorted(e.t for e in events if e.kind == Kind.FINISHED)
    waited, at_once = [], []
    for wl in target.book.workloads.values():
        before = [f for f in finished if f < wl.first_admitted]
        if wl.first_admitted - wl.first_seen > 0.5 and before:    # it waited for quota: a release let it in
            waited.append(wl.first_admitted - before[-1])
        elif not before:
            at_once.append(wl.first_admitted - wl.first_seen)       # queued -> Admitted with quota free
    # a finish -> the next Admitted: the release, then what a gang with free quota takes to be admitted
    release_ms = (max(0.0, (float(np.mean(waited)) - float(np.mean(at_once))) * 1000.0)
                  if waited and at_once else None)
    return {"workload_create_ms": round(stages["workload_create"]["mean"] * 1000.0, 3),
            "admission_cycle_ms": cycle_ms,
            "ungate_ms": round(stages["ungate"]["mean"] * 1000.0, 3),
            "pod_bind_ms": round(stages["pod_bind"]["mean"] * 1000.0, 3),
            "release_ms": None if release_ms is None else round(release_ms, 3),
            "observe_ms": 0.0,
            "admitted_with_free_quota_ms": round(float(np.mean(at_once)) * 1000.0, 3) if at_once else None,
            "finish_to_next_admitted_ms": [round(w * 1000.0, 1) for w in waited],
            "samples": {k: v.get("n", 0) for k, v in stages.items()} | {"release": len(waited)},
            "stages_s": stages, "manager": manager}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gangs", type=int, default=12)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kueue-measure-") as d:
        out = run(args.gangs, Path(d))
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
