"""Measure a real Ray GCS on a fakelet fleet: boot, memory per fake node, GCS CPU and memory,
and placement groups per second at 1, 8 and 64 bundles.

    python -m fakes.ray.fakelets.bench --sizes 1000,5000,10000 --bundles 1,8,64 [--out FILE]

Per size, one fleet: the head (GCS) boots, the fakelets register, the fleet idles for --idle-s
(CPU of the GCS and of the fakelet processes over that window), then per bundle count B:
- "published": 100 groups of B x {GPU: 1, CPU: 1}, SPREAD, created at once and removed as soon as
  created; groups/s = 100 / (last removal - first submit). The shape of Ray's release test
  placement_group_performance_test.py (685.94 groups/s at 1 bundle, 38.62 at 40; docs/fidelity.md);
- "sustained": `inflight` such groups kept outstanding for --seconds, each held 0.2 s; created
  groups/s after a 2 s ramp, admission p50/p99, GCS and fleet CPU over the phase.
Prints one JSON object (also written to --out). Everything is started and stopped here.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fakes.ray.bench import _wait
from fakes.real.procfs import memory_kib
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
            total += int(f[11]) + int(f[12])
        except (OSError, IndexError):
            pass
    return total


def _fds(pid: int | None) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd")) if pid else None
    except OSError:
        return None


class CpuWindow:
    """CPU % of one core used by each group of processes between start and stop."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]):
        self.groups = groups
        self.t0, self.c0 = time.monotonic(), {k: _ticks(f()) for k, f in groups.items()}

    def stop(self) -> dict[str, float]:
        dt = time.monotonic() - self.t0
        return {f"{k}_cpu_pct": round(100 * (_ticks(f()) - self.c0[k]) / HZ / dt, 1) for k, f in self.groups.items()}


