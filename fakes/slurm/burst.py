"""Slurm's submit-and-start burst, replicated on a fake fleet: accepted jobs/s and started jobs/s.

    python -m fakes.slurm.burst --nodes 500 --jobs 1000 --out results/fidelity-scale/slurm

Slurm's documentation (doc/html/slurm.shtml, "Performance") says slurmctld "can accept 1,000 job
submissions per second and fully execute 500 simple jobs per second (depending upon hardware and
system configuration)". This is that experiment's shape on this machine: N one-GPU jobs submitted as
fast as `sbatch` allows (a pool of `workers` sbatch processes, as the real backend submits) onto a
fleet with room for all of them, Slurm's scheduler defaults. Measured:

- accepted/s: N / (the last sbatch's return - the first sbatch's start), the client's view;
- started/s: N / (the moment sdiag's "Jobs started" counter reached N - the first sbatch's start),
  sdiag polled every 0.25 s (a job counts as started when slurmctld allocates it, as in Slurm's
  statistics; the batch step's launch on its slurmd follows asynchronously);
- executed/s (jobs that run `sleep 0`, Slurm's "simple jobs"): N / (the moment "Jobs completed"
  reached N - the first sbatch's start).

Every call's start offset is kept (`offsets_s`), so a simulated twin can be offered the very same
submissions (loadgen/calibration/anchors.py). The burst starts just after slurmctld's periodic
full-queue pass and an idle backfill check (align()), where a fresh twin has its timers at t=0;
`aligned.since_full_pass_s` says how long after. Writes bench-burst-accept-<nodes>n.json and
bench-burst-start-<nodes>n.json, or bench-burst-execute-<nodes>n.json for `--sleep 0` (each with
"figure", "unit", "command", "started", "load_avg").
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fakes.slurm.client import SlurmClient
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.probe import Window, load
from loadgen.model.fleet import Fleet


def align(fl: SlurmFleet, timeout_s: float = 75.0) -> dict[str, Any]:
    """Wait for slurmctld's periodic full-queue pass (every sched_interval) on the idle cluster, then
    make one change (a held job) so the idle backfill agent runs its (empty) pass within its 1 s tick
    and sleeps bf_interval from there. A burst started now sees both timers where a fresh twin has
    them at t=0, so the figure does not depend on where the 60 s and 30 s clocks happened to be."""
    c = SlurmClient(fl)
    n0 = c.sdiag().get("main_cycles")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and c.sdiag().get("main_cycles") == n0:
        time.sleep(0.2)
    full = time.monotonic()
    fl.run(c.batch_argv("gs-align", 60, "--nodes=1", "--gres=gpu:1", "--time=5", "--hold"), check=False)
    time.sleep(1.2)
    return {"full_pass_seen": time.monotonic() - full < timeout_s,
            "since_full_pass_s": round(time.monotonic() - full, 2)}


def burst(fl: SlurmFleet, jobs: int, workers: int, sleep_s: float, timeout_s: float = 600) -> dict[str, Any]:
    """Submit `jobs` one-GPU jobs from `workers` sbatch processes as fast as they go; wait until all
    started (or timeout_s), and with sleep_s 0 until all completed."""
    c = SlurmClient(fl)
    argv = c.batch_argv("gs-burst", sleep_s, "--nodes=1", "--gres=gpu:1", "--time=10")
    calls: list[tuple[float, float, bool]] = []
    lock = threading.Lock()
    load_before = load()
    aligned = align(fl)
    with Window(fl, "burst", period=0.25) as w:
        t0 = time.monotonic()

        def one(_):
            a = time.monotonic() - t0
            r = fl.run(argv, check=False)
            with lock:
                calls.append((a, time.monotonic() - t0, r.returncode == 0))
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(jobs)))
        w.wait_for("jobs_completed" if sleep_s == 0 else "jobs_started", jobs, timeout_s)
        time.sleep(1.0)
    s = w.summary()
    calls.sort()
    ok = [c for c in calls if c[2]]
    first = calls[0][0]
    accepted_end = max(c[1] for c in ok) if ok else float("nan")
    started_at = next((p["t"] for p in w.samples if (p.get("jobs_started") or 0) >= len(ok)), None)
    completed_at = next((p["t"] for p in w.samples if (p.get("jobs_completed") or 0) >= len(ok)), None)
    curve = [(p["t"], p.get("jobs_submitted"), p.get("jobs_started"), p.get("jobs_completed"), p.get("agent_count"))
             for p in w.samples]
    sub = s["rpc"].get("REQUEST_SUBMIT_BATCH_JOB", {})
    return {"jobs": jobs, "accepted": len(ok), "workers": workers, "sleep_s": sleep_s, "nodes": fl.fleet.nodes,
            "accepted_per_s": round(len(ok) / (accepted_end - first), 2) if ok else None,
            "started_per_s": round(len(ok) / (started_at - first), 2) if started_at else None,
            "executed_per_s": round(len(ok) / (completed_at - first), 2) if completed_at and sleep_s == 0 else None,
            "accept_s": round(accepted_end - first, 3), "start_s": started_at and round(started_at - first, 3),
            "execute_s": completed_at and round(completed_at - first, 3),
            "sbatch_wall_ms_mean": round(1000 * sum(c[1] - c[0] for c in calls) / len(calls), 2),
            "submit_rpc_ms_mean": (sub.get("ave_time_us") or 0) / 1000,
            "aligned": aligned, "offsets_s": [round(c[0] - first, 4) for c in calls],
            "counters": curve, "window": s, "load_avg": {"before": load_before, "after": load()}}


def write_bench(b: dict[str, Any], out: Path, nodes: int, command: str) -> list[Path]:
    """The two figures, each in the issue-32 bench layout."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    paths = []
    figures = (("execute", "executed_per_s"),) if b["sleep_s"] == 0 else (("accept", "accepted_per_s"),
                                                                         ("start", "started_per_s"))
    for what, key in figures:
        doc = {"figure": b[key], "unit": "jobs/s", "command": command, "started": started,
               "load_avg": b["load_avg"], "what": f"{what}ed jobs per second, {b['jobs']} one-GPU jobs from "
               f"{b['workers']} sbatch workers onto {nodes} nodes", **{k: v for k, v in b.items() if k != "load_avg"}}
        p = out / f"bench-burst-{what}-{nodes}n.json"
        p.write_text(json.dumps(doc, indent=1) + "\n")
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Boot a fleet, run the submit-and-start burst, write the two bench files, stop the fleet."""
    ap = argparse.ArgumentParser(prog="python -m fakes.slurm.burst", description=main.__doc__)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=120.0, help="each job's run time (it must outlast the burst)")
    ap.add_argument("--out", type=Path, default=Path("results/fidelity-scale/slurm"))
    ap.add_argument("--boot-timeout", type=float, default=1500.0)
    args = ap.parse_args(argv)
    if args.jobs > args.nodes * Fleet().gpus_per_node:
        print(f"--jobs: at most {args.nodes * Fleet().gpus_per_node} one-GPU jobs fit on {args.nodes} nodes",
              file=sys.stderr)
        return 2
    command = "python -m fakes.slurm.burst " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="gs-burst-"))
    fl = SlurmFleet(Fleet(nodes=args.nodes), run_dir / "f")
    try:
        fl.start(timeout_s=args.boot_timeout)
        time.sleep(10)
        b = burst(fl, args.jobs, args.workers, args.sleep)
        for p in write_bench(b, args.out, args.nodes, command):
            print(p, json.dumps({k: b[k] for k in ("accepted_per_s", "started_per_s", "executed_per_s",
                                                   "sbatch_wall_ms_mean")}))
    finally:
        fl.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
