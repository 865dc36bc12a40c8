"""A comparative run: one workload and one chaos plan, replayed on each scheduler in turn.

The summary is rewritten after every scheduler (and on interruption), so a killed run still
leaves results/<run-id>/summary.json with "complete": false and what it had measured.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from loadgen import chaos as chaos_mod
from loadgen import report
from loadgen.model.job import Job
from loadgen.metrics import summarize
from loadgen.recorder import Recorder
from loadgen.runner import run_virtual, run_wall
from loadgen.scenario import Scenario
from loadgen.storage import RunStore, new_run_id
from loadgen.model.target import TargetContext, target_class
from loadgen.traces import compress, load_trace
from loadgen.workload import describe, generate


@dataclass
class RunOptions:
    schedulers: list[str]
    backend: str = "sim"                       # "sim" or "real" (applies to every scheduler)
    out_dir: Path | None = None                # default results/<run-id>
    results_root: Path = Path("results")
    time_scale: float = 60.0                   # real backends: virtual seconds per wall second
    trace: str | None = None
    progress: Callable[[str, float], None] | None = None
    jobs_csv: bool = True
    extra: dict = field(default_factory=dict)


def workload_for(scenario: Scenario, trace: str | None = None) -> tuple[list[Job], dict]:
    wl = scenario.section("workload")
    path = trace or wl["trace"]
    if path is None:
        jobs, info = generate(scenario)
        return jobs, info.as_dict()
    fleet = scenario.section("fleet")
    jobs, meta = load_trace(path, gpus_per_node=fleet["gpus_per_node"], cpus_per_node=fleet["cpus_per_node"],
                            tenants=wl["tenants"], seed=scenario.seed, limit=wl["trace_limit"]) \
        if str(path).endswith(".csv") else load_trace(path)
    if wl["trace_limit"] is not None:
        jobs = jobs[: wl["trace_limit"]]
    churn = wl["churn_multiplier"] if str(path).endswith(".csv") else 1.0
    jobs = compress(jobs, churn)
    info = describe(jobs, churn, wl["target_allocation"], 0.0, fleet["nodes"] * fleet["gpus_per_node"],
                    source=str(path)).as_dict()
    info["trace_meta"] = meta
    return jobs, info


def run(scenario: Scenario, opts: RunOptions) -> dict:
    t_start = time.monotonic()
    jobs, wl_info = workload_for(scenario, opts.trace)
    fleet = scenario.fleet()
    horizon = scenario.data["duration_h"] * 3600.0
    if jobs and (opts.trace or scenario.section("workload")["trace"]):
        horizon = max(j.submit_s for j in jobs) or horizon      # a replay lasts as long as its trace
    end_s = horizon + scenario.data["drain_h"] * 3600.0
    plan = chaos_mod.plan(scenario.data["chaos"], fleet.nodes, fleet.gpus_per_node, horizon, scenario.seed)
    run_id = new_run_id(scenario.name)
    out = Path(opts.out_dir) if opts.out_dir else Path(opts.results_root) / run_id
    store = RunStore(out)
    summary = {
        "run_id": run_id, "scenario": scenario.name, "scenario_path": scenario.path, "seed": scenario.seed,
        "complete": False, "wall_s": 0.0, "duration_h": round(horizon / 3600.0, 4),
        "fleet": {"nodes": fleet.nodes, "gpus_per_node": fleet.gpus_per_node, "leaf_size": fleet.leaf_size,
                  "leaves": fleet.leaves, "spines": fleet.spines, "total_gpus": fleet.total_gpus,
                  "gpu_models": dict(fleet.gpu_models)},
        "workload": wl_info,
        "chaos": [{"t": a.t, "kind": a.kind} for a in plan if a.kind != "evict"]
        + ([{"kind": "evict", "count": sum(1 for a in plan if a.kind == "evict")}]
           if any(a.kind == "evict" for a in plan) else []),
        "slo": dict(scenario.data["slo"]),
        "schedulers": {},
    }
    store.write_summary(summary)
    try:
        for name in opts.schedulers:
            summary["schedulers"][name] = run_one(scenario, name, opts, jobs, plan, fleet, end_s, horizon, store)
            summary["wall_s"] = round(time.monotonic() - t_start, 3)
            store.write_summary(summary)
        summary["complete"] = True
    finally:
        summary["wall_s"] = round(time.monotonic() - t_start, 3)
        store.write_summary(summary)
        (out / "summary.md").write_text(report.render(summary))
    summary["_dir"] = str(out)
    return summary


def run_one(scenario: Scenario, name: str, opts: RunOptions, jobs: list[Job], plan, fleet, end_s: float,
            horizon: float, store: RunStore) -> dict:
    backend = opts.backend
    cls = target_class(name, backend)
    scale = opts.time_scale if backend == "real" else 1.0
    run_dir = store.dir / f"{name}-{backend}"
    ctx = TargetContext(fleet=fleet, config=scenario.scheduler_config(name),
                        control_plane=scenario.section("control_plane"), seed=scenario.seed,
                        run_dir=run_dir, time_scale=scale)
    target = cls(ctx)
    rec = Recorder(jobs)
    warm = scenario.data["warmup_h"] * 3600.0
    t0 = time.monotonic()
    progress = (lambda f: opts.progress(name, f)) if opts.progress else None
    try:
        target.start()
        if backend == "sim":
            rec.set_window(min(warm, horizon * 0.5), horizon)
            end = run_virtual(target, jobs, plan, end_s, scenario.data["sample_every_s"], rec, progress)
        else:
            run_dir.mkdir(parents=True, exist_ok=True)
            scaled = [scaled_job(j, scale) for j in jobs]
            rec_scaled = Recorder(scaled)
            rec_scaled.set_window(min(warm, horizon * 0.5) / scale, horizon / scale)
            end = run_wall(target, scaled, chaos_mod.scale(plan, scale), end_s / scale,
                           max(scenario.data["sample_every_s"] / scale, 0.5), rec_scaled, progress)
            rec = rec_scaled
        cp = target.control_plane()
    finally:
        target.stop()
    lo, hi = rec.window
    result = {"backend": backend, **summarize(rec, fleet.total_gpus, end, (lo, hi), scenario.section("cost"), name)}
    result["control_plane"] = cp
    result["chaos_applied"] = _chaos_counts(rec.chaos_log)
    result["wall_s"] = round(time.monotonic() - t0, 3)
    result["end_s"] = round(end, 3)
    if backend == "real":
        result["time_scale"] = scale
        result["latency_clock"] = "wall seconds (real control-plane latency, not scaled)"
    slo = scenario.data["slo"]
    p99 = result["admission_s"]["p99"]
    result["slo_met"] = bool(p99 is not None and p99 <= slo["admission_p99_s"]
                             and result["jobs"]["never_admitted"] <= 0.01 * max(result["jobs"]["submitted"], 1))
    if opts.jobs_csv:
        store.append_jobs(name, backend, rec)
        store.write_timeseries(name, rec)
    return result


def scaled_job(j: Job, scale: float) -> Job:
    """A job on a wall clock running `scale` virtual seconds per second."""
    from dataclasses import replace
    return replace(j, submit_s=j.submit_s / scale, duration_s=max(j.duration_s / scale, 0.5))


def _chaos_counts(log: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for e in log:
        d = out.setdefault(e["kind"], {"applied": 0, "unsupported": 0})
        d["applied" if e.get("applied") else "unsupported"] += 1
    return out
