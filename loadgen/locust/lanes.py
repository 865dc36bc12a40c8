"""One Lane per scheduler in a Locust process: its Target, its clock, and its event stream.

Open loop: every submission runs in its own greenlet, started at the job's scheduled wall
time whatever earlier calls are doing; latency is measured from that scheduled time and the
generator's own lateness (sent - scheduled) is recorded next to it.

Clocks: sim targets run on virtual time, now = wall_elapsed x time_scale, and see the
workload unscaled; real targets run on wall seconds and see jobs already time-scaled
(comparative's rule). Either way job.submit_s / k is the wall send time with k = time_scale
(sim) or 1 (real), and latencies are in the lane's own clock.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import gevent
from gevent.pool import Group

from loadgen.locust.stats import ms
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Target

# fire(request_type, name, response_time_ms | None, exception | None)
Fire = Callable[[str, str, float | None, Exception | None], None]


class GangFailure(Exception):
    """A gang that was rejected, failed, evicted or never admitted; str() is the reason."""


def event_row(e: Event) -> tuple:
    # tuples of plain values: the cyclic GC stops tracking them, so a long run's rows cost no GC pauses
    return (e.t, e.job_id, e.kind.value, e.members, e.reason, e.backend_t, e.nodes)


def row_event(r) -> Event:
    return Event(r[0], r[1], Kind(r[2]), r[3], r[4], r[5], tuple(r[6]) if len(r) > 6 else ())


class Lane:
    def __init__(self, name: str, target: Target, k: float, jobs: dict[int, Job],
                 chaos: list[ChaosAction], sample_every_wall_s: float, fire: Fire,
                 clock: Callable[[], float] = time.monotonic, observes: bool = True):
        self.name, self.target, self.k = name, target, k
        # False for a process that only submits to a cluster another process observes: it samples
        # nothing and counts no admission outcome (the observer does, once for all)
        self.observes = observes
        self.jobs = jobs                       # id -> job in the lane's clock
        self.chaos = sorted(chaos, key=lambda a: a.t)
        self.sample_every = sample_every_wall_s
        self.fire = fire
        self.clock = clock
        self.t0 = clock()
        self.next_sample = 0.0
        self.sent_ids: set[int] = set()
        self.admitted: set[int] = set()
        self.closed: set[int] = set()          # failed or rejected: no more ADMIT outcomes
        self.batch = {"sent": [], "events": [], "snaps": [], "chaos": []}
        self.final: dict | None = None

    def wall(self) -> float:
        return self.clock() - self.t0

    def now(self) -> float:
        return self.wall() * self.k

    # --- submissions (one greenlet each) ----------------------------------------------------
    def submit(self, job: Job, sched_wall: float) -> None:
        lj = self.jobs[job.id]
        sent = self.wall()
        self.sent_ids.add(job.id)
        self.batch["sent"].append((job.id, sent * self.k, sent - sched_wall))
        try:
            if self.target.timebase == "virtual":   # bring the model up to `now` first, as the runner does
                self._handle(self.target.advance(sent * self.k))
            events = self.target.submit(lj, sent * self.k)
        except Exception as e:  # the backend refused the call itself
            done = self.wall()
            self.fire("SUBMIT", self._name(lj), ms(done - sched_wall), e)
            self._handle([Event(done * self.k, job.id, Kind.FAILED, 0, f"submit-error: {e}")])
            return
        done = self.wall()
        rejected = next((e for e in events if e.kind is Kind.REJECTED), None)
        self.fire("SUBMIT", self._name(lj), ms(done - sched_wall),
                  GangFailure(f"rejected: {rejected.reason}") if rejected else None)
        self._handle(events)

    # --- the driver's tick ------------------------------------------------------------------
    def pump(self) -> None:
        now = self.now()
        self._handle(self.target.advance(now))
        while self.chaos and self.chaos[0].t <= now:
            self._apply(self.chaos.pop(0), now)
        if self.observes and self.wall() >= self.next_sample:
            self._sample(now)
            self.next_sample += self.sample_every

    def _apply(self, action: ChaosAction, now: float) -> None:
        entry = {"t": round(now, 6), "kind": action.kind}
        try:
            self._handle(self.target.chaos(action, now))
            entry["applied"] = True
        except ChaosUnsupported as e:
            entry.update(applied=False, reason=str(e))
        self.batch["chaos"].append(entry)

    def _sample(self, now: float) -> None:
        s = self.target.snapshot(now)
        self.batch["snaps"].append([s.t, s.gpus_allocated, s.gpus_partial, s.gpus_stranded, s.pending_jobs,
                                    s.partial_gangs, s.running_jobs, dict(s.control_plane)])

    def _name(self, job: Job) -> str:
        return f"{self.name}/{job.cls}"

    def _handle(self, events: list[Event]) -> None:
        for e in events:
            self.batch["events"].append(event_row(e))
            job = self.jobs.get(e.job_id)
            if job is None:
                continue
            if e.kind is Kind.ADMITTED and e.job_id not in self.admitted:
                self.admitted.add(e.job_id)
                self.fire("ADMIT", self._name(job), ms(e.t - job.submit_s), None)
            elif e.kind in (Kind.REJECTED, Kind.FAILED) and e.job_id not in self.closed:
                self.closed.add(e.job_id)
                self.fire("ADMIT", self._name(job), None, GangFailure(f"{e.kind.value}: {e.reason or 'no reason'}"))
            elif e.kind is Kind.EVICTED:
                self.fire("ADMIT", self._name(job), None, GangFailure(f"evicted: {e.reason or 'no reason'}"))

    # --- end of run -------------------------------------------------------------------------
    def finish(self) -> None:
        """Last advance and sample; gangs still waiting count as timed out; stop the target."""
        if self.final is not None:
            return
        now = self.now()
        try:
            self._handle(self.target.advance(now))
            if self.observes:
                self._sample(now)
            for jid in sorted(self.sent_ids - self.admitted - self.closed) if self.observes else ():
                # one message for all, so Locust's failure table groups them (waits are in jobs.csv)
                self.fire("ADMIT", self._name(self.jobs[jid]), None,
                          GangFailure("timeout: not admitted by end of run"))
            cp = self.target.control_plane()
        finally:
            self.target.stop()
        # on an existing cluster: what the run created and could not delete (all zeros when clean)
        self.final = {"end": now, "wall": self.wall(), "control_plane": {**cp, **self.target.after_stop()}}

    def take(self) -> dict:
        out, self.batch = self.batch, {"sent": [], "events": [], "snaps": [], "chaos": []}
        if self.final is not None:
            out["final"] = self.final
        return out


class OpenLoop:
    """Sends jobs at their scheduled wall times to every lane; never waits for a call to return."""

    def __init__(self, lanes: list[Lane], scale: float, clock: Callable[[], float] = time.monotonic):
        self.lanes, self.scale, self.clock = lanes, scale, clock
        self.calls = Group()
        self.stopped = False

    def run(self, jobs: list[Job]) -> None:
        """Blocks for the length of the schedule (jobs sorted by submit time)."""
        t0 = self.lanes[0].t0 if self.lanes else self.clock()
        for job in jobs:
            if self.stopped:
                return
            sched = job.submit_s / self.scale
            while (delay := sched - (self.clock() - t0)) > 0:
                gevent.sleep(delay)     # the loop's cached clock can wake us a little early
            if self.stopped:
                return
            for lane in self.lanes:
                self.calls.spawn(lane.submit, job, sched)

    def stop(self) -> None:
        self.stopped = True
        self.calls.kill(block=False)
