"""The real GCS's placement-group cost against nodes and bundles, measured on fakelets.

    python -m fakes.ray.costcurve --sizes 500,2000,5000,10000 --bundles 1,8,32 [--groups 30]
        [--gap-s 0.05] [--idle-s 20] [--strategy SPREAD] --out results/fidelity-scale/ray

Per size, one fleet of fakelets (fake raylets on Ray's real GCS; the run's defaults for that size:
the Go front above 1,000 nodes, shared resource-view streams above 256, the stretched load poll) with
the GCS printing its event-loop statistics (fakes/ray/gcsstats.py). After an idle window (the GCS's
and the fleet's CPU with nothing to schedule: health checks and load polls), per bundle count B,
--groups groups of B x {GPU: 1, CPU: 1} are created one at a time: create, wait until created, remove,
pause --gap-s, next. One group in flight: the figures are the GCS's cost per group, not a queue.

Per phase it keeps the GCS's own figures:
- per group, from placement_group_table stats: scheduling_latency_ms (last attempt's start to
  created: Schedule() over the nodes, prepare and commit round trips to the nodes, the table
  writes) and end_to_end_creation_latency_ms (request received to created), p50/p90/mean;
- from its event-loop statistics over the phase: the mean duration of its PrepareBundleResources
  and CommitBundleResources calls to the nodes, and the time its main thread was busy per group;
- CPU of the GCS, the fleet and the driver, how busy the machine was, the load average, and the
  fakelet processes' worst event-loop stall (a busy fleet answers the GCS late: this machine's
  limit, not Ray's).

Writes curve-<nodes>n.json per size (kept as it goes). "sim" stays empty here: the twin's values
come from `python -m loadgen.calibration.raycurve` (loadgen runs the simulators, fakes never do).
Everything started here is stopped here.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from fakes.ray import gcsstats
from fakes.ray.fakelets.bench import CpuWindow, _job, _wait
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.target import TargetContext

PRINT_WAIT_S = 6.0         # a backstop: the GCS prints every 2 s when asked to (gcsstats.PRINT_ENV)
GROUP_WAIT_S = 120.0       # a backstop: a group's wait ends when it ends or the driver does


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _gcs_out(target) -> Path | None:
    found = sorted(Path(target.fleet.ray_tmpdir, "ray").glob("session_*/logs/gcs_server.out"))
    return found[-1] if found else None


def _printing(target) -> bool:
    return gcsstats.PRINT_ENV.items() <= target.fleet.gcs_config.items()


def _driver_gone(target) -> bool:
    return any(e.startswith("driver exited") for e in target.errors)


def _snapshot(target, after_prints: int = -1) -> tuple[gcsstats.Snapshot, int]:
    """The GCS's latest statistics print; with after_prints, wait for a print newer than that count
    (only when the GCS prints them: otherwise there is nothing to wait for)."""
    if not _printing(target):
        after_prints = -1
    deadline = time.monotonic() + PRINT_WAIT_S
    while True:
        path = _gcs_out(target)
        snap, prints = gcsstats.read(path) if path else ({}, 0)
        if prints > after_prints or time.monotonic() > deadline:
            if prints > after_prints >= 0:
                time.sleep(0.5)                      # let the GCS finish writing that print
                snap, prints = gcsstats.read(path)
            return snap, prints
        time.sleep(0.2)


def serial_phase(target, t0: float, bundles: int, groups: int, gap_s: float, first_id: int) -> dict[str, Any]:
    """`groups` groups of `bundles` bundles, one at a time: create, wait until created, remove.
    A group's wait ends when the group has finished or failed, or the driver has exited; a group
    that did not end stops the phase ("stopped" says why), so a phase is at most `groups` waits
    and a broken fleet costs one backstop (GROUP_WAIT_S), not one per group."""
    since = len(target.sched_ms)
    before, _ = _snapshot(target)
    failed, stopped = 0, None
    t_start = time.monotonic()
    for jid in range(first_id, first_id + groups):
        now = time.monotonic() - t0
        target.submit(_job(jid, bundles, 1e-3, now), now)
        events = _wait(target, t0, lambda es, j=jid: _driver_gone(target) or any(
            e.job_id == j and e.kind in (Kind.FINISHED, Kind.FAILED) for e in es), GROUP_WAIT_S)
        ended = [e for e in events if e.job_id == jid and e.kind in (Kind.FINISHED, Kind.FAILED)]
        failed += sum(1 for e in ended if e.kind is Kind.FAILED)
        if not ended:
            stopped = (f"group {jid}: the driver exited" if _driver_gone(target)
                       else f"group {jid} neither finished nor failed within {GROUP_WAIT_S:.0f} s")
            break
        time.sleep(gap_s)
    wall = time.monotonic() - t_start
    after, _ = _snapshot(target, _snapshot(target)[1])      # the first print after the phase ended
    d = gcsstats.diff(after, before)
    sched, e2e = target.sched_ms[since:], target.e2e_ms[since:]
    prep, n_prep = gcsstats.rpc_mean_ms(d, "PrepareBundleResources")
    commit, n_commit = gcsstats.rpc_mean_ms(d, "CommitBundleResources")
    main = d.get(gcsstats.MAIN, {})
    return {"bundles": bundles, "groups": groups, "created": len(sched), "failed": failed, "wall_s": round(wall, 2),
            "gcs_scheduling_ms_p50": _pct(sched, 50), "gcs_scheduling_ms_p90": _pct(sched, 90),
            "gcs_scheduling_ms_mean": round(float(np.mean(sched)), 3) if sched else None,
            "gcs_scheduling_ms_each": [round(x, 3) for x in sched],
            "gcs_creation_ms_p50": _pct(e2e, 50),
            "gcs_prepare_rpc_ms_mean": prep, "gcs_prepare_rpcs": n_prep,
            "gcs_commit_rpc_ms_mean": commit, "gcs_commit_rpcs": n_commit,
            "gcs_main_busy_ms_per_s": round(gcsstats.busy_ms(main) / wall, 2) if main else None,
            "gcs_table_write_callbacks_ms_per_group": round(main["GcsInMemoryStore.Put"].exec_ms / groups, 3)
            if "GcsInMemoryStore.Put" in main else None,
            "gcs_stats_span_ok": bool(main), **({"stopped": stopped} if stopped else {})}


def one_size(out: dict[str, Any], nodes: int, bundle_counts: list[int], groups: int, gap_s: float, idle_s: float,
             strategy: str, run_dir: Path, gcs_stats: bool = False) -> None:
    """Fills `out` as it goes: what was measured survives an interruption."""
    from fakes.ray.target import RealRay
    cfg = {"nodes": "fakelet", "multi_node_strategy": strategy, "single_node_strategy": strategy}
    target = RealRay(TargetContext(fleet=Fleet(nodes=nodes), config=cfg, control_plane={}, seed=0, run_dir=run_dir))
    if gcs_stats:
        target.fleet.gcs_config.update(gcsstats.PRINT_ENV)
    out["load_avg"] = {"before": [round(x, 2) for x in os.getloadavg()]}
    metrics: dict[str, Any] = out.setdefault("metrics", {})
    metrics["fleet"] = {"front": target.settings.front, "syncer": target.fakelet_syncer,
                        "gcs_load_poll_ms": target.gcs_load_poll_ms, "per_process": target.settings.per_process}
    try:
        target.start()
        shards = target.fleet.fakelets
        gcs = target.fleet.gcs_pid()
        t0 = time.monotonic()
        _wait(target, t0, lambda es: target.cp.get("raylets_alive") == nodes or _driver_gone(target), 300)
        metrics["fleet"].update(boot_s=round(target.fleet.boot_s, 1), alive=target.cp.get("raylets_alive"))
        procs = {"gcs": lambda: [gcs], "fleet": shards.all_pids, "driver": lambda: [target.proc.pid]}
        before, _ = _snapshot(target)
        cpu = CpuWindow(procs)
        time.sleep(idle_s)
        after, _ = _snapshot(target, _snapshot(target)[1])
        idle = {**cpu.stop(), "seconds": idle_s, "load_avg_1m": round(os.getloadavg()[0], 2)}
        d = gcsstats.diff(after, before)
        main = d.get(gcsstats.MAIN, {})
        checks = sum(h["HealthCheck"].count for h in d.values() if "HealthCheck" in h)
        idle["gcs_main_busy_ms_per_s"] = round(gcsstats.busy_ms(main) / idle_s, 2) if main else None
        idle["gcs_busy_ms_per_s_by_context"] = {ctx: round(gcsstats.busy_ms(h) / idle_s, 2) for ctx, h in d.items()}
        idle["gcs_health_checks_per_s"] = round(checks / idle_s, 1)
        metrics["idle"] = idle
        jid, phases = 1, metrics.setdefault("phases", [])
        for b in bundle_counts:
            cpu = CpuWindow(procs)
            phase = serial_phase(target, t0, b, groups, gap_s, jid)
            phase.update(cpu.stop(), load_avg_1m=round(os.getloadavg()[0], 2),
                         loop_lag_max_s=shards.stats().get("loop_lag_max_s"))
            phases.append(phase)
            jid += groups
            if "stopped" in phase:            # what stopped it stops the next bundle counts too
                break
        cp = target.control_plane()
        metrics["fakelets"] = {k: cp.get("fakelets", {}).get(k) for k in ("alive", "false_deaths", "unimplemented",
                                                                         "loop_lag_max_s")}
        metrics["raylets_alive_at_end"] = cp.get("raylets_alive")
        metrics["errors"] = cp.get("errors")
    except Exception as e:  # noqa: BLE001 - recorded; the next size still runs
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        target.stop()
        out["load_avg"]["after"] = [round(x, 2) for x in os.getloadavg()]


def _quiet(limit: float, wait_s: float) -> float:
    """Wait until the 1-minute load average is below `limit` (at most wait_s); the seconds waited.
    The previous size's own fleet keeps it up for a minute or two after it stopped."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - t0 < wait_s:
        time.sleep(5)
    return round(time.monotonic() - t0, 1)


