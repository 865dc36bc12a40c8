"""What slurmctld reports about itself over a window: sdiag polled, cycle by cycle, with the load.

A window resets sdiag's statistics (`sdiag -r`), polls sdiag every `period` seconds while the caller
drives the cluster, and then summarises: the main and backfill cycles (sdiag's own Mean/Max/Last
cycle and depth, plus each cycle's time where one poll saw exactly one new cycle), the RPCs by
type, slurmctld's CPU seconds and the load average. Used by the cost curve and the burst benchmark.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from fakes.slurm.client import SlurmClient
from fakes.slurm.fleet import SlurmFleet

MAIN_KEYS = ("main_cycles", "main_mean_cycle_us", "main_max_cycle_us", "main_last_cycle_us", "main_mean_depth",
             "main_last_queue_length")
BF_KEYS = ("bf_cycles", "bf_mean_cycle_us", "bf_max_cycle_us", "bf_last_cycle_us", "bf_last_depth",
           "bf_last_depth_try", "bf_mean_depth", "bf_mean_depth_try", "bf_last_queue_length", "bf_last_table_size",
           "bf_backfilled_jobs")
JOB_KEYS = ("jobs_submitted", "jobs_started", "jobs_completed", "jobs_canceled", "jobs_failed", "jobs_pending",
            "jobs_running")


def cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds a process has used."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Window:
    """sdiag reset, polled in a thread, summarised by close()."""

    def __init__(self, fl: SlurmFleet, name: str, period: float = 0.5):
        self.fl, self.name, self.period = fl, name, period
        self.client = SlurmClient(fl)
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Window:
        self.load_before = load()
        self.cpu0 = cpu_s(self.fl.ctld.pid if self.fl.ctld else None)
        self.fl.run(["sdiag", "-r"], check=False)
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _poll(self) -> None:
        while not self._stop.is_set():
            d = self.client.sdiag()
            if d:
                s = {"t": round(time.monotonic() - self.t0, 2), "load1": round(os.getloadavg()[0], 2),
                     "agent_count": d.get("agent_count")}
                s.update({k: d.get(k) for k in MAIN_KEYS + BF_KEYS + JOB_KEYS})
                self.samples.append(s)
            self._stop.wait(self.period)

    def last(self) -> dict[str, Any]:
        return self.samples[-1] if self.samples else {}

    def wait_for(self, key: str, at_least: int, timeout_s: float) -> bool:
        """Wait until sdiag's `key` (e.g. bf_cycles) reaches at_least, or timeout_s passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (self.last().get(key) or 0) >= at_least:
                return True
            time.sleep(self.period)
        return False

    def summary(self) -> dict[str, Any]:
        final = self.client.sdiag()
        cpu1 = cpu_s(self.fl.ctld.pid if self.fl.ctld else None)
        main_each, bf_each = cycles(self.samples)
        rpc = {k: {"count": v.get("count"), "ave_time_us": v.get("ave_time")}
               for k, v in (final.get("rpc") or {}).items() if v.get("count")}
        return {"window": self.name, "duration_s": round(time.monotonic() - self.t0, 1),
                "load_avg": {"before": self.load_before, "after": load(),
                             "max_1min": max((s["load1"] for s in self.samples), default=None)},
                "slurmctld_cpu_s": round(cpu1 - self.cpu0, 2) if cpu1 is not None and self.cpu0 is not None else None,
                "main": {k: final.get(k) for k in MAIN_KEYS}, "main_each": main_each,
                "bf": {k: final.get(k) for k in BF_KEYS}, "bf_each": bf_each,
                "jobs": {k: final.get(k) for k in JOB_KEYS}, "rpc": rpc,
                "agent_busy_polls": sum(1 for s in self.samples if s.get("agent_count")),
                "agent_count_max": max((s.get("agent_count") or 0 for s in self.samples), default=None),
                "polls": len(self.samples)}


def cycles(samples: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Each main and backfill cycle a poll saw alone (the counter moved by exactly one): its time,
    the queue it built, and the jobs it started. Jobs started are the counters' change since the
    previous cycle of the same kind was seen (main: jobs started minus backfilled; backfill:
    backfilled jobs), so a cycle that spans several polls is counted whole."""
    main_each, bf_each = [], []
    first = samples[0] if samples else {}
    main_mark = (first.get("jobs_started") or 0) - (first.get("bf_backfilled_jobs") or 0)
    bf_mark = first.get("bf_backfilled_jobs") or 0
    for a, b in zip(samples, samples[1:]):
        by_main = (b.get("jobs_started") or 0) - (b.get("bf_backfilled_jobs") or 0)
        by_bf = b.get("bf_backfilled_jobs") or 0
        if (b.get("main_cycles") or 0) - (a.get("main_cycles") or 0) == 1:
            main_each.append({"t": b["t"], "cycle_us": b["main_last_cycle_us"],
                              "queue": b["main_last_queue_length"], "load1": b["load1"],
                              "started": by_main - main_mark})
        if (b.get("main_cycles") or 0) != (a.get("main_cycles") or 0):
            main_mark = by_main
        if (b.get("bf_cycles") or 0) - (a.get("bf_cycles") or 0) == 1:
            bf_each.append({"t": b["t"], "cycle_us": b["bf_last_cycle_us"], "depth": b["bf_last_depth"],
                            "depth_try": b["bf_last_depth_try"], "queue": b["bf_last_queue_length"],
                            "table": b["bf_last_table_size"], "load1": b["load1"], "started": by_bf - bf_mark})
        if (b.get("bf_cycles") or 0) != (a.get("bf_cycles") or 0):
            bf_mark = by_bf
    return main_each, bf_each
