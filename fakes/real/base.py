"""What the four real adapters share: the run clock, the event outbox, chaos dispatch, the snapshot.

The real counterpart of fakes/sim/base.py. An adapter drives a real scheduler on a fake fleet:
client threads send work, watcher threads observe the backend and stamp what they see with
`self.clock.now()`, and the caller's thread turns those observations into Events in advance().
Job state is owned by the caller's thread only, so submit/advance/snapshot need no locks.

A subclass implements:
  start() / stop()             bring the backend up / down (processes through fakes.real.procs)
  submit(job, now)             hand one job to the backend without blocking; events via _emit
  _observe(now)                turn queued observations into events (_emit); called by advance
  used_per_node()              GPUs held per fleet node as the backend reports them
  live_gangs()                 (job, members bound, admitted) of every live (not finished) job
  live_control_plane()         the latest control-plane figures (cheap: a scraper keeps them)
  _chaos_<kind>(action, now)   one method per chaos kind it supports (Target.chaos dispatches)
and keeps `self.down` (fleet indices of nodes it failed) up to date.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from loadgen.model.events import Event
from loadgen.model.fleet import stranded_gpus
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, Snapshot, Target, TargetContext


class RunClock:
    """Run seconds (the runner's `now`) on CLOCK_MONOTONIC, for stamping observations on any thread.

    The runner passes `now` into every call; the first one fixes the origin. A `now` that
    disagrees with the origin by more than RESYNC_S means a new run started counting from zero
    with the same target (a test reusing a fleet), and moves the origin.
    """
    RESYNC_S = 5.0

    def __init__(self) -> None:
        self.origin: float | None = None          # time.monotonic() at run second 0
        self.origin_epoch: float | None = None    # time.time() at run second 0 (backends' own stamps)

    def sync(self, now: float) -> bool:
        """Returns True when the origin was (re)set."""
        origin = time.monotonic() - now
        if self.origin is not None and abs(origin - self.origin) <= self.RESYNC_S:
            return False
        self.origin, self.origin_epoch = origin, time.time() - now
        return True

    def now(self) -> float:
        return 0.0 if self.origin is None else time.monotonic() - self.origin

    def at(self, monotonic: float) -> float:
        """A time.monotonic() stamp in run seconds."""
        return monotonic - (self.origin if self.origin is not None else monotonic)

    def from_epoch(self, epoch: float | None) -> float | None:
        """A backend's own wall-clock stamp (epoch seconds) in run seconds."""
        return None if epoch is None or self.origin_epoch is None else epoch - self.origin_epoch


class RealTarget(Target):
    backend = "real"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.fleet = ctx.fleet
        self.cfg = dict(ctx.config or {})
        self.clock = RunClock()
        self.down: set[int] = set()            # fleet indices of nodes chaos has failed

    # --- the Target calls, with the clock kept in step ------------------------------------------
    def advance(self, now: float) -> list[Event]:
        self.clock.sync(now)
        self._observe(now)
        return self._take()

    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        self.clock.sync(now)
        return super().chaos(action, now)

    def _observe(self, now: float) -> None:
        """Turn what the watcher threads queued into events (self._emit)."""

    # --- observation ------------------------------------------------------------------------------
    def used_per_node(self) -> np.ndarray:
        raise NotImplementedError

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        """(job, members bound now, admitted in its current attempt) of every live job."""
        raise NotImplementedError

    def live_control_plane(self) -> dict[str, Any]:
        return {}

    def free_per_node(self) -> np.ndarray:
        """Free GPUs per node as a pending member sees them: nothing on a failed node."""
        free = np.clip(self.ctx.fleet.gpus_per_node - self.used_per_node(), 0, None)
        if self.down:
            free[sorted(self.down)] = 0
        return free

    def snapshot(self, now: float) -> Snapshot:
        self.clock.sync(now)
        waiting = running = partial = partial_gpus = 0
        smallest: int | None = None
        for job, bound, admitted in self.live_gangs():
            if admitted:
                running += 1
                continue
            waiting += 1
            smallest = job.gpus_per_member if smallest is None else min(smallest, job.gpus_per_member)
            if bound:
                partial += 1
                partial_gpus += bound * job.gpus_per_member
        return Snapshot(t=now, gpus_allocated=int(self.used_per_node().sum()), gpus_partial=partial_gpus,
                        gpus_stranded=stranded_gpus(self.free_per_node(), smallest), pending_jobs=waiting,
                        partial_gangs=partial, running_jobs=running, control_plane=self.live_control_plane())
