"""This machine's CPU while a real backend ran: the share of all cores busy (every process, from
/proc/stat), so a ceiling on a small machine can say when the machine itself was the limit."""
from __future__ import annotations

import os
from dataclasses import dataclass

STAT = "/proc/stat"


@dataclass(frozen=True)
class CpuTimes:
    busy: int        # jiffies spent in user, nice, system, irq, softirq and steal
    total: int       # the same plus idle and iowait


def read(path: str = STAT) -> CpuTimes | None:
    """The aggregate cpu line, or None where /proc is not there (not Linux)."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:9]] + [0] * max(0, 8 - len(fields[1:9]))
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    busy = user + nice + system + irq + softirq + steal
    return CpuTimes(busy=busy, total=busy + idle + iowait)


def busy_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Share of all cores' time that was busy between two readings (0..1)."""
    if before is None or after is None or after.total <= before.total:
        return None
    return round((after.busy - before.busy) / (after.total - before.total), 4)


def cores() -> int:
    return os.cpu_count() or 1