def _terminated(signum, frame) -> None:
    print(f"costcurve: signal {signum}, stopping the fleet", file=sys.stderr, flush=True)
    sys.exit(128 + signum)                 # the finally blocks stop the fleet and write the JSON


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fakes.ray.costcurve", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="500,2000,5000,10000")
    p.add_argument("--bundles", default="1,8,32")
    p.add_argument("--groups", type=int, default=30, help="groups per bundle count, created one at a time")
    p.add_argument("--gap-s", type=float, default=0.05, help="pause between one group's removal and the next")
    p.add_argument("--idle-s", type=float, default=20.0, help="idle window before the groups")
    p.add_argument("--strategy", default="SPREAD", choices=("SPREAD", "STRICT_SPREAD", "PACK", "STRICT_PACK"))
    p.add_argument("--quiet-load", type=float, default=1.5,
                   help="before each size, wait until the 1-minute load average is below this")
    p.add_argument("--quiet-wait-s", type=float, default=900.0, help="... for at most this long (then run anyway)")
    p.add_argument("--gcs-stats", action="store_true",
                   help="have the GCS print its event-loop statistics (INFO logging: it logs five lines per bundle, "
                        "which costs it time; the curve's own figures are measured without)")
    p.add_argument("--out", type=Path, default=Path("results/fidelity-scale/ray"))
    p.add_argument("--logs", type=Path, default=None, help="the fleets' and Ray's logs (default: a new /tmp folder)")
    a = p.parse_args(argv)
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
        bundle_counts = [int(x) for x in a.bundles.split(",")]
        if min(sizes + bundle_counts) < 1 or a.groups < 1 or a.idle_s <= 0 or a.gap_s < 0:
            raise ValueError
    except ValueError:
        print("--sizes/--bundles: comma-separated positive integers; --groups >= 1, --idle-s > 0, --gap-s >= 0",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
    a.out.mkdir(parents=True, exist_ok=True)
    logs = a.logs or Path(tempfile.mkdtemp(prefix="gs-costcurve-"))
    command = "python -m fakes.ray.costcurve " + " ".join(shlex.quote(x) for x in (argv if argv is not None
                                                                                    else sys.argv[1:]))
    for n in sizes:
        waited = _quiet(a.quiet_load, a.quiet_wait_s)
        out: dict[str, Any] = {"scheduler": "ray", "nodes": n, "command": command,
                               "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                               "gcs_stats": a.gcs_stats,
                               "workload": {"strategy": a.strategy, "groups": a.groups, "gap_s": a.gap_s,
                                            "bundle": {"GPU": 1, "CPU": 1}, "one_in_flight": True},
                               "waited_for_quiet_s": waited, "metrics": {}, "sim": {}}
        path = a.out / f"curve-{n}n{'-gcsstats' if a.gcs_stats else ''}.json"
        try:
            one_size(out, n, bundle_counts, a.groups, a.gap_s, a.idle_s, a.strategy, logs / f"{n}n", a.gcs_stats)
        finally:
            path.write_text(json.dumps(out, indent=1) + "\n")
        rows = [(ph["bundles"], ph["gcs_scheduling_ms_p50"], ph["gcs_prepare_rpc_ms_mean"],
                 ph["gcs_commit_rpc_ms_mean"]) for ph in out["metrics"].get("phases", [])]
        print(f"{n} nodes: (bundles, scheduling p50 ms, prepare rpc ms, commit rpc ms) {rows}; "
              f"load {out['load_avg']}; {out.get('error', 'ok')}", flush=True)
    print(f"logs: {logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
