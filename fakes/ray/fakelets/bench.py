"""Measure a real Ray GCS on a fakelet fleet: boot, memory per fake node, GCS CPU and memory,
and placement groups per second at 1, 8 and 64 bundles.

    python -m fakes.ray.fakelets.bench --sizes 1000,5000,10000 --bundles 1,8,64 [--seconds 20]
        [--syncer auto|node|shared] [--per-process N] [--front python|go] [--out FILE]

Per size, one fleet: the head (GCS) boots, the fakelets register, the fleet idles for --idle-s
(CPU of the GCS, the fakelet processes and the driver over that window), then per bundle count B:
- "published": 100 groups of B x {GPU: 1, CPU: 1}, SPREAD, submitted at once and removed as soon as
  created; groups/s = 100 / (last removal - first submit). The shape of Ray's release test
  placement_group_performance_test.py (685.94 groups/s at 1 bundle, 38.62 at 40; docs/fidelity.md);
- "sustained": K such groups kept waiting for admission for --seconds (K = 64, 16, 4 at 1, 8, 64
  bundles), each held 0.2 s; created groups/s after a 2 s ramp, admission p50/p99, the GCS's own
  scheduling latency of those groups, and CPU over the phase.
A false death is a node the GCS declared dead while its fakelet was answering (the fleet fell
behind). Writes one JSON (kept after each size) and prints markdown tables. Everything is started
and stopped here.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fakes.ray.bench import _wait
from fakes.real.procfs import mem_available_mib, memory_kib
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import TargetContext

INFLIGHT = {1: 64, 8: 16, 64: 4}
HZ = os.sysconf("SC_CLK_TCK")


def _ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])          # utime + stime
        except (OSError, IndexError):
            pass
    return total


def _fds(pid: int | None) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd")) if pid else None
    except OSError:
        return None


def _machine() -> tuple[int, int]:
    """(busy, total) ticks of all cores, from /proc/stat."""
    t = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(t) - t[3] - t[4], sum(t)


class CpuWindow:
    """CPU % of one core used by each group of processes between creation and stop(), and how busy
    the whole machine was (100 = every core; the machine is shared)."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]):
        self.groups = groups
        self.t0, self.c0, self.m0 = time.monotonic(), {k: _ticks(f()) for k, f in groups.items()}, _machine()

    def stop(self) -> dict[str, float]:
        dt, (busy, total) = time.monotonic() - self.t0, _machine()
        out = {f"{k}_cpu_pct": round(100 * (_ticks(f()) - self.c0[k]) / HZ / dt, 1) for k, f in self.groups.items()}
        return {**out, "machine_busy_pct": round(100 * (busy - self.m0[0]) / max(1, total - self.m0[1]), 1)}


