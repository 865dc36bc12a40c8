"""summary.json, built in one place for every driver (`gangstorm run`, Locust, ceiling, calibrate).

`header` is the run-level part, `scheduler_result` one scheduler's part from its Recorder;
loadgen.measure.statistics.summarize does the statistics and storage.RunStore the writing.
"""
from __future__ import annotations

from typing import Any

from loadgen.input.plan import RunPlan
from loadgen.input.scenario import Scenario
from loadgen.measure import placement
from loadgen.measure.recorder import Recorder
from loadgen.measure.statistics import summarize
from loadgen.model.fleet import Fleet
from loadgen.model.registry import target_class
from loadgen.model.target import ChaosAction


def fleet_dict(fleet: Fleet) -> dict[str, Any]:
    return {"nodes": fleet.nodes, "gpus_per_node": fleet.gpus_per_node, "leaf_size": fleet.leaf_size,
            "leaves": fleet.leaves, "spines": fleet.spines, "total_gpus": fleet.total_gpus,
            "gpu_models": dict(fleet.gpu_models)}


def chaos_digest(actions: list[ChaosAction]) -> list[dict[str, Any]]:
    """Timed chaos steps as planned; evictions (many, random) as one count."""
    evictions = sum(1 for a in actions if a.kind == "evict")
    return ([{"t": a.t, "kind": a.kind} for a in actions if a.kind != "evict"]
            + ([{"kind": "evict", "count": evictions}] if evictions else []))


def chaos_counts(log: list[dict]) -> dict[str, dict[str, int]]:
    """Per chaos kind, how many steps the target applied and how many it does not support."""
    out: dict[str, dict[str, int]] = {}
    for e in log:
        d = out.setdefault(e["kind"], {"applied": 0, "unsupported": 0})
        d["applied" if e.get("applied") else "unsupported"] += 1
    return out


def header(run_id: str, scenario: Scenario, plan: RunPlan, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run_id, "scenario": scenario.name, "scenario_path": scenario.path, "seed": scenario.seed,
        "complete": False, "running": None, "wall_s": 0.0, "duration_h": round(plan.horizon_s / 3600.0, 4),
        "fleet": fleet_dict(plan.fleet), "workload": plan.workload_info,
        "chaos": chaos_digest(plan.chaos), "slo": dict(scenario.data["slo"]),
        "profile": {"name": scenario.profile.name, "path": scenario.profile.path,
                    "description": scenario.profile.description},
        **extra, "schedulers": {},
    }


def slo_met(result: dict[str, Any], slo: dict[str, Any]) -> bool:
    """Admission p99 within the SLO and at most 1% of the jobs never admitted."""
    p99 = result["admission_s"]["p99"]
    return bool(p99 is not None and p99 <= slo["admission_p99_s"]
                and result["jobs"]["never_admitted"] <= 0.01 * max(result["jobs"]["submitted"], 1))


def scheduler_result(rec: Recorder, scenario: Scenario, name: str, backend: str, end_s: float,
                     fleet: Fleet, control_plane: dict[str, Any]) -> dict[str, Any]:
    out = {"backend": backend,
           **summarize(rec, fleet.total_gpus, end_s, rec.window, scenario.section("cost"))}
    out["placement"] = placement.quality(rec, fleet)
    out["topology"] = target_class(name, backend).topology(scenario.scheduler_config(name))
    if "gpu_sharing" in out:
        policy = target_class(name, backend).placement_policy(scenario.scheduler_config(name))
        out["gpu_sharing"]["placement_policy"] = policy
    out["control_plane"] = control_plane
    out["chaos_applied"] = chaos_counts(rec.chaos_log)
    out["end_s"] = round(end_s, 3)
    out["slo_met"] = slo_met(out, scenario.data["slo"])
    if backend == "sim":
        out["model"] = scenario.model_status(name)
    return out
