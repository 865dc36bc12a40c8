"""Rendezvous after readiness, for every backend alike: a Target wrapped so that each READY its
backend reports is followed by the gang's rendezvous, drawn from loadgen/model/startup/rendezvous.py.

A successful attempt ends in TRAINING (time-to-training). An attempt longer than the timeout ends
in START_FAILED at the timeout and restarts per the scheduler's policy:
  in-place  the containers restart where they are (a Kubernetes Job's restartPolicy OnFailure, Ray
            Train restarting its worker group on the same placement group) and try again after
            the restart back-off;
  requeue   the whole gang goes back to its scheduler (Volcano's RestartJob policy, Slurm's
            requeue): Target.restart(), then a new placement, readiness and rendezvous.
Pure and clock-free like the targets: timers fire in advance(now), and next_wakeup() tells a
virtual clock when.
"""
from __future__ import annotations

import heapq
import itertools
import math
from typing import Any

from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.startup.rendezvous import Rendezvous
from loadgen.model.startup.spec import StartupSpec
from loadgen.model.target import ChaosAction, ChaosUnsupported, Snapshot, Target

ENDS_ATTEMPT = frozenset((Kind.EVICTED, Kind.REQUEUED, Kind.FINISHED, Kind.FAILED, Kind.REJECTED))
# as module names: `Kind.X` goes through the enum class's attribute lookup, on every event here
ADMITTED, READY, TRAINING = Kind.ADMITTED, Kind.READY, Kind.TRAINING


class Lifecycle:
    """Wraps `target`; everything not defined here is the target's own (start, stop, figures)."""

    def __init__(self, target: Target, spec: StartupSpec, fleet: Fleet, seed: int):
        self.target, self.spec = target, spec
        self.rdv = Rendezvous(spec.rendezvous, fleet, seed)
        self.policy = spec.rendezvous.policy(target.name)
        self.rdv_active = spec.rendezvous.active  # the spec is frozen: asked once, not every attempt
        self.jobs: dict[int, Job] = {}
        self.nodes: dict[int, tuple[int, ...]] = {}
        self.token: dict[int, int] = {}
        self.attempts: dict[int, int] = {}
        self.counts = {"rendezvous_attempts": 0, "start_failures": 0, "restarts_in_place": 0,
                       "restarts_requeued": 0}
        self._timers: list = []
        self._seq = itertools.count()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    # --- the Target calls -----------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        self.jobs[job.id] = job
        return self._after(self.target.submit(job, now))

    def advance(self, now: float) -> list[Event]:
        events = self.target.advance(now)
        out = self._after(events) if events else events
        timers = self._timers
        while timers and timers[0][0] <= now:
            t, _, fn, args = heapq.heappop(timers)
            out.extend(fn(t, *args))
        return out

    def advance_before(self, upcoming: float, end_s: float, record) -> None:
        """Every wakeup before `upcoming` (and not past end_s) as the virtual runner takes them one
        by one (next_wakeup, advance, record), with the same events in the same order: the
        target's instants through its run_instants, this wrapper's own timers at their instants
        (after the target's at the same instant, as advance does)."""
        run = getattr(self.target, "run_instants", None)
        if run is None:
            wakeup = self.next_wakeup()
            while wakeup is not None and wakeup < upcoming and wakeup <= end_s:
                events = self.advance(wakeup)
                if events:
                    record(events)
                wakeup = self.next_wakeup()
            return
        own, after, pop = self._timers, self._after, heapq.heappop

        def instant(w: float, events: list[Event]) -> float:
            out = after(events) if events else events
            while own and own[0][0] <= w:
                t, _, fn, args = pop(own)
                out.extend(fn(t, *args))
            if out:
                record(out)
            return own[0][0] if own else math.inf

        while True:
            run(upcoming, end_s, own[0][0] if own else math.inf, instant)
            # the target's next instant is past upcoming or end_s, or after this wrapper's next timer
            if not own:
                return
            w = own[0][0]
            if w >= upcoming or w > end_s:
                return
            instant(w, self.target.advance(w))

    def next_wakeup(self) -> float | None:
        theirs = self.target.next_wakeup()
        if not self._timers:
            return theirs
        own = self._timers[0][0]
        return own if theirs is None or own < theirs else theirs

    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        return self._after(self.target.chaos(action, now))

    def snapshot(self, now: float) -> Snapshot:
        return self.target.snapshot(now)

    def control_plane(self) -> dict[str, Any]:
        own = self.counts if self.spec.rendezvous.active else {}
        return {**self.target.control_plane(), **{k: v for k, v in own.items() if v}}

    # --- rendezvous -------------------------------------------------------------------------------
    def _after(self, events: list[Event]) -> list[Event]:
        """`events` with what each READY starts right after it (the list itself when nothing is added)."""
        out: list[Event] | None = None
        for n, e in enumerate(events):
            k = e.kind
            if k is ADMITTED:
                self.nodes[e.job_id] = e.nodes
            elif k is READY:
                self._bump(e.job_id)
                more = self._attempt(e.t, e.job_id, self.token[e.job_id])
                if more:
                    if out is None:
                        out = events[:n]
                    out.append(e)
                    out.extend(more)
                    continue
            elif k in ENDS_ATTEMPT:
                self._bump(e.job_id)
            if out is not None:
                out.append(e)
        return events if out is None else out

    def _bump(self, job_id: int) -> None:
        self.token[job_id] = self.token.get(job_id, 0) + 1

    def _attempt(self, t: float, job_id: int, token: int) -> list[Event]:
        if self.token.get(job_id) != token:
            return []
        job = self.jobs.get(job_id)
        n = self.attempts[job_id] = self.attempts.get(job_id, 0) + 1
        self.counts["rendezvous_attempts"] += 1
        if job is None or not self.rdv_active:
            return [Event(t, job_id, TRAINING)]
        a = self.rdv.attempt(job_id, n, job.members, job.gpus_per_member, self.nodes.get(job_id, ()))
        if a.timed_out:
            self._at(t + self.spec.rendezvous.timeout_s, self._timed_out, job_id, token)
        else:
            self._at(t + a.seconds, self._trained, job_id, token)
        return []

    def _trained(self, t: float, job_id: int, token: int) -> list[Event]:
        return [Event(t, job_id, TRAINING)] if self.token.get(job_id) == token else []

    def _timed_out(self, t: float, job_id: int, token: int) -> list[Event]:
        if self.token.get(job_id) != token:
            return []
        self.counts["start_failures"] += 1
        out = [Event(t, job_id, Kind.START_FAILED, reason=f"rendezvous-timeout:{self.policy}")]
        if self.policy == "requeue":
            try:
                restarted = self.target.restart(job_id, t, "rendezvous-timeout")
            except ChaosUnsupported:
                self.counts["requeue_unsupported"] = self.counts.get("requeue_unsupported", 0) + 1
            else:
                self.counts["restarts_requeued"] += 1
                out.extend(self._after(restarted))
                return out
        self.counts["restarts_in_place"] += 1
        self._at(t + self.spec.rendezvous.restart_backoff_s, self._attempt, job_id, token)
        return out

    def _at(self, t: float, fn, *args) -> None:
        heapq.heappush(self._timers, (t, next(self._seq), fn, args))
