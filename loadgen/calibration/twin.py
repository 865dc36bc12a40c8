"""One real run and its simulated twin.

The real run replays the scenario's plan time-scaled onto the wall clock (`gangstorm run
--backend real`). Its twin is the simulated scheduler on that same wall-clock plan (jobs, chaos
and window all divided by the time scale) on virtual time, so both measure in the same seconds
and a ratio of their admission tails says how far the model is from the real scheduler.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loadgen.drive.comparative import RunOptions, run, run_one
from loadgen.drive.timescale import scaled_chaos, scaled_job
from loadgen.input.plan import RunPlan, plan_run
from loadgen.input.profile import Profile
from loadgen.input.scenario import Scenario, from_dict
from loadgen.measure.recorder import Recorder


def real_run(scenario: Scenario, name: str, out_dir: Path, time_scale: float, backend: str = "real") -> dict:
    """`gangstorm run --backend real` for one scheduler; returns its summary (written to out_dir)."""
    return run(scenario, RunOptions(schedulers=[name], backend=backend, out_dir=out_dir, time_scale=time_scale))


def wall_plan(scenario: Scenario, time_scale: float, trace: str | None = None) -> RunPlan:
    """The plan a real run replays (of `trace`, if given), in wall seconds."""
    p = plan_run(scenario, trace)
    return replace(p, jobs=[scaled_job(j, time_scale) for j in p.jobs], chaos=scaled_chaos(p.chaos, time_scale),
                   horizon_s=p.horizon_s / time_scale, end_s=p.end_s / time_scale,
                   warmup_s=p.warmup_s / time_scale)


# Settings a real adapter divides by the time scale, in whole seconds and at least 1, so the twin on
# the wall-clock plan must too: coscheduling's PodGroup scheduleTimeoutSeconds (fakes/coscheduling/
# controlplane.py permit_wait_s). kube-gang's Permit timeout is fixed in kube-scheduler (5 min of wall
# time whatever the scale), so its twin keeps the unscaled 300 s.
SCALED_WHOLE_SECONDS = {"coscheduling": ("permit_timeout_s",)}


def twin(scenario: Scenario, name: str, time_scale: float, profile: Profile | None = None,
         trace: str | None = None) -> dict:
    """The simulated scheduler on the real run's wall-clock plan; nothing written to disk."""
    return twin_run(scenario, name, time_scale, profile, trace)[0]


def twin_run(scenario: Scenario, name: str, time_scale: float, profile: Profile | None = None,
             trace: str | None = None) -> tuple[dict, Recorder]:
    """`twin`, with the recorder that holds each job's times."""
    overrides = {"sample_every_s": max(scenario.data["sample_every_s"] / time_scale, 0.5)}
    for key in SCALED_WHOLE_SECONDS.get(name, ()):
        overrides[f"schedulers.{name}.{key}"] = max(1, round(scenario.data["schedulers"][name][key] / time_scale))
    sc = from_dict(scenario.raw, scenario.path, scenario.profile if profile is None else profile,
                   overrides=overrides)
    return run_one(sc, name, RunOptions(schedulers=[name], backend="sim", jobs_csv=False),
                   wall_plan(scenario, time_scale, trace), None)
