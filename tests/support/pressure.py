"""How much of a stretch of time the machine's runnable tasks spent waiting for a CPU (Linux PSI)."""
from __future__ import annotations

import time
from pathlib import Path

PSI = Path("/proc/pressure/cpu")


def _some_us() -> int | None:
    try:
        line = PSI.read_text().splitlines()[0]          # some avg10=... avg60=... avg300=... total=<us>
        return int(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


class CpuWait:
    """`with CpuWait() as w: ...`; then w.share: the fraction of the block's wall time in which at
    least one runnable task waited for a CPU (0 where the kernel has no PSI)."""

    def __enter__(self) -> CpuWait:
        self.t0, self.s0 = time.monotonic(), _some_us()
        self.share = 0.0
        return self

    def __exit__(self, *exc) -> None:
        s1, wall_us = _some_us(), (time.monotonic() - self.t0) * 1e6
        if self.s0 is not None and s1 is not None and wall_us > 0:
            self.share = min(0.9, max(0.0, (s1 - self.s0) / wall_us))
