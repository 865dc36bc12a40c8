"""slurmctld's cost curve: main and backfill cycles against nodes and queue depth, and the submit RPC.

    python -m fakes.slurm.costcurve --sizes 500,2000,5000,10000 --out results/fidelity-scale/slurm
        [--depths 20,100,400] [--burst 1000] [--burst-sleep 120] [--execute 1000]

For each fleet size one real slurmctld and one `slurmd -N` per node (fakes/slurm/fleet.py, the
project's slurm.conf, Slurm's scheduler defaults) boot, and slurmctld's own statistics (sdiag,
polled by fakes/slurm/probe.py) are read in windows, each after `sdiag -r`:

- `idle`: the booted fleet alone (registrations, pings, load).
- `submit_rpc`: jobs submitted one at a time, 5 a second, with `--begin` two hours away, so none
  starts: sdiag's REQUEST_SUBMIT_BATCH_JOB time is the submit path alone (job_allocate tests the
  job against every node of the partition, select_nodes with test_only).
- `blocked-<D>`: every node held by a few long "filler" jobs (one batch step each, so the machine
  runs a handful of processes, not one per node) and D one-node jobs pending behind them. A held
  job submitted every 4 s triggers default-depth main cycles (job_sched_cnt) and marks the state
  changed for backfill; the window lasts until backfill has run twice. A main cycle here tests the
  first job, which cannot start, and walks the rest (schedule() counts them in its depth); backfill
  tests every pending job against the time each node frees (up to bf_max_job_test).
- `start`: the fillers are cancelled one at a time, 3 s apart, and the pending jobs start: main
  cycles that start up to default_queue_depth jobs each, and backfill.
- optionally the submit-and-start burst (fakes/slurm/burst.py) on the same fleet, and the
  submit-and-execute burst (jobs that run `sleep 0`).

One JSON per size, results/fidelity-scale/slurm/curve-<nodes>n.json (the issue-32 layout: scheduler,
nodes, command, started, load_avg, metrics, sim). Every process started is stopped on exit,
SIGINT and SIGTERM (SlurmFleet.stop).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fakes.real.procfs import mem_available_mib, memory_kib
from fakes.slurm.client import SlurmClient
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.probe import Window, load
from loadgen.model.fleet import Fleet

FILLERS = 8                 # jobs holding the whole fleet; filler i ends (by time limit) at 60 + 30 i minutes
SUBMIT_RPCS = 60            # submissions timed in `submit_rpc`
SETTLE_LOAD = 1.5           # phases start once the 1-minute load is below this (or after settle_s)


def _submit(fl: SlurmFleet, argvs: list[list[str]], workers: int) -> tuple[list[float], int]:
    """Run the sbatch command lines from `workers` threads; (each call's wall seconds, failures)."""
    times, failed = [], [0]

    def one(argv):
        t = time.monotonic()
        r = fl.run(argv, check=False)
        times.append(time.monotonic() - t)
        if r.returncode:
            failed[0] += 1
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, argvs))
    return times, failed[0]


def _pending_argv(c: SlurmClient, name: str, *extra: str) -> list[str]:
    return c.batch_argv(name, 600, "--nodes=1", "--exclusive", "--gres=gpu:8", "--time=30", *extra)


def _count(fl: SlurmFleet, state: str, name: str | None = None) -> int:
    argv = ["squeue", "-h", "-t", state, "-o", "%i"] + (["-n", name] if name else [])
    return len(fl.run(argv, check=False).stdout.split())


def _wait_count(fl: SlurmFleet, state: str, want: int, timeout_s: float, name: str | None = None) -> int:
    deadline = time.monotonic() + timeout_s
    n = _count(fl, state, name)
    while n != want and time.monotonic() < deadline:
        time.sleep(1.0)
        n = _count(fl, state, name)
    return n


def settle(max_s: float) -> dict[str, Any]:
    """Wait until the 1-minute load average is below SETTLE_LOAD (or max_s); what it was."""
    t0 = time.monotonic()
    while load()[0] >= SETTLE_LOAD and time.monotonic() - t0 < max_s:
        time.sleep(5)
    return {"waited_s": round(time.monotonic() - t0, 1), "load_avg": load()}


def idle(fl: SlurmFleet, seconds: float) -> dict[str, Any]:
    with Window(fl, "idle") as w:
        time.sleep(seconds)
    return w.summary()


