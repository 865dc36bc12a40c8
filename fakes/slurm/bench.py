"""Boot a Slurm fleet and measure it: boot time, memory, node states over time, sbatch throughput.

    python -m fakes.slurm.bench --nodes 1000 --hold 300
    python -m fakes.slurm.bench --nodes 1000 --sbatch 2000 --workers 4 [--held]

Prints one JSON line per report; the fleet is stopped on exit, SIGINT and SIGTERM.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fakes.real.procfs import mem_available_mib, memory_kib
from fakes.slurm.client import SlurmClient
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.sdiag import parse_sdiag
from loadgen.model.fleet import Fleet


def bench_sbatch(fl: SlurmFleet, n: int, workers: int, sleep_s: float, held: bool = False) -> dict[str, Any]:
    """Submit n one-GPU jobs from `workers` threads; rate, then Slurm's submit-to-start spread.

    held=True submits with --hold: the pure submission path, no job launches competing for CPU.
    """
    argv = SlurmClient(fl).batch_argv("gs-bench", sleep_s, "--nodes=1", "--gres=gpu:1", "--time=5",
                                      *(["--hold"] if held else []))
    errors = []

    def one(_):
        r = fl.run(argv, check=False)
        if r.returncode:
            errors.append(r.stderr.strip()[-200:])

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    dt = time.monotonic() - t0
    if held:
        fl.run(["scancel", "--state=PENDING"], check=False)
        return {"sbatch": n, "workers": workers, "held": True, "submit_s": round(dt, 2),
                "sbatch_per_s": round(n / dt, 1), "errors": len(errors)}
    deadline = time.monotonic() + 300
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        out = fl.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%V|%S"], check=False).stdout
        rows = [line.split("|") for line in out.splitlines()]
        if rows and all(r[1] != "PENDING" for r in rows):
            break
        time.sleep(1)
    waits = sorted(int(r[3]) - int(r[2]) for r in rows if r[3].isdigit() and r[2].isdigit())
    sdiag = parse_sdiag(fl.run(["sdiag"], check=False).stdout)
    return {"sbatch": n, "workers": workers, "submit_s": round(dt, 2), "sbatch_per_s": round(n / dt, 1),
            "errors": len(errors), "first_error": errors[0] if errors else "",
            "started": len(waits), "start_wait_p50_s": statistics.median(waits) if waits else None,
            "start_wait_max_s": waits[-1] if waits else None,
            "sdiag_mean_cycle_us(main,bf)": [sdiag.get("main_mean_cycle_us"), sdiag.get("bf_mean_cycle_us")]}


def _pss_mib(pids: list[int]) -> float:
    return round(memory_kib(pids)["pss_kib"] / 1024, 1)


def main(argv: list[str] | None = None) -> int:
    """Boot a fleet, report boot time and memory, hold it for --hold seconds, stop it."""
    ap = argparse.ArgumentParser(prog="python -m fakes.slurm.bench", description=main.__doc__)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--run-dir", type=Path, default=Path("results/slurm-fleet"))
    ap.add_argument("--hold", type=float, default=0, help="seconds to keep the fleet up, sampling node states")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--sbatch", type=int, default=0, metavar="N",
                    help="after boot, submit N one-GPU jobs (sleep --sleep s) and report sbatch/s and submit-to-start")
    ap.add_argument("--workers", type=int, default=4, help="concurrent sbatch processes for --sbatch")
    ap.add_argument("--sleep", type=float, default=30.0)
    ap.add_argument("--held", action="store_true", help="--sbatch with --hold: no job launches")
    ap.add_argument("--sched-extra", action="append", default=[], metavar="OPT",
                    help="extra SchedulerParameters option, e.g. defer or bf_yield_interval=200000")
    ap.add_argument("--set", action="append", default=[], metavar="Key=Value",
                    help="override a timer (SlurmdTimeout, MessageTimeout, ...)")
    args = ap.parse_args(argv)
    timeouts = {}
    for kv in args.set:
        if "=" not in kv:
            print(f"--set: expected Key=Value, got {kv!r}", file=sys.stderr)
            return 2
        k, v = kv.split("=", 1)
        timeouts[k] = v
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    fl = SlurmFleet(Fleet(nodes=args.nodes), args.run_dir,
                    config={"timeouts": timeouts, "scheduler_extra": args.sched_extra})
    print(json.dumps({"mem_available_mib_before": mem_available_mib()}), flush=True)
    t0 = time.monotonic()
    last = [0.0]

    def progress(c):
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            print(f"[{time.monotonic() - t0:6.1f}s] {c}", flush=True)

    try:
        fl.start(timeout_s=args.timeout, progress=progress)     # from here SIGTERM exits through finally
        report = {"nodes": args.nodes, "boot_s": round(fl.boot_s, 1),
                  "slurmd_pss_mib": _pss_mib([p.pid for p in fl.slurmd.values()]),
                  "slurmctld_pss_mib": _pss_mib([fl.ctld.pid]),
                  "mem_available_mib": mem_available_mib(),
                  "states_at_boot": fl.node_states()}
        print(json.dumps(report), flush=True)
        if args.sbatch:
            print(json.dumps(bench_sbatch(fl, args.sbatch, args.workers, args.sleep, args.held)), flush=True)
        end = time.monotonic() + args.hold
        while time.monotonic() < end:
            time.sleep(min(30, max(0, end - time.monotonic())))
            print(f"[{time.monotonic() - t0:6.1f}s] {fl.node_states()}", flush=True)
    finally:
        fl.stop()
        print(json.dumps({"left_after_stop": len(fl.marked_pids())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