def _pct(values, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def published(target, t0: float, bundles: int, first_id: int) -> dict[str, Any]:
    """t0: the monotonic origin of every `now` this target was ever given (its run clock)."""
    start = time.monotonic() - t0
    ids = range(first_id, first_id + 100)
    for jid in ids:
        now = time.monotonic() - t0
        target.submit(Job(jid, "b", "b", "gang", bundles, 1, 1e-3, now, bundles, cpus_per_member=1), now)
    done = lambda es: sum(1 for e in es if e.kind is Kind.FINISHED and e.job_id in ids) >= 100  # noqa: E731
    events = _wait(target, t0, done, 600)
    ends = [e.t for e in events if e.kind is Kind.FINISHED and e.job_id in ids]
    return {"groups": 100, "finished": len(ends),
            "groups_per_s": round(100 / (max(ends) - start), 2) if len(ends) == 100 else None}


def sustained(target, t0: float, bundles: int, seconds: float, first_id: int) -> tuple[dict[str, Any], int]:
    inflight = INFLIGHT.get(bundles, 8)
    start = time.monotonic() - t0
    submitted: dict[int, float] = {}
    admitted: list[tuple[float, float]] = []
    jid = first_id
    while time.monotonic() - t0 - start < seconds:
        now = time.monotonic() - t0
        while len(submitted) - len(admitted) < inflight:
            submitted[jid] = now
            target.submit(Job(jid, "b", "b", "gang", bundles, 1, 0.2, now, bundles, cpus_per_member=1), now)
            jid += 1
        for e in target.advance(time.monotonic() - t0):
            if e.kind is Kind.ADMITTED and e.job_id in submitted:
                admitted.append((e.t, e.t - submitted[e.job_id]))
        time.sleep(0.001)
    counted = [t for t, _ in admitted if t >= start + 2.0]
    lat = [x * 1000 for _, x in admitted]
    _wait(target, t0, lambda es: not target.running and not target.pending, 120)   # drain before the next phase
    return {"inflight": inflight, "seconds": seconds, "admitted": len(admitted),
            "groups_per_s": round(len(counted) / (seconds - 2.0), 2) if seconds > 2 else None,
            "admission_ms_p50": _pct(lat, 50), "admission_ms_p99": _pct(lat, 99)}, jid


def one_size(nodes: int, bundle_counts: list[int], seconds: float, idle_s: float, syncer: str,
             per_process: int, workdir: Path) -> dict[str, Any]:
    from fakes.ray.target import RealRay
    cfg = {"nodes": "fakelet", "fakelet_syncer": syncer, "fakelets_per_process": per_process,
           "multi_node_strategy": "SPREAD", "single_node_strategy": "SPREAD"}
    target = RealRay(TargetContext(fleet=Fleet(nodes=nodes), config=cfg, control_plane={}, seed=0,
                                   run_dir=workdir / f"fakelets-{nodes}"))
    out: dict[str, Any] = {"nodes": nodes, "loadavg_at_start": _loadavg()}
    try:
        target.start()
        fleet, shards = target.fleet, target.fleet.fakelets
        gcs = fleet.gcs_pid()
        out.update(head_boot_s=round(fleet.head_boot_s, 2), fakelets_boot_s=round(shards.boot_s, 2),
                   fakelet_registration_s=max(shards.registered_s), processes=len(shards.pids()),
                   syncer=target.fakelet_syncer, gcs_load_poll_ms=target.gcs_load_poll_ms)
        t0 = time.monotonic()                  # the target's run clock starts here
        _wait(target, t0, lambda es: target.cp.get("raylets_alive") == nodes, 120)
        out["gcs_alive_after_s"] = round(time.monotonic() - t0, 1)
        warm = published(target, t0, 1, 1_000_000)          # the driver's first groups, not measured
        out["warm_up_groups_per_s"] = warm["groups_per_s"]
        cpu = CpuWindow({"gcs": lambda: [gcs], "fleet": shards.pids})
        time.sleep(idle_s)
        fleet_mem, gcs_mem = memory_kib(shards.pids()), memory_kib([gcs])
        out["idle"] = {**cpu.stop(), "seconds": idle_s,
                       "fleet_pss_mib": round(fleet_mem["pss_kib"] / 1024, 1),
                       "fleet_rss_mib": round(fleet_mem["rss_kib"] / 1024, 1),
                       "fleet_pss_kib_per_node": round(fleet_mem["pss_kib"] / nodes, 1),
                       "gcs_pss_mib": round(gcs_mem["pss_kib"] / 1024, 1),
                       "gcs_pss_kib_per_node": round(gcs_mem["pss_kib"] / nodes, 1),
                       "gcs_fds": _fds(gcs), "fleet_fds": sum(_fds(p) or 0 for p in shards.pids())}
        jid = 1
        for b in bundle_counts:
            cpu = CpuWindow({"gcs": lambda: [gcs], "fleet": shards.pids})
            pub = published(target, t0, b, jid)
            jid += 100
            sus, jid = sustained(target, t0, b, seconds, jid)
            cp = target.control_plane()
            out[f"bundles_{b}"] = {"published": pub, "sustained": sus, **cpu.stop(), "loadavg": _loadavg(),
                                   "gcs_scheduling_ms_p50": cp["gcs_scheduling_ms_p50"],
                                   "gcs_scheduling_ms_p99": cp["gcs_scheduling_ms_p99"]}
        out["gcs_pss_mib_at_end"] = round(memory_kib([gcs])["pss_kib"] / 1024, 1)
        cp = target.control_plane()
        out["fakelets"] = {k: cp["fakelets"].get(k) for k in ("alive", "false_deaths", "unimplemented",
                                                              "loop_lag_max_s", "calls")}
        out["raylets_alive"] = cp["raylets_alive"]
        out["errors"] = cp["errors"]
    finally:
        t = time.monotonic()
        target.stop()
        out["stop_s"] = round(time.monotonic() - t, 1)
    return out


def table(results: list[dict[str, Any]], bundle_counts: list[int]) -> str:
    rows = ["| nodes | boot head / fakelets s | fleet KiB/node | GCS MiB (KiB/node) | idle CPU % GCS / fleet | "
            + " | ".join(f"{b} bundles: published / sustained groups/s, GCS sched p50 ms" for b in bundle_counts)
            + " | false deaths | loop lag max s |",
            "|" + "---|" * (6 + len(bundle_counts))]
    for r in results:
        idle = r.get("idle", {})
        cells = [f"{r['nodes']:,}", f"{r.get('head_boot_s')} / {r.get('fakelets_boot_s')}",
                 str(idle.get("fleet_pss_kib_per_node")), f"{idle.get('gcs_pss_mib')} ({idle.get('gcs_pss_kib_per_node')})",
                 f"{idle.get('gcs_cpu_pct')} / {idle.get('fleet_cpu_pct')}"]
        for b in bundle_counts:
            x = r.get(f"bundles_{b}", {})
            cells.append(f"{x.get('published', {}).get('groups_per_s')} / {x.get('sustained', {}).get('groups_per_s')}, "
                         f"{x.get('gcs_scheduling_ms_p50')}")
        fk = r.get("fakelets", {})
        cells += [str(fk.get("false_deaths")), str(fk.get("loop_lag_max_s"))]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fakes.ray.fakelets.bench", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,5000,10000")
    p.add_argument("--bundles", default="1,8,64")
    p.add_argument("--seconds", type=float, default=20.0, help="sustained phase per bundle count")
    p.add_argument("--idle-s", type=float, default=10.0, help="idle window for CPU and memory")
    p.add_argument("--syncer", default="auto", choices=("auto", "node", "shared"))
    p.add_argument("--per-process", type=int, default=2000, help="fakelets per process")
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
    a.out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    for n in sizes:
        results.append(one_size(n, bundle_counts, a.seconds, a.idle_s, a.syncer, a.per_process, a.out.parent))
        a.out.write_text(json.dumps({"results": results}, indent=1) + "\n")    # kept after each size
        print(json.dumps(results[-1]), flush=True)
    print(table(results, bundle_counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
