"""What every kube measurement at scale records beside its figures (issue 32's evidence files).

A result is one small JSON file under results/fidelity-scale/kube/: the exact command line, when it
started, the machine's load average before and after (a figure measured on a loaded machine is
kept only if the file says so), and the figures themselves.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import sys
import time
from pathlib import Path

MAX_LOAD = 1.5          # 1-minute load average above which a run waits (2 shared cores)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_for_quiet(max_load: float = MAX_LOAD, max_wait_s: float = 600.0, poll_s: float = 15.0) -> dict:
    """Wait until the 1-minute load average is at most max_load (or max_wait_s passed); returns what
    a result records about it: the load before, and whether it had to be kept loaded."""
    t0 = time.monotonic()
    while os.getloadavg()[0] > max_load and time.monotonic() - t0 < max_wait_s:
        time.sleep(poll_s)
    before = load_avg()
    out = {"before": before, "waited_s": round(time.monotonic() - t0, 1)}
    if before[0] > max_load:
        out["loaded"] = f"1-minute load {before[0]} > {max_load} after waiting {max_wait_s:.0f} s: kept anyway"
    return out


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has spent so far (/proc/stat: user+nice+system+irq+softirq+steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU seconds of this process's waited-for children and their waited-for descendants."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def command_line() -> str:
    """The command that produced this result, as a user would type it."""
    argv = list(sys.argv)
    if argv and argv[0].endswith(".py") and "/fakes/" in argv[0]:
        mod = Path(argv[0]).resolve().relative_to(Path(__file__).resolve().parents[2]).with_suffix("")
        argv = ["python", "-m", ".".join(mod.parts)] + argv[1:]
    elif argv and argv[0] == "-m":
        argv = ["python", "-m"] + argv[1:]
    return " ".join(shlex.quote(a) for a in argv)


def started() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def cores_between(before: tuple[float, dict[str, float]], after: tuple[float, dict[str, float]]) -> dict[str, float]:
    """Cores each process used between two readings of (monotonic time, {name: CPU seconds so far}):
    what shared the machine with the component a phase measures."""
    wall = max(after[0] - before[0], 1e-9)
    return {n: round((v - before[1][n]) / wall, 3) for n, v in after[1].items() if n in before[1]}