def _pct(values, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


def _sched(target, since: int) -> dict[str, float | None]:
    """The GCS's own latencies of the groups created since target.sched_ms[since]: scheduling, and
    creation (request to created, incl. queueing and retries)."""
    ms, e2e = target.sched_ms[since:], target.e2e_ms[since:]
    return {"gcs_scheduling_ms_p50": _pct(ms, 50), "gcs_scheduling_ms_p99": _pct(ms, 99),
            "gcs_creation_ms_p50": _pct(e2e, 50), "gcs_creation_ms_p99": _pct(e2e, 99)}


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _job(jid: int, bundles: int, hold_s: float, now: float) -> Job:
    return Job(jid, "b", "b", "gang", bundles, 1, hold_s, now, bundles, cpus_per_member=1)


def published(target, t0: float, bundles: int, first_id: int) -> dict[str, Any]:
    """t0: the monotonic origin of every `now` this target was ever given (its run clock)."""
    since, ids = len(target.sched_ms), range(first_id, first_id + 100)
    start = time.monotonic() - t0
    for jid in ids:
        now = time.monotonic() - t0
        target.submit(_job(jid, bundles, 1e-3, now), now)
    ended = lambda es: sum(1 for e in es if e.kind in (Kind.FINISHED, Kind.FAILED) and e.job_id in ids)  # noqa: E731
    events = _wait(target, t0, lambda es: ended(es) >= 100, 600)
    ends = [e.t for e in events if e.kind is Kind.FINISHED and e.job_id in ids]
    return {"finished": len(ends), "failed": sum(1 for e in events if e.kind is Kind.FAILED and e.job_id in ids),
            "groups_per_s": round(100 / (max(ends) - start), 2) if len(ends) == 100 else None,
            **_sched(target, since)}


def sustained(target, t0: float, bundles: int, seconds: float, first_id: int, cpu: CpuWindow) -> dict[str, Any]:
    inflight = INFLIGHT.get(bundles, 8)
    since, start = len(target.sched_ms), time.monotonic() - t0
    submitted: dict[int, float] = {}
    admitted: list[tuple[float, float]] = []
    jid = first_id
    while time.monotonic() - t0 - start < seconds:
        now = time.monotonic() - t0
        while len(submitted) - len(admitted) < inflight:
            submitted[jid] = now
            target.submit(_job(jid, bundles, 0.2, now), now)
            jid += 1
        for e in target.advance(time.monotonic() - t0):
            if e.kind is Kind.ADMITTED and e.job_id in submitted:
                admitted.append((e.t, e.t - submitted[e.job_id]))
        time.sleep(0.001)
    out = {**cpu.stop(), "loadavg": _loadavg()}
    counted = [t for t, _ in admitted if t >= start + 2.0]
    lat = [x * 1000 for _, x in admitted]
    drained = _wait(target, t0, lambda es: not target.running and not target.pending, 300)  # before the next phase
    return {"inflight": inflight, "seconds": seconds, "submitted": len(submitted), "admitted": len(admitted),
            "groups_per_s": round(len(counted) / (seconds - 2.0), 2),
            "admission_ms_p50": _pct(lat, 50), "admission_ms_p99": _pct(lat, 99), **_sched(target, since), **out,
            "drained": not target.running and not target.pending, "failed": sum(e.kind is Kind.FAILED for e in drained),
            "raylets_alive": target.cp.get("raylets_alive")}


def one_size(out: dict[str, Any], nodes: int, bundle_counts: list[int], seconds: float, idle_s: float, syncer: str,
             per_process: int, run_dir: Path, front: str = "python") -> None:
    """Fills `out` as it goes: what was measured survives an interruption."""
    from fakes.ray.target import RealRay
    cfg = {"nodes": "fakelet", "fakelet_syncer": syncer, "fakelets_per_process": per_process, "fakelet_front": front,
           "multi_node_strategy": "SPREAD", "single_node_strategy": "SPREAD"}
    target = RealRay(TargetContext(fleet=Fleet(nodes=nodes), config=cfg, control_plane={}, seed=0, run_dir=run_dir))
    out.update(nodes=nodes, per_process=per_process, front=front, loadavg_at_start=_loadavg(),
               mem_available_mib_at_start=mem_available_mib())
    t_start = time.monotonic()
    try:
        target.start()
        fleet, shards = target.fleet, target.fleet.fakelets
        gcs = fleet.gcs_pid()
        booted = shards.stats()
        out.update(head_boot_s=round(fleet.head_boot_s, 2), fakelets_boot_s=round(shards.boot_s, 2),
                   fakelet_registration_s=max(shards.registered_s), processes=len(shards.pids()),
                   syncer=target.fakelet_syncer, gcs_load_poll_ms=target.gcs_load_poll_ms,
                   loop_lag_max_s_at_boot=booted["loop_lag_max_s"],
                   gcs_pss_mib_at_boot=round(memory_kib([gcs])["pss_kib"] / 1024, 1))
        t0 = time.monotonic()                  # the target's run clock starts here
        _wait(target, t0, lambda es: target.cp.get("raylets_alive") == nodes, 120)
        out["gcs_alive_after_s"] = round(time.monotonic() - t0, 1)
        out["warm_up_groups_per_s"] = published(target, t0, 1, 1_000_000)["groups_per_s"]   # not measured
        procs = {"gcs": lambda: [gcs], "fleet": shards.all_pids, "driver": lambda: [target.proc.pid]}
        cpu = CpuWindow(procs)
        time.sleep(idle_s)
        fleet_mem, gcs_mem = memory_kib(shards.all_pids()), memory_kib([gcs])
        out["idle"] = {**cpu.stop(), "seconds": idle_s, "loadavg": _loadavg(),
                       "fleet_pss_mib": round(fleet_mem["pss_kib"] / 1024, 1),
                       "fleet_rss_mib": round(fleet_mem["rss_kib"] / 1024, 1),
                       "fleet_pss_kib_per_node": round(fleet_mem["pss_kib"] / nodes, 1),
                       "gcs_pss_mib": round(gcs_mem["pss_kib"] / 1024, 1),
                       "gcs_pss_kib_per_node": round(gcs_mem["pss_kib"] / nodes, 1),
                       "gcs_fds": _fds(gcs), "fleet_fds": sum(_fds(p) or 0 for p in shards.all_pids())}
        jid = 1
        for b in bundle_counts:
            pub = published(target, t0, b, jid)
            sus = sustained(target, t0, b, seconds, jid + 100, CpuWindow(procs))
            jid += 100 + sus["submitted"]
            out[f"bundles_{b}"] = {"published": pub, "sustained": sus}
        out["gcs_pss_mib_at_end"] = round(memory_kib([gcs])["pss_kib"] / 1024, 1)
        out["mem_available_mib_at_end"] = mem_available_mib()
        cp = target.control_plane()
        out["fakelets"] = {k: cp["fakelets"].get(k) for k in ("alive", "false_deaths", "unimplemented",
                                                              "loop_lag_max_s", "calls", "views_sent")}
        out["raylets_alive"] = cp["raylets_alive"]
        out["errors"] = cp["errors"]
    except Exception as e:  # noqa: BLE001 - recorded; the next size still runs
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        t = time.monotonic()
        target.stop()
        out["stop_s"] = round(time.monotonic() - t, 1)
        out["wall_s"] = round(time.monotonic() - t_start, 1)


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


SIZE_COLUMNS = ["nodes", "procs", "boot s: head / fakelets (registration)", "fleet PSS MiB (KiB/node), RSS MiB",
                "GCS PSS MiB: boot / idle / end (idle KiB/node)", "idle CPU %: GCS / fleet / driver (machine busy)",
                "fds: GCS / fleet", "GCS alive / false deaths", "unimplemented", "loop lag max s: boot / end"]
PHASE_COLUMNS = ["nodes", "bundles", "published groups/s", "sustained groups/s (K)", "admission ms p50 / p99",
                 "GCS sched ms p50 / p99", "CPU %: GCS / fleet / driver (machine busy)", "loadavg"]


def _cpu(w: dict[str, Any]) -> str:
    cpu = " / ".join(str(w.get(f"{k}_cpu_pct")) for k in ("gcs", "fleet", "driver"))
    return f"{cpu} ({w.get('machine_busy_pct')})"


def tables(results: list[dict[str, Any]], bundle_counts: list[int]) -> str:
    """Markdown: one row per fleet size, then one per size and bundle count (sustained phase)."""
    sizes, phases = [_row(SIZE_COLUMNS), _row(["---"] * len(SIZE_COLUMNS))], \
        [_row(PHASE_COLUMNS), _row(["---"] * len(PHASE_COLUMNS))]
    for r in results:
        i, fk = r.get("idle", {}), r.get("fakelets", {})
        sizes.append(_row([
            f"{r['nodes']:,}" + (f" ({r['error']})" if r.get("error") else ""), r.get("processes"),
            f"{r.get('head_boot_s')} / {r.get('fakelets_boot_s')} ({r.get('fakelet_registration_s')})",
            f"{i.get('fleet_pss_mib')} ({i.get('fleet_pss_kib_per_node')}), {i.get('fleet_rss_mib')}",
            f"{r.get('gcs_pss_mib_at_boot')} / {i.get('gcs_pss_mib')} / {r.get('gcs_pss_mib_at_end')} "
            f"({i.get('gcs_pss_kib_per_node')})", _cpu(i), f"{i.get('gcs_fds')} / {i.get('fleet_fds')}",
            f"{r.get('raylets_alive')} / {fk.get('false_deaths')}", fk.get("unimplemented") or "none",
            f"{r.get('loop_lag_max_s_at_boot')} / {fk.get('loop_lag_max_s')}"]))
        for b in bundle_counts:
            p, s = r.get(f"bundles_{b}", {}).get("published", {}), r.get(f"bundles_{b}", {}).get("sustained", {})
            phases.append(_row([
                f"{r['nodes']:,}", b, p.get("groups_per_s"), f"{s.get('groups_per_s')} ({s.get('inflight')})",
                f"{s.get('admission_ms_p50')} / {s.get('admission_ms_p99')}",
                f"{s.get('gcs_scheduling_ms_p50')} / {s.get('gcs_scheduling_ms_p99')}", _cpu(s), s.get("loadavg")]))
    return "\n".join(sizes) + "\n\n" + "\n".join(phases)


def _terminated(signum, frame) -> None:
    print(f"fakelets bench: signal {signum}, stopping the fleet", file=sys.stderr, flush=True)
    sys.exit(128 + signum)                 # the finally blocks stop the fleet and write the JSON


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fakes.ray.fakelets.bench", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,5000,10000")
    p.add_argument("--bundles", default="1,8,64")
    p.add_argument("--seconds", type=float, default=20.0, help="sustained phase per bundle count (> 2)")
    p.add_argument("--idle-s", type=float, default=10.0, help="idle window for CPU and memory")
    p.add_argument("--syncer", default="auto", choices=("auto", "node", "shared"))
    p.add_argument("--per-process", type=int, default=2000, help="fakelets per process")
    p.add_argument("--front", default="python", choices=("python", "go"),
                   help="who answers health checks and load polls (schedulers.ray.fakelet_front)")
    p.add_argument("--out", type=Path, default=Path("results/ray-fakelets/bench.json"))
    a = p.parse_args(argv)
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
        bundle_counts = [int(x) for x in a.bundles.split(",")]
        if min(sizes + bundle_counts) < 1 or a.seconds <= 2 or a.idle_s <= 0 or a.per_process < 1:
            raise ValueError
    except ValueError:
        print("--sizes/--bundles: expected comma-separated positive integers; --seconds > 2, --idle-s > 0",
              file=sys.stderr)
        return 2
    if max(bundle_counts) > min(sizes):
        print(f"--bundles: a SPREAD group of {max(bundle_counts)} bundles needs that many nodes; "
              f"the smallest --sizes is {min(sizes)}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    t0, results = time.monotonic(), []
    args = {"sizes": sizes, "bundles": bundle_counts, "seconds": a.seconds, "idle_s": a.idle_s,
            "syncer": a.syncer, "per_process": a.per_process, "front": a.front}
    for n in sizes:
        run_dir = a.out.parent / f"{a.out.stem}-{n}"       # the fleet's logs and Ray's session logs
        results.append({"nodes": n})
        try:
            one_size(results[-1], n, bundle_counts, a.seconds, a.idle_s, a.syncer, a.per_process, run_dir, a.front)
        except BaseException as e:
            results[-1]["error"] = f"interrupted: {type(e).__name__} {e}"
            raise
        finally:                                           # kept after each size, and when interrupted
            a.out.write_text(json.dumps({"args": args, "wall_s": round(time.monotonic() - t0, 1),
                                         "results": results}, indent=1) + "\n")
        print(json.dumps(results[-1]), flush=True)
    print(tables(results, bundle_counts))
    print(f"\nwall time {time.monotonic() - t0:.0f} s; JSON: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
