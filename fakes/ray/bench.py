"""Measure a local Ray fleet: boot time, memory per raylet, placement-group latency and throughput.

    python -m fakes.ray.bench --nodes 32 [--seconds 20] [--serial 20]

Prints one JSON object (also written to --out if given). Everything is started and stopped here.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from fakes.real.procfs import listeners, memory_kib
from fakes.real.procs import session_pids
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import TargetContext


def _pss_by_process(pids: list[int]) -> dict[str, float]:
    by: Counter = Counter()
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        by[comm] += memory_kib([pid])["pss_kib"]
    return {k: round(v / 1024, 1) for k, v in by.most_common()}


def _wait(target, t0: float, pred, timeout: float) -> list:
    events: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events += target.advance(time.monotonic() - t0)
        if pred(events):
            break
        time.sleep(0.002)
    return events


def bench(nodes: int, seconds: float, serial: int, inflight: int, out: Path | None) -> dict:
    from fakes.ray.target import RealRay
    ctx = TargetContext(fleet=Fleet(nodes=nodes), config={}, control_plane={}, seed=0,
                        run_dir=out.parent / f"ray-bench-{nodes}" if out else None)
    target = RealRay(ctx)
    result: dict = {"nodes": nodes, "loadavg_1m_at_start": float(Path("/proc/loadavg").read_text().split()[0])}
    t_boot = time.monotonic()
    try:
        target.start()
        result["boot_s"] = round(time.monotonic() - t_boot, 1)
        pids = session_pids(target.fleet.pgid)
        mem = memory_kib(pids)
        result["fleet_pss_mib"] = round(mem["pss_kib"] / 1024, 1)
        result["fleet_rss_mib"] = round(mem["rss_kib"] / 1024, 1)
        result["pss_mib_per_raylet_incl_head"] = round(mem["pss_kib"] / 1024 / nodes, 1)
        result["pss_mib_by_process"] = _pss_by_process(pids)
        socks = listeners(pids + session_pids(target.proc.pid))
        result["listeners"] = len(socks)
        result["listener_addresses"] = sorted({a for a, _, _ in socks})

        t0 = time.monotonic()
        jid = 0
        # Serial: one STRICT_SPREAD group of min(8, nodes) x {GPU: 8, CPU: 96} at a time.
        m = min(8, nodes)
        lat = []
        for _ in range(serial):
            jid += 1
            now = time.monotonic() - t0
            target.submit(Job(jid, "b", "b", "gang", m, 8, 0.01, now, m, cpus_per_member=96), now)
            ev = _wait(target, t0, lambda es, j=jid: any(e.job_id == j and e.kind is Kind.FINISHED for e in es), 60)
            adm = [e.t for e in ev if e.job_id == jid and e.kind is Kind.ADMITTED]
            if adm:
                lat.append(adm[0] - now)
        result[f"serial_strict_spread_x{m}_ms"] = {
            "p50": round(float(np.percentile(lat, 50)) * 1000, 2) if lat else None,
            "p99": round(float(np.percentile(lat, 99)) * 1000, 2) if lat else None, "n": len(lat)}

        # Sustained: 1-GPU PACK groups held 0.2 s, kept `inflight` outstanding for `seconds`.
        submitted: dict[int, float] = {}
        admitted: list[tuple[float, float]] = []
        start = time.monotonic() - t0
        while time.monotonic() - t0 - start < seconds:
            now = time.monotonic() - t0
            while len(submitted) - len(admitted) < inflight:
                jid += 1
                submitted[jid] = now
                target.submit(Job(jid, "b", "b", "small", 1, 1, 0.2, now, 1, cpus_per_member=1), now)
            for e in target.advance(time.monotonic() - t0):
                if e.kind is Kind.ADMITTED and e.job_id in submitted:
                    admitted.append((e.t, e.t - submitted[e.job_id]))
            time.sleep(0.001)
        ts = np.array([a for a, _ in admitted if a >= start + 2.0])   # skip the first 2 s (ramp)
        window = seconds - 2.0
        lat2 = np.array([lat for _, lat in admitted])
        result["sustained_pack_1gpu"] = {
            "groups_per_s": round(len(ts) / window, 1) if window > 0 else None,
            "inflight": inflight, "seconds": seconds,
            "admission_ms_p50": round(float(np.percentile(lat2, 50)) * 1000, 1) if len(lat2) else None,
            "admission_ms_p99": round(float(np.percentile(lat2, 99)) * 1000, 1) if len(lat2) else None}
        cp = target.control_plane()
        result["gcs_scheduling_ms_p50"] = cp["gcs_scheduling_ms_p50"]
        result["gcs_scheduling_ms_p99"] = cp["gcs_scheduling_ms_p99"]
        result["gcs_creation_ms_p50"] = cp["gcs_creation_ms_p50"]
        result["gcs_creation_ms_p99"] = cp["gcs_creation_ms_p99"]
        result["loadavg_1m_at_end"] = float(Path("/proc/loadavg").read_text().split()[0])
    finally:
        t_stop = time.monotonic()
        target.stop()
        result["stop_s"] = round(time.monotonic() - t_stop, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fakes.ray.bench", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20.0, help="sustained-throughput phase length")
    p.add_argument("--serial", type=int, default=20, help="serial STRICT_SPREAD groups to time")
    p.add_argument("--inflight", type=int, default=64, help="outstanding groups in the sustained phase")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    a = p.parse_args(argv)
    if a.nodes < 1:
        print("--nodes: expected a positive integer", file=sys.stderr)
        return 2
    res = bench(a.nodes, a.seconds, a.serial, a.inflight, a.out)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
