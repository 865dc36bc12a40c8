"""One driver loop: feed a job list and a chaos plan to one Target and record what happens.

The loop is the same for every backend; only the clock differs (as SimPy's Environment and
RealtimeEnvironment differ only in how they wait):

  VirtualClock  time jumps to the next thing to do: a submission, a chaos step, a sample or the
                target's own next_wakeup(). Deterministic, as fast as the model (sim targets).
  WallClock     time passes. The loop sleeps until the next thing to do, at most poll_s, so a
                real target is drained often. Open loop: job i is sent at submit_s[i] however
                late earlier calls were; latency is still measured from submit_s, and the
                client's own lateness (sent - scheduled) is recorded next to it.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from loadgen.measure.recorder import Recorder
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Target

Progress = Callable[[float], None]


class VirtualClock:
    records_sends = False          # a simulated submission is never late

    def start(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def wait(self, upcoming: float, wakeup: float | None) -> float:
        self.t = min(upcoming, math.inf if wakeup is None else wakeup)
        return self.t

    @staticmethod
    def past(t: float, end_s: float) -> bool:
        return t > end_s

    def end(self, end_s: float) -> float:
        return end_s


class WallClock:
    records_sends = True

    def __init__(self, poll_s: float = 0.05, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.poll_s, self.clock, self.sleep = poll_s, clock, sleep

    def start(self) -> None:
        self.t0 = self.clock()

    def now(self) -> float:
        return self.clock() - self.t0

    def wait(self, upcoming: float, wakeup: float | None) -> float:
        self.sleep(max(0.0, min(self.poll_s, upcoming - self.now())))
        return self.now()

    @staticmethod
    def past(t: float, end_s: float) -> bool:
        return t >= end_s

    def end(self, end_s: float) -> float:
        return self.now()


def run(target: Target, jobs: list[Job], chaos: list[ChaosAction], end_s: float, sample_every_s: float,
        rec: Recorder, clock: VirtualClock | WallClock, progress: Progress | None = None,
        stop_when_done: bool = False) -> float:
    """Drive `target` until end_s (or, with stop_when_done, until every job has settled).
    Returns the time the run ended at, in the clock's seconds."""
    jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    i = k = 0
    next_sample = next_progress = 0.0
    clock.start()
    virtual = isinstance(clock, VirtualClock) and not stop_when_done
    while True:
        upcoming = min(jobs[i].submit_s if i < len(jobs) else math.inf,
                       chaos[k].t if k < len(chaos) else math.inf, next_sample)
        if virtual:
            _advance_before(target, rec, clock, upcoming, end_s)
        t = clock.wait(upcoming, target.next_wakeup())
        if clock.past(t, end_s):
            break
        rec.record(target.advance(t))
        while k < len(chaos) and chaos[k].t <= t:
            _apply_chaos(target, chaos[k], clock.now(), rec)
            k += 1
        while i < len(jobs) and jobs[i].submit_s <= t:
            if clock.records_sends:
                rec.sent_at(jobs[i].id, clock.now())
            rec.record(target.submit(jobs[i], clock.now()))
            i += 1
        if next_sample <= t:
            rec.sample(target.snapshot(clock.now()))
            next_sample += sample_every_s
            if progress and t >= next_progress:
                progress(t / end_s)
                next_progress = t + end_s / 50
        if stop_when_done and i == len(jobs) and k == len(chaos) and _all_settled(rec):
            break
    end = clock.end(end_s)
    rec.record(target.advance(end))
    rec.sample(target.snapshot(end))
    rec.close(end)
    return end


def _advance_before(target: Target, rec: Recorder, clock: VirtualClock, upcoming: float, end_s: float) -> None:
    """The target's own wakeups before `upcoming` (and not past end_s), one after another: what the
    loop above does for them, without its checks for submissions, chaos and samples, none of which
    is due before `upcoming`."""
    fused = getattr(target, "advance_before", None)
    if fused is not None:           # the lifecycle runs the same wakeups itself, one call each
        fused(upcoming, end_s, rec.record)
        return
    next_wakeup, advance, record = target.next_wakeup, target.advance, rec.record
    wakeup = next_wakeup()
    while wakeup is not None and wakeup < upcoming and wakeup <= end_s:
        clock.t = wakeup
        events = advance(wakeup)
        if events:
            record(events)
        wakeup = next_wakeup()


def run_virtual(target: Target, jobs: list[Job], chaos: list[ChaosAction], end_s: float,
                sample_every_s: float, rec: Recorder, progress: Progress | None = None) -> float:
    return run(target, jobs, chaos, end_s, sample_every_s, rec, VirtualClock(), progress)


def run_wall(target: Target, jobs: list[Job], chaos: list[ChaosAction], end_s: float,
             sample_every_s: float, rec: Recorder, progress: Progress | None = None,
             poll_s: float = 0.05, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep, stop_when_done: bool = True) -> float:
    """Jobs and chaos already time-scaled; ends at end_s or once every job has settled."""
    return run(target, jobs, chaos, end_s, sample_every_s, rec, WallClock(poll_s, clock, sleep), progress,
               stop_when_done)


def _apply_chaos(target: Target, action: ChaosAction, now: float, rec: Recorder) -> None:
    entry = {"t": round(now, 6), "kind": action.kind}
    try:
        rec.record(target.chaos(action, now))
        entry["applied"] = True
    except ChaosUnsupported as e:
        entry.update(applied=False, reason=str(e))
    rec.chaos_log.append(entry)


def _all_settled(rec: Recorder) -> bool:
    done = ~np.isnan(rec.finish) | rec.failed | rec.rejected
    return bool(done.all())
