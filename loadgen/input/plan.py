"""What one run replays on every scheduler: the jobs, the chaos plan and the time window.

Built once per run from the scenario (and an optional trace), so `gangstorm run`, the Locust
driver, `ceiling` and `calibrate` offer identical work and measure over the same window.
"""
from __future__ import annotations

from dataclasses import dataclass

from loadgen.input import chaos as chaos_mod
from loadgen.input import limits
from loadgen.input.pools import trace_path
from loadgen.input.scenario import Scenario
from loadgen.input.traces import compress, is_csv, load_trace
from loadgen.input.workload import describe, generate
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction


@dataclass
class RunPlan:
    jobs: list[Job]                 # virtual seconds, sorted by submit time
    workload_info: dict
    fleet: Fleet
    chaos: list[ChaosAction]
    horizon_s: float                # arrivals stop here
    end_s: float                    # horizon + drain
    warmup_s: float                 # excluded from utilization and fragmentation

    @property
    def window(self) -> tuple[float, float]:
        """The measurement window: after warm-up (at most half the horizon) until the horizon."""
        return min(self.warmup_s, self.horizon_s * 0.5), self.horizon_s


def workload_for(scenario: Scenario, trace: str | None = None) -> tuple[list[Job], dict]:
    """The scenario's generated jobs, or a JSONL / openb CSV trace's (CSV times compressed by churn)."""
    wl = scenario.section("workload")
    path = trace or wl["trace"]
    if path is None:
        jobs, info = generate(scenario)
        return jobs, info.as_dict()
    path = trace_path(path)
    fleet = scenario.section("fleet")
    csv = is_csv(path)
    shares = any(p.sharing.mode == "fraction" for p in scenario.pools)
    jobs, meta = load_trace(path, gpus_per_node=fleet["gpus_per_node"], cpus_per_node=fleet["cpus_per_node"],
                            tenants=wl["tenants"], seed=scenario.seed, limit=wl["trace_limit"], shares=shares) \
        if csv else load_trace(path)
    if wl["trace_limit"] is not None:
        jobs = jobs[: wl["trace_limit"]]
    limits.check_trace_jobs(jobs, str(path), scenario)
    churn = wl["churn_multiplier"] if csv else 1.0
    jobs = compress(jobs, churn)
    info = describe(jobs, churn, wl["target_allocation"], 0.0, scenario.total_gpus, source=str(path)).as_dict()
    info["trace_meta"] = meta
    return jobs, info


def preflight(scenario: Scenario) -> None:
    """What plan_run would refuse in a generated workload, without generating it (for sweeps)."""
    from loadgen.input.workload import preflight as workload_preflight
    horizon = scenario.data["duration_h"] * 3600.0
    workload_preflight(scenario)
    limits.check_chaos(scenario, horizon)
    limits.check_run_length(scenario, horizon + scenario.data["drain_h"] * 3600.0, None)


def plan_run(scenario: Scenario, trace: str | None = None) -> RunPlan:
    jobs, info = workload_for(scenario, trace)
    limits.check_some_jobs(jobs, scenario, trace or scenario.section("workload")["trace"], info.get("trace_meta"))
    jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    fleet = scenario.fleet()
    horizon = scenario.data["duration_h"] * 3600.0
    if jobs and (trace or scenario.section("workload")["trace"]):
        horizon = max(j.submit_s for j in jobs) or horizon      # a replay lasts as long as its trace
    limits.check_chaos(scenario, horizon)
    limits.check_run_length(scenario, horizon + scenario.data["drain_h"] * 3600.0,
                            trace or scenario.section("workload")["trace"])
    chaos = chaos_mod.plan(scenario.data["chaos"], fleet.nodes, fleet.gpus_per_node, horizon, scenario.seed)
    return RunPlan(jobs=jobs, workload_info=info, fleet=fleet, chaos=chaos, horizon_s=horizon,
                   end_s=horizon + scenario.data["drain_h"] * 3600.0,
                   warmup_s=scenario.data["warmup_h"] * 3600.0)
