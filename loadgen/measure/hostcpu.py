"""This machine's CPU while a real backend ran: the share of all cores busy (every process, from
/proc/stat), so a ceiling on a small machine can say when the machine itself was the limit, and the
share of the time some runnable task waited for a CPU (Linux PSI, /proc/pressure/cpu), which says
how far contention stretched what a real run measured."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

STAT = "/proc/stat"
PSI = "/proc/pressure/cpu"


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


def _psi_some_us(path: str = PSI) -> int | None:
    try:
        with open(path) as f:
            line = f.readline()             # some avg10=... avg60=... avg300=... total=<us>
        return int(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


class CpuWait:
    """`with CpuWait() as w: ...`; then w.share: the fraction of the block's wall time in which at
    least one runnable task waited for a CPU (0 where the kernel has no PSI)."""

    def __enter__(self) -> CpuWait:
        self.t0, self.s0 = time.monotonic(), _psi_some_us()
        self.share = 0.0
        return self

    def __exit__(self, *exc) -> None:
        s1, wall_us = _psi_some_us(), (time.monotonic() - self.t0) * 1e6
        if self.s0 is not None and s1 is not None and wall_us > 0:
            self.share = min(0.9, max(0.0, (s1 - self.s0) / wall_us))
