"""Placement-to-ready on the real Ray backend, target side (no ray): when each member may be up.

One ImageCache (loadgen/model/startup/imagecache.py) serves the whole run. When a gang's placement group
is CREATED, plan() feeds the cache the admission instant and the fleet nodes of its bundles and
returns each bundle's ready time; the driver starts the members' actors with them
(fakes/ray/members.py) and reports when the last one is up: that instant is READY. The model's own
gang ready time is kept per placement, so the real start-up cost on top of the model is measured.

The model's clock is the run seconds of the first admission's run (the RunClock's origin then),
kept when a test reuses the target and its RunClock restarts at zero: the pulls the cache holds
stay where they were.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.startup.spec import ImageSpec

KEEP = 100_000


class Readiness:
    def __init__(self, spec: ImageSpec, nodes: int, seed: int):
        self.spec = spec
        # Without an image or a container start the members would be up at placement: no actors.
        self.active = spec.pulls or spec.container_start_s > 0
        self.images = ImageCache(spec, nodes, seed)
        self.origin: float | None = None                 # time.monotonic() of the model's second 0
        self.planned: dict[int, tuple[int, float, float]] = {}   # group id -> (placement, model ready, placed)
        # (group id, placed, model's gang ready, READY), each time.monotonic(), per placement
        self.log: deque[tuple[int, float, float, float]] = deque(maxlen=KEEP)
        self.member_start_s: deque[float] = deque(maxlen=KEEP)   # actor created -> its __init__ runs
        self.ask_s: deque[float] = deque(maxlen=KEEP)            # group CREATED -> actors created

    def plan(self, gid: int, placement: int, placed: float, nodes: list[int], origin: float) -> list[float]:
        """Bundle i (on fleet node nodes[i], -1 if unknown) of a group CREATED at `placed`
        (time.monotonic()) may be up at the returned time i (time.monotonic())."""
        if self.origin is None:
            self.origin = origin
        t = placed - self.origin
        at = self.images.ready_at(t, [n for n in nodes if n >= 0])
        gang = max(at.values(), default=t + self.spec.container_start_s)
        self.planned[gid] = (placement, gang + self.origin, placed)
        return [self.origin + at.get(n, gang) for n in nodes]

    def ready(self, gid: int, m: dict[str, Any]) -> bool:
        """The driver's members_ready for gid; False when it belongs to a placement that is over."""
        plan = self.planned.get(gid)
        if plan is None or plan[0] != m["placement"]:
            return False
        del self.planned[gid]
        self.log.append((gid, plan[2], plan[1], float(m["t"])))
        self.member_start_s.extend(m.get("start_s", ()))
        self.ask_s.append(float(m["created"]) - plan[2])
        return True

    def drop(self, gid: int) -> None:
        self.planned.pop(gid, None)

    def figures(self) -> dict[str, Any]:
        if not self.active:
            return {}
        late = [r - m for _, _, m, r in self.log]
        now = None if self.origin is None else time.monotonic() - self.origin
        return {**self.images.figures(now), "members_ready_gangs": len(self.log),
                "members_waiting_gangs": len(self.planned), **_spread("ready_late_s", late),
                **_spread("member_start_s", self.member_start_s), **_spread("members_ask_s", self.ask_s)}


def _spread(name: str, values) -> dict[str, float | None]:
    v = np.fromiter(values, dtype=float)
    if not len(v):
        return {f"{name}_p50": None, f"{name}_p99": None, f"{name}_max": None}
    p50, p99 = np.percentile(v, [50, 99])
    return {f"{name}_p50": round(float(p50), 4), f"{name}_p99": round(float(p99), 4),
            f"{name}_max": round(float(v.max()), 4)}
