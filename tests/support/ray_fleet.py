"""A RealRay fleet for a test module (raylets or fakelets, all on 127.0.0.1), started once and
stopped with a check that none of its processes is left."""
from __future__ import annotations

import pytest

from fakes.ray.fleet import ray_processes
from fakes.real.procs import session_pids
from loadgen.model.target import TargetContext

NODES = 8


def ray_or_fail() -> None:
    try:
        import importlib.util
        ok = importlib.util.find_spec("ray") is not None
    except Exception:
        ok = False
    if not ok:
        pytest.fail("ray is not installed: run `make venv` (pyproject depends on ray[default])", pytrace=False)


def started(ctx: TargetContext):
    """A started RealRay for a module; stopped at the end, checking that no process of its
    sessions (head, driver, fakelet processes) and no raylet/gcs_server of its fleet is left."""
    from fakes.ray.target import RealRay
    t = RealRay(ctx)
    sessions: list[int] = []
    marker = ""
    try:
        t.start()
        sessions = [t.fleet.pgid, t.proc.pid, *(t.fleet.fakelets.pids() if t.fleet.fakelets else [])]
        marker = t.fleet.ray_tmpdir
        t.sessions, t.marker = sessions, marker
        yield t
    finally:
        t.stop()
        left = [p for s in sessions for p in session_pids(s)] + [p for p, _ in ray_processes(marker or None)
                                                                  if marker]
        assert not left, f"processes left after stop: {left}"
