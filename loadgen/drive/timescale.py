"""A virtual-time plan on a wall clock: real backends run `scale` virtual seconds per wall second.

Only the workload is scaled (submit times, durations, chaos times); latencies a real backend shows
stay in wall seconds, since a control plane's latency does not scale.
"""
from __future__ import annotations

from dataclasses import replace

from loadgen.model.job import Job
from loadgen.model.target import ChaosAction

MIN_DURATION_S = 0.5       # a scaled job still holds its allocation long enough to be observed


def scaled_job(j: Job, scale: float) -> Job:
    return replace(j, submit_s=j.submit_s / scale, duration_s=max(j.duration_s / scale, MIN_DURATION_S))


def scaled_chaos(actions: list[ChaosAction], scale: float) -> list[ChaosAction]:
    out = []
    for a in actions:
        params = dict(a.params)
        if params.get("duration_s") is not None:
            params["duration_s"] = params["duration_s"] / scale
        out.append(ChaosAction(a.t / scale, a.kind, params))
    return out
