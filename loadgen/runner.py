"""Drivers: feed a job list and a chaos plan to one Target and record what happens.

run_virtual: a discrete-event loop on virtual time (sim targets; deterministic, fast).
run_wall:    the same loop on the wall clock, open loop: job i is sent at submit_s[i] however
             late earlier calls were; latency is still measured from submit_s.
"""
from __future__ import annotations

import math
import time
from typing import Callable

from loadgen.model.job import Job
from loadgen.recorder import Recorder
from loadgen.model.target import ChaosAction, ChaosUnsupported, Target

Progress = Callable[[float], None]


def _apply_chaos(target: Target, action: ChaosAction, now: float, rec: Recorder) -> None:
    entry = {"t": round(now, 6), "kind": action.kind}
    try:
        rec.record(target.chaos(action, now))
        entry["applied"] = True
    except ChaosUnsupported as e:
        entry.update(applied=False, reason=str(e))
    rec.chaos_log.append(entry)


def run_virtual(target: Target, jobs: list[Job], chaos: list[ChaosAction], end_s: float,
                sample_every_s: float, rec: Recorder, progress: Progress | None = None) -> float:
    """Returns the virtual time the run ended at."""
    jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    i = k = 0
    next_sample = 0.0
    next_progress = 0.0
    while True:
        t_job = jobs[i].submit_s if i < len(jobs) else math.inf
        t_chaos = chaos[k].t if k < len(chaos) else math.inf
        wake = target.next_wakeup()
        t = min(t_job, t_chaos, next_sample, math.inf if wake is None else wake)
        if t > end_s:
            rec.record(target.advance(end_s))
            rec.sample(target.snapshot(end_s))
            rec.close(end_s)
            return end_s
        rec.record(target.advance(t))
        while k < len(chaos) and chaos[k].t <= t:
            _apply_chaos(target, chaos[k], t, rec)
            k += 1
        while i < len(jobs) and jobs[i].submit_s <= t:
            rec.record(target.submit(jobs[i], t))
            i += 1
        if next_sample <= t:
            rec.sample(target.snapshot(t))
            next_sample += sample_every_s
            if progress and t >= next_progress:
                progress(t / end_s)
                next_progress = t + end_s / 50


def run_wall(target: Target, jobs: list[Job], chaos: list[ChaosAction], end_s: float,
             sample_every_s: float, rec: Recorder, progress: Progress | None = None,
             poll_s: float = 0.05, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep, stop_when_done: bool = True) -> float:
    """Wall-clock open loop for real targets; jobs and chaos are already time-scaled.

    Ends at end_s, or earlier once every job has finished or failed (stop_when_done).
    """
    jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    t0 = clock()
    i = k = 0
    next_sample = 0.0
    while True:
        now = clock() - t0
        if now >= end_s:
            break
        while k < len(chaos) and chaos[k].t <= now:
            _apply_chaos(target, chaos[k], now, rec)
            k += 1
        while i < len(jobs) and jobs[i].submit_s <= now:
            rec.sent_at(jobs[i].id, clock() - t0)
            rec.record(target.submit(jobs[i], clock() - t0))
            i += 1
        rec.record(target.advance(clock() - t0))
        if next_sample <= now:
            rec.sample(target.snapshot(clock() - t0))
            next_sample += sample_every_s
            if progress:
                progress(now / end_s)
        if stop_when_done and i == len(jobs) and k == len(chaos) and _all_settled(rec):
            break
        upcoming = min(jobs[i].submit_s if i < len(jobs) else math.inf,
                       chaos[k].t if k < len(chaos) else math.inf, next_sample)
        sleep(max(0.0, min(poll_s, upcoming - (clock() - t0))))
    end = clock() - t0
    rec.record(target.advance(end))
    rec.sample(target.snapshot(end))
    rec.close(end)
    return end


def _all_settled(rec: Recorder) -> bool:
    import numpy as np
    done = ~np.isnan(rec.finish) | rec.failed | rec.rejected
    return bool(done.all())
