"""Bounded work: no input may make a run grow without limit, and no job may be unable to ever fit.

The limits sit far above every shipped scenario (the 100k-node benchmark plans 60,634 jobs and
120 samples per scheduler) and far below what would exhaust a 24 GB machine: a planned job costs
about 1 KiB across the plan, the recorder and the target.
"""
from __future__ import annotations

from loadgen.input.scenario import Scenario, ScenarioError
from loadgen.model.errors import TraceError
from loadgen.model.job import Job

MAX_JOBS = 2_000_000                 # per run: ~2 GiB of plan + recorder + simulated state
MAX_SAMPLES = 200_000                # per scheduler: timeseries rows
MAX_CHAOS_ACTIONS = 1_000_000        # expected evictions over a run
MAX_ETCD_WRITES = 1_000_000          # one etcd_pressure step: bytes / object_bytes


def member_slots(job_gpus_per_member: int, gpus_per_node: int) -> int:
    """Members of this size one node can hold (0: none)."""
    return gpus_per_node // job_gpus_per_member


def check_jobs_expected(scenario: Scenario, expected: float, rate_per_s: float) -> None:
    if expected > MAX_JOBS:
        raise ScenarioError(scenario.path, "workload", f"expected at most {MAX_JOBS:,} jobs per run, this one "
                            f"plans ~{expected:,.0f} ({rate_per_s:,.1f}/s x duration_h); lower duration_h, "
                            "churn_multiplier, offered_load or fleet.nodes")


def check_some_jobs(jobs: list[Job], scenario: Scenario, trace: str | None, meta: dict | None = None) -> None:
    """A run with no job measures nothing: refused rather than reported as complete."""
    if jobs:
        return
    if trace:
        skipped = {k: v for k, v in ((meta or {}).get("skipped") or {}).items() if v}
        why = f" (skipped: {', '.join(f'{k} {v:,}' for k, v in skipped.items())})" if skipped else ""
        raise TraceError(trace, "file", f"expected at least one job to replay, found none{why}")
    raise ScenarioError(scenario.path, "duration_h", "expected a workload of at least one job, this one plans none; "
                        "raise duration_h, churn_multiplier or offered_load")


def check_generated_shapes(scenario: Scenario) -> None:
    """Every shape of the job mix can fit the fleet when it is empty."""
    fleet = scenario.section("fleet")
    for name, c in scenario.section("workload")["classes"].items():
        for i, s in enumerate(c["shapes"]):
            if s["weight"] > 0 and s["members"] > fleet["nodes"] * member_slots(s["gpus"], fleet["gpus_per_node"]):
                raise ScenarioError(scenario.path, f"workload.classes.{name}.shapes[{i}]",
                                    f"a gang of {s['members']} x {s['gpus']} GPUs never fits fleet.nodes "
                                    f"{fleet['nodes']:,} x {fleet['gpus_per_node']} GPUs; expected gangs that fit "
                                    "(drop the shape or raise fleet.nodes / --nodes)")


def check_trace_jobs(jobs: list[Job], source: str, scenario: Scenario) -> None:
    fleet = scenario.section("fleet")
    if len(jobs) > MAX_JOBS:
        raise TraceError(source, "file", f"expected at most {MAX_JOBS:,} jobs per run, got {len(jobs):,}")
    for j in jobs:
        if j.gpus_per_member > fleet["gpus_per_node"]:
            raise TraceError(source, f"job {j.id}: gpus_per_member", f"expected <= fleet.gpus_per_node "
                             f"({fleet['gpus_per_node']}), got {j.gpus_per_member}")
        if j.members > fleet["nodes"] * member_slots(j.gpus_per_member, fleet["gpus_per_node"]):
            raise TraceError(source, f"job {j.id}: members", f"a gang of {j.members} x {j.gpus_per_member} GPUs "
                             f"never fits fleet.nodes {fleet['nodes']:,} x {fleet['gpus_per_node']} GPUs; "
                             "expected gangs that fit (raise --nodes)")


def check_run_length(scenario: Scenario, end_s: float, trace: str | None) -> None:
    every = scenario.data["sample_every_s"]
    if end_s / every > MAX_SAMPLES:
        what = f"expected at most {MAX_SAMPLES:,} samples per scheduler, a {end_s / 3600:,.1f} h run sampled " \
               f"every {every:g} s takes {end_s / every:,.0f}"
        if trace:
            raise TraceError(trace, "submit_s",
                             f"{what}; trim the trace (workload.trace_limit) or raise sample_every_s")
        raise ScenarioError(scenario.path, "sample_every_s", f"{what}; raise sample_every_s or lower duration_h")


def check_chaos(scenario: Scenario, horizon_s: float) -> None:
    for i, e in enumerate(scenario.data["chaos"]):
        if e["kind"] == "evictions":
            until = e["until_s"] if e["until_s"] is not None else horizon_s
            expected = e["rate_per_h"] * max(until - e["at_s"], 0.0) / 3600.0
            if expected > MAX_CHAOS_ACTIONS:
                raise ScenarioError(scenario.path, f"chaos[{i}].rate_per_h", f"expected at most "
                                    f"{MAX_CHAOS_ACTIONS:,} evictions per run, got ~{expected:,.0f}")
        elif e["kind"] == "etcd_pressure" and e["bytes"] / e["object_bytes"] > MAX_ETCD_WRITES:
            raise ScenarioError(scenario.path, f"chaos[{i}].bytes", f"expected at most {MAX_ETCD_WRITES:,} "
                                f"objects (bytes / object_bytes), got {e['bytes'] / e['object_bytes']:,.0f}")
