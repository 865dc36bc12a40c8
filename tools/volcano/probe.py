"""Measure how fast real Volcano binds pods on a KWOK cluster: a burst of gangs, then the bind rate.

    .venv/bin/python tools/volcano/probe.py --nodes 1000 --jobs 500 --members 4 --gpus 2

Submits every job at t=0 (open loop, as fast as the client can create them), then drives the
target until all are admitted. Prints one JSON line: pods/s between the first and the last bind,
admission quantiles, submit rate and vc-scheduler session figures. Stops everything it started.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.volcano.target import RealVolcano  # noqa: E402
from loadgen.model.events import Kind  # noqa: E402
from loadgen.model.fleet import Fleet  # noqa: E402
from loadgen.model.job import Job  # noqa: E402
from loadgen.model.target import TargetContext  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--gpus", type=int, default=2, help="GPUs per member")
    p.add_argument("--duration", type=float, default=600, help="seconds each job holds its GPUs")
    p.add_argument("--period", type=float, default=1.0, help="schedule_period_s")
    p.add_argument("--qps", type=float, default=2000)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--controller-workers", type=int, help="vc-controller-manager --worker-threads")
    a = p.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="gangstorm-volcano-probe-"))
    ctx = TargetContext(fleet=Fleet(nodes=a.nodes), seed=1, run_dir=run_dir,
                        config={"schedule_period_s": a.period, "api_qps": a.qps, "api_burst": int(a.qps),
                                "controller_workers": a.controller_workers},
                        control_plane={})
    target = RealVolcano(ctx)
    t_start = time.monotonic()
    try:
        target.start()
        start_s = time.monotonic() - t_start
        t0 = time.monotonic()
        now = lambda: time.monotonic() - t0   # noqa: E731
        events = []
        for i in range(a.jobs):
            events += target.submit(Job(id=i, tenant=f"t{i % 4}", queue=f"q-t{i % 4}", cls="probe",
                                        members=a.members, gpus_per_member=a.gpus, duration_s=a.duration,
                                        submit_s=0.0, min_available=a.members, cpus_per_member=1), now())
        submit_s = now()
        while now() < a.timeout:
            events += target.advance(now())
            if sum(e.kind == Kind.ADMITTED for e in events) >= a.jobs:
                break
            time.sleep(0.05)
        binds = sorted(e.t for e in events if e.kind == Kind.BOUND)
        admitted = np.array([e.t for e in events if e.kind == Kind.ADMITTED])
        cp = target.control_plane()
        out = {
            "nodes": a.nodes, "jobs": a.jobs, "members": a.members, "gpus": a.gpus,
            "schedule_period_s": a.period, "controller_workers": a.controller_workers, "start_s": round(start_s, 1),
            "submit_s": round(submit_s, 2), "submit_jobs_per_s": round(a.jobs / submit_s, 1),
            "pods_bound": len(binds), "admitted": int(admitted.size),
            "bind_window_s": round(binds[-1] - binds[0], 2) if binds else None,
            "pods_per_s": round(len(binds) / max(binds[-1] - binds[0], 1e-9), 1) if len(binds) > 1 else None,
            "admission_p50_s": round(float(np.quantile(admitted, 0.5)), 2) if admitted.size else None,
            "admission_max_s": round(float(admitted.max()), 2) if admitted.size else None,
            "session_ms": cp.get("session_ms"), "action_ms": cp.get("action_ms"),
            "apiserver_429": (cp.get("apiserver") or {}).get("requests_429"),
        }
        print(json.dumps(out))
        return 0 if admitted.size >= a.jobs else 1
    finally:
        target.stop()


if __name__ == "__main__":
    sys.exit(main())
