"""A CPU hog for tests: a busy loop in its own process (pinned to one core, or free to move), started
and stopped by the test that needs a busy machine, and a pytest run of chosen test files beside it."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from support.paths import ROOT

BUSY = ("import os, sys\nif sys.argv[1] != 'free':\n    os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "while True:\n    pass\n")


@contextlib.contextmanager
def cpu_hog(core: int | None = 0):
    """A process spinning on `core` (None: wherever the kernel puts it) for the duration."""
    p = subprocess.Popen([sys.executable, "-c", BUSY, "free" if core is None else str(core)], start_new_session=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def pytest_beside_a_hog(files: list[str], marks: str, core: int | None = 0, timeout_s: float = 3600) -> tuple[int, str]:
    """`pytest -m marks files` in a child while a hog spins; (exit status, the output's tail). The
    hog must still be spinning when the tests end: it ran throughout."""
    with cpu_hog(core) as hog:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marks, *files],
                           cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                           env={**os.environ,
                                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
        assert hog.poll() is None, "the CPU hog stopped before the tests ended"
    return r.returncode, (r.stdout + r.stderr)[-4000:]