def submit_rpc(fl: SlurmFleet, count: int) -> dict[str, Any]:
    """`count` submissions, one at a time, 5 a second, that cannot start for two hours."""
    c = SlurmClient(fl)
    argv = c.batch_argv("gs-rpc", 60, "--nodes=1", "--gres=gpu:1", "--time=5", "--begin=now+7200")
    walls = []
    with Window(fl, "submit_rpc") as w:
        for _ in range(count):
            t = time.monotonic()
            fl.run(argv, check=False)
            walls.append(time.monotonic() - t)
            time.sleep(max(0.0, 0.2 - (time.monotonic() - t)))
    out = w.summary()
    fl.run(["scancel", "-n", "gs-rpc"], check=False)
    out["sbatch_wall_ms_mean"] = round(1000 * sum(walls) / len(walls), 2)
    return out


def fill(fl: SlurmFleet, timeout_s: float) -> dict[str, Any]:
    """Hold every node with FILLERS whole-node jobs of different time limits."""
    c, n = SlurmClient(fl), fl.fleet.nodes
    sizes = [n // FILLERS + (1 if i < n % FILLERS else 0) for i in range(FILLERS)]
    argvs = [c.batch_argv("gs-fill", 7200, f"--nodes={k}", "--exclusive", f"--time={60 + 30 * i}")
             for i, k in enumerate(sizes)]
    t0 = time.monotonic()
    _submit(fl, argvs, 1)
    running = _wait_count(fl, "R", FILLERS, timeout_s, "gs-fill")
    return {"fillers": FILLERS, "nodes_each": sizes, "running": running, "seconds": round(time.monotonic() - t0, 1)}


def blocked(fl: SlurmFleet, depth: int, have: int, workers: int, timeout_s: float) -> dict[str, Any]:
    """Bring the pending queue to `depth` one-node jobs, then watch two backfill passes over it."""
    c = SlurmClient(fl)
    t0 = time.monotonic()
    walls, failed = _submit(fl, [_pending_argv(c, "gs-pend") for _ in range(depth - have)], workers)
    sub = {"submitted": depth - have, "failed": failed, "seconds": round(time.monotonic() - t0, 1),
           "sbatch_wall_ms_mean": round(1000 * sum(walls) / max(1, len(walls)), 2)}
    held = c.batch_argv("gs-held", 60, "--nodes=1", "--gres=gpu:1", "--time=5", "--hold")
    with Window(fl, f"blocked-{depth}") as w:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (w.last().get("bf_cycles") or 0) < 2:
            fl.run(held, check=False)
            time.sleep(4.0)
    out = w.summary()
    out["pending"] = _count(fl, "PD", "gs-pend")
    out["submission"] = sub
    return out


def start(fl: SlurmFleet, timeout_s: float, gap_s: float = 3.0) -> dict[str, Any]:
    """Cancel the fillers one at a time, `gap_s` apart once the main cycle each one triggers has
    run; the pending jobs start. Until none is pending (or timeout_s). One filler at a time, so each
    cycle that starts jobs is seen alone (a 0.5 s poll between cycles) at every fleet size: all at
    once, a small fleet starts everything in cycles too close together to time one by one."""
    ids = sorted(fl.run(["squeue", "-h", "-n", "gs-fill", "-o", "%i"], check=False).stdout.split(), key=int)
    with Window(fl, "start") as w:
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        for job in ids:
            before = w.last().get("main_cycles") or 0
            fl.run(["scancel", job], check=False)
            w.wait_for("main_cycles", before + 1, max(0.0, deadline - time.monotonic()))
            time.sleep(gap_s)
        left = _wait_count(fl, "PD", 0, max(0.0, deadline - time.monotonic()), "gs-pend")
        took = time.monotonic() - t0
    out = w.summary()
    out.update(still_pending=left, seconds=round(took, 1), cancelled_one_at_a_time=len(ids))
    return out


def clean(fl: SlurmFleet, timeout_s: float = 180) -> int:
    fl.run(["scancel", "--user=root"], check=False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not fl.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split():
            return 0
        time.sleep(2)
    return len(fl.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split())


def measure(nodes: int, depths: list[int], run_dir: Path, args, command: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"scheduler": "slurm", "nodes": nodes, "command": command,
                           "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "load_avg": {"before": load()}, "slurm": _version(), "metrics": {}, "sim": {}}
    if run_dir.exists():
        shutil.rmtree(run_dir)
    fl = SlurmFleet(Fleet(nodes=nodes), run_dir)
    m = doc["metrics"]
    mem0 = mem_available_mib()
    try:
        fl.start(timeout_s=args.boot_timeout)
        m["boot"] = {"boot_s": round(fl.boot_s, 1), "mem_available_drop_mib": (mem0 or 0) - (mem_available_mib() or 0),
                     "slurmctld_pss_mib": round(memory_kib([fl.ctld.pid])["pss_kib"] / 1024, 1),
                     "states": fl.node_states(), "load_avg": load()}
        m["settle"] = settle(args.settle)
        m["idle"] = idle(fl, args.idle)
        m["submit_rpc"] = submit_rpc(fl, SUBMIT_RPCS)
        m["fill"] = fill(fl, args.phase_timeout)
        m["blocked"] = []
        have = 0
        for d in depths:
            m["blocked"].append(blocked(fl, d, have, args.workers, args.phase_timeout))
            have = d
        m["start"] = start(fl, args.phase_timeout)
        m["left_after_clean"] = clean(fl)
        m["states_at_end"] = fl.node_states()
        room = nodes * fl.fleet.gpus_per_node        # a burst's one-GPU jobs must all fit
        if args.burst and args.burst <= room:
            from fakes.slurm.burst import burst, write_bench
            time.sleep(15)              # MinJobAge: finished jobs leave the controller
            b = burst(fl, args.burst, args.workers, args.burst_sleep)
            write_bench(b, args.out, nodes, command)
            m["burst"] = {k: b[k] for k in ("accepted_per_s", "started_per_s")}
            clean(fl)
        if args.execute and args.execute <= room:
            from fakes.slurm.burst import burst, write_bench
            time.sleep(15)
            b = burst(fl, args.execute, args.workers, 0.0)
            write_bench(b, args.out, nodes, command)
            m["execute"] = {k: b[k] for k in ("accepted_per_s", "started_per_s", "executed_per_s")}
            clean(fl)
    finally:
        fl.stop()
        doc["load_avg"]["after"] = load()
        doc["left_processes"] = len(fl.marked_pids())
    return doc


def _version() -> str:
    import subprocess
    r = subprocess.run(["sinfo", "--version"], capture_output=True, text=True)
    return r.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Measure slurmctld's cycle and RPC costs at each fleet size; one JSON per size."""
    ap = argparse.ArgumentParser(prog="python -m fakes.slurm.costcurve", description=main.__doc__)
    ap.add_argument("--sizes", default="500,2000,5000,10000")
    ap.add_argument("--depths", default="20,100,400", help="pending jobs behind the fillers, cumulative")
    ap.add_argument("--out", type=Path, default=Path("results/fidelity-scale/slurm"))
    ap.add_argument("--workers", type=int, default=4, help="concurrent sbatch for the pending jobs")
    ap.add_argument("--idle", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=240.0, help="longest wait for the load to settle after boot")
    ap.add_argument("--phase-timeout", type=float, default=150.0)
    ap.add_argument("--boot-timeout", type=float, default=1500.0)
    ap.add_argument("--burst", type=int, default=0, metavar="N", help="also run the submit-and-start burst of N jobs")
    ap.add_argument("--burst-sleep", type=float, default=120.0)
    ap.add_argument("--execute", type=int, default=0, metavar="N",
                    help="also run the submit-and-execute burst: N jobs that run `sleep 0`")
    ap.add_argument("--run-dir", type=Path, default=None, help="where the clusters live (default: a /tmp directory)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
        depths = sorted(int(x) for x in args.depths.split(","))
    except ValueError:
        print("--sizes/--depths: expected comma-separated integers", file=sys.stderr)
        return 2
    command = "python -m fakes.slurm.costcurve " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.run_dir or Path(tempfile.mkdtemp(prefix="gs-costcurve-"))
    for n in sizes:
        doc = measure(n, depths, base / f"f{n}", args, command)
        path = args.out / f"curve-{n}n.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{path}: boot {doc['metrics'].get('boot', {}).get('boot_s')} s, "
              f"left {doc['left_processes']} processes", flush=True)
    if args.run_dir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
