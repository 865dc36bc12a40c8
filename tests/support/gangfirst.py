"""A scenario's own job plan replayed with one 2-node gang of whole nodes submitted first.

Whether a generated gang ever finds two free nodes on a 4-node fleet depends on where the 1-GPU
jobs before it landed: kube-scheduler's default scoring spreads them, so on a loaded machine none
of tests/data/existing-small.yaml's twelve gangs may run. A gang at t=1 s, before any other job,
meets an empty fleet on every backend, so a test of placement feedback does not rest on timing.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from loadgen.input.plan import plan_run
from loadgen.input.scenario import load
from loadgen.input.traces import export_jsonl


def with_a_gang_first(scenario: Path, tmp: Path) -> Path:
    """A copy of `scenario` whose workload is its own plan plus the gang; the copy's path."""
    jobs = plan_run(load(str(scenario))).jobs
    gang = dataclasses.replace(jobs[0], id=max(j.id for j in jobs) + 1, cls="large", members=2,
                               gpus_per_member=8, submit_s=1.0, duration_s=120.0, min_available=2, share="")
    trace = tmp / "gang-first.jsonl"
    export_jsonl([gang, *jobs], trace, {"generated_by": f"tests/support/gangfirst.py from {scenario.name}"})
    raw = yaml.safe_load(scenario.read_text())
    raw["name"] = f"{raw['name']}-gang-first"
    raw["workload"] = {"trace": str(trace)}
    out = tmp / "gang-first.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out
