"""Control-plane ceiling: per scheduler, search the churn multiplier for where the SLO breaks.

From a start multiplier, grow geometrically until a point misses the SLO (or shrink until one
meets it), then bisect the bracket geometrically until its ends are within the precision. Every
point offers the same number of jobs (the horizon shrinks as the churn grows, and job durations
shrink by the same factor inside the workload generator), so each covers the same number of job
lifetimes and the points differ only in how fast the control plane must turn work over.

`search` is pure (the evaluation is injected); `sweep` runs it for each scheduler.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadgen.drive.comparative import RunOptions, run
from loadgen.input.limits import MAX_JOBS
from loadgen.input.plan import preflight
from loadgen.input.scenario import Scenario, ScenarioError
from loadgen.input.workload import arrival_rate
from loadgen.measure import saturation
from loadgen.model.numbers import NA, fixed

MIN_HORIZON_SLOS = 6         # a point's arrivals last at least this many SLOs
MAX_HORIZON_H = 720.0       # the schema's longest duration_h: very low churn on a small fleet offers fewer jobs


@dataclass(frozen=True)
class SearchSpec:
    start: float
    growth: float = 2.0
    precision: float = 0.1          # stop once broke_at / ceiling <= 1 + precision
    lo: float = 0.01                # smallest multiplier tried
    hi: float = 10_000.0            # largest multiplier tried
    max_points: int = 24

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> SearchSpec:
        c = scenario.data["ceiling"]
        start = c["start"] if c["start"] is not None else scenario.data["workload"]["churn_multiplier"]
        return cls(start=float(start), growth=float(c["growth"]), precision=float(c["precision"]),
                   lo=float(c["min_multiplier"]), hi=float(c["max_multiplier"]), max_points=int(c["max_points"]))


def _round(m: float) -> float:
    """Multipliers to 4 significant digits: stable folder names, identical reruns."""
    return float(f"{m:.4g}")


def search(met: Callable[[float], bool], spec: SearchSpec) -> dict:
    """The highest multiplier that met the SLO and the lowest that broke it, bracketed to the spec.

    cap names what stopped the search early: "max_multiplier" (still met at spec.hi),
    "min_multiplier" (broken even at spec.lo) or "max_points"."""
    tried: list[tuple[float, bool]] = []
    ok, bad = None, None

    def ev(m: float) -> bool:
        r = met(m)
        tried.append((m, r))
        return r

    def result(cap: str | None) -> dict:
        return {"ceiling": ok, "broke_at": bad, "cap": cap, "tried": tried}

    m = _round(min(max(spec.start, spec.lo), spec.hi))
    if ev(m):
        ok = m
        while bad is None:
            if ok >= spec.hi:
                return result("max_multiplier")
            if len(tried) >= spec.max_points:
                return result("max_points")
            m = _round(min(ok * spec.growth, spec.hi))
            if ev(m):
                ok = m
            else:
                bad = m
    else:
        bad = m
        while ok is None:
            if bad <= spec.lo:
                return result("min_multiplier")
            if len(tried) >= spec.max_points:
                return result("max_points")
            m = _round(max(bad / spec.growth, spec.lo))
            if ev(m):
                ok = m
            else:
                bad = m
    while bad / ok > 1 + spec.precision:
        if len(tried) >= spec.max_points:
            return result("max_points")
        m = _round(math.sqrt(ok * bad))
        if m in (ok, bad):
            break                       # the rounding cannot split the bracket further
        if ev(m):
            ok = m
        else:
            bad = m
    return result(None)


def point(scenario: Scenario, m: float, jobs: int) -> Scenario:
    """The scenario at churn multiplier m, its horizon sized to offer about `jobs` jobs, but never
    shorter than MIN_HORIZON_SLOS x the SLO (a burst shorter than a scheduler's own cadence says
    nothing about a rate it can sustain), with a drain long enough that a job still pending at the
    end has waited past the SLO."""
    slo_h = scenario.data["slo"]["admission_p99_s"] / 3600.0
    rate = arrival_rate(scenario.with_overrides(**{"workload.churn_multiplier": m}))
    horizon_h = min(max(jobs / rate / 3600.0, MIN_HORIZON_SLOS * slo_h, 0.0001), MAX_HORIZON_H)
    return scenario.with_overrides(**{"workload.churn_multiplier": m, "duration_h": horizon_h,
                                      "warmup_h": horizon_h / 4, "drain_h": max(horizon_h / 2, 2 * slo_h),
                                      "sample_every_s": max(horizon_h * 36.0, 0.01)})   # ~100 samples


def point_jobs(scenario: Scenario, m: float, jobs: int) -> float:
    """The jobs a point at churn multiplier m plans (more than `jobs` once its horizon is held at
    MIN_HORIZON_SLOS x the SLO)."""
    p = point(scenario, m, jobs)
    return arrival_rate(p) * p.data["duration_h"] * 3600.0


def fit_to_limits(scenario: Scenario, spec: SearchSpec, jobs: int) -> tuple[SearchSpec, str | None]:
    """The search with its largest multiplier lowered to the largest whose point fits one run
    (loadgen/input/limits.py: MAX_JOBS), and a line saying so (None when nothing was lowered). At a
    high churn a point's arrivals still last MIN_HORIZON_SLOS SLOs, so it plans more than `jobs`:
    the scenario's own search may reach multipliers no single run can hold. A search whose first
    point does not fit is refused with a line saying what to change."""
    hi = _round(min(max(spec.hi, spec.lo), spec.hi))
    if point_jobs(scenario, hi, jobs) <= MAX_JOBS:
        return spec, None
    start = _round(min(max(spec.start, spec.lo), spec.hi))
    at_start = point_jobs(scenario, start, jobs)
    if at_start > MAX_JOBS:
        slo = scenario.data["slo"]["admission_p99_s"]
        raise ScenarioError(scenario.path, "ceiling.start", f"a point at churn {start:g}x plans ~{at_start:,.0f} jobs, "
                            f"more than one run may hold ({MAX_JOBS:,}): its arrivals last at least {MIN_HORIZON_SLOS} "
                            f"x slo.admission_p99_s ({slo:g} s); lower --start, --slo-p99-s or --nodes")
    lo = start                      # fits; hi does not: bisect geometrically to 4 significant digits
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if point_jobs(scenario, mid, jobs) <= MAX_JOBS else (lo, mid)
    fit = float(f"{lo:.3g}") if point_jobs(scenario, float(f"{lo:.3g}"), jobs) <= MAX_JOBS else _round(lo * 0.999)
    fit = max(min(fit, spec.hi), start)
    note = (f"max_multiplier lowered from {spec.hi:g}x to {fit:g}x: a point above it plans more than {MAX_JOBS:,} jobs "
            f"(one run's limit; its arrivals last at least {MIN_HORIZON_SLOS} SLOs); a search that reaches it ends "
            f"with cap max_multiplier")
    return dataclasses.replace(spec, hi=fit), note


def measure(summary: dict, name: str, m: float) -> dict:
    """One point of one scheduler: the SLO figures, the offered rates and what was busy."""
    r = summary["schedulers"][name]
    wl = summary["workload"]
    jobs_s = wl["arrival_rate_per_s"]
    window = summary["duration_h"] * 3600.0 / r.get("time_scale", 1.0)    # busy_s is wall time on real backends
    sat = saturation.saturated(r, window, wl.get("offered_load"))
    load = saturation.utilization(r, window)
    # A finite run can keep its p99 inside the SLO while a component falls steadily behind (the
    # backlog of N jobs is still short): such a rate is not sustainable and counts as broken.
    sustained = not load or max(load.values()) <= 1.0
    return {"churn_multiplier": m, "jobs": r["jobs"]["submitted"],
            "jobs_per_s": round(jobs_s, 4), "pods_per_s": round(jobs_s * wl["mean_members_per_job"], 4),
            "p99_s": r["admission_s"]["p99"], "p999_s": r["admission_s"]["p999"],
            "count": r["admission_s"]["count"],
            "p99_incl_pending_s": r["admission_s_incl_pending"]["p99"],
            "never_admitted": r["jobs"]["never_admitted"], "slo_met": r["slo_met"], "sustained": sustained,
            "met": bool(r["slo_met"] and sustained), "load": load, "saturated": sat["component"],
            "figures": {k: v for k, v in sat["evidence"].items() if k not in ("load", "window_s")},
            "saturated_description": sat["description"], "run_dir": summary.get("_dir")}


def check(scenario: Scenario) -> tuple[SearchSpec, str | None]:
    """The scenario's search fitted to one run's limits (fit_to_limits) and the line saying so, its
    first and busiest points checked before any run: a bad input is one line before anything is
    written."""
    njobs = int(scenario.data["ceiling"]["jobs"])
    spec, limited = fit_to_limits(scenario, SearchSpec.from_scenario(scenario), njobs)
    for m in (spec.start, spec.hi):
        preflight(point(scenario, _round(min(max(m, spec.lo), spec.hi)), njobs))
    return spec, limited


def sweep(scenario: Scenario, schedulers: list[str], out_dir: Path, backend: str = "sim",
          time_scale: float = 60.0, progress=None, checkpoint: Callable[[dict], None] | None = None,
          existing=None) -> dict:
    """Search each scheduler's ceiling; every point is a run under out_dir/<scheduler>/.

    checkpoint(result) gets the result so far after every point ("complete": false until the last
    scheduler's search ends), so an interrupted search keeps the points it ran."""
    njobs = int(scenario.data["ceiling"]["jobs"])
    spec, limited = check(scenario)
    if limited and progress:
        progress(limited)
    points: dict[str, list[dict]] = {}
    ceiling: dict[str, dict] = {}

    def result(complete: bool) -> dict:
        return {"scenario": scenario.name, "slo": scenario.data["slo"], "backend": backend,
                "nodes": scenario.section("fleet")["nodes"], "jobs_per_point": njobs,
                "search": {**spec.__dict__, **({"limited": limited} if limited else {})},
                "complete": complete, "points": points, "ceiling": ceiling}

    for name in schedulers:
        pts: dict[float, dict] = {}

        def met(m: float, name=name, pts=pts) -> bool:
            if progress:
                progress(f"{name} churn {m:g}x")
            s = run(point(scenario, m, njobs),
                    RunOptions(schedulers=[name], backend=backend, time_scale=time_scale, existing=existing,
                               out_dir=out_dir / name / f"churn-{m:g}x", jobs_csv=False, report=False))
            pts[m] = measure(s, name, m)
            points[name] = [pts[k] for k in sorted(pts)]
            if checkpoint:
                checkpoint(result(False))
            if progress:
                p = pts[m]
                verdict_ = "met" if p["met"] else ("BROKEN (unsustained)" if p["slo_met"] else "BROKEN")
                progress(f"  p99 {fixed(p['p99_s'], 3)} s, never admitted {p['never_admitted']}, {verdict_}; "
                         f"busiest {_busiest(p)}")
            return pts[m]["met"]

        found = search(met, spec)
        ceiling[name] = verdict(found, pts)
    return result(True)


def _busiest(p: dict) -> str:
    if not p["load"]:
        return NA
    k, v = max(p["load"].items(), key=lambda kv: (kv[1], kv[0]))
    return f"{k} load {fixed(v, 2)}"


def verdict(found: dict, pts: dict[float, dict]) -> dict:
    """The ceiling of one scheduler and what saturated at the first broken point."""
    ok, bad = found["ceiling"], found["broke_at"]
    at = pts.get(ok) if ok is not None else None
    broke = pts.get(bad) if bad is not None else None
    out = {"ceiling_churn_multiplier": ok, "broke_at_churn_multiplier": bad, "cap": found["cap"],
           "points_run": len(found["tried"]),
           "jobs_per_s": at["jobs_per_s"] if at else None, "pods_per_s": at["pods_per_s"] if at else None,
           "saturated": None, "saturated_description": None, "evidence": None}
    if broke is not None:
        out["saturated"] = broke["saturated"]
        out["saturated_description"] = broke["saturated_description"]
        out["evidence"] = {"at_churn_multiplier": bad, "load": broke["load"],
                           "p99_s": broke["p99_s"], "p99_incl_pending_s": broke["p99_incl_pending_s"],
                           "never_admitted": broke["never_admitted"], "jobs": broke["jobs"],
                           "slo_met": broke["slo_met"], "sustained": broke["sustained"],
                           "control_plane": broke["figures"]}
    return out


def sweep_seeds(scenario: Scenario, schedulers: list[str], out_dir: Path, seeds: list[int], parallel: int,
                rule: str = "as listed", backend: str = "sim", time_scale: float = 60.0, existing=None,
                on_event=None) -> dict:
    """`sweep` once per seed, each a complete search in out_dir/seeds/<seed>/ (its own ceiling.json),
    side by side as drive.seeds runs them; out_dir/ceiling.json gets each scheduler's ceiling as the
    median over the seeds with its interval and the pairwise tests (output.aggregate.ceiling),
    rewritten as each seed starts and ends."""
    import json
    import time

    from loadgen.drive.seeds import cut_short, each_seed, seed_dir, tally
    from loadgen.output import aggregate
    from loadgen.output.storage import atomic_write
    per_scenario = {s: scenario.with_overrides(seed=s) for s in seeds}
    for s in seeds:
        check(per_scenario[s])
    spec, limited = check(scenario)
    head = {"scenario": scenario.name, "slo": scenario.data["slo"], "backend": backend,
            "nodes": scenario.section("fleet")["nodes"], "jobs_per_point": int(scenario.data["ceiling"]["jobs"]),
            "search": {**spec.__dict__, **({"limited": limited} if limited else {})}, "complete": False,
            "seeds": {"planned": list(seeds), "completed": [], "running": [], "interrupted": [], "failed": {},
                      "rule": rule, "parallel": parallel, "folders": "seeds/<seed>/"},
            "points": {}, "ceiling": {}}
    per_seed: dict[int, dict] = {}
    t0 = time.monotonic()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {"result": head}

    def write() -> None:
        r = aggregate.ceiling(head, per_seed)
        r["wall_s"] = round(time.monotonic() - t0, 3)
        atomic_write(out_dir / "ceiling.json", json.dumps(r, indent=2, allow_nan=False) + "\n")
        state["result"] = r

    def work(seed: int, progress) -> None:
        d = seed_dir(out_dir, seed)
        d.mkdir(parents=True, exist_ok=True)

        def save(result: dict) -> None:
            atomic_write(d / "ceiling.json", json.dumps(result, indent=2, allow_nan=False) + "\n")
        save(sweep(per_scenario[seed], schedulers, d, backend=backend, time_scale=time_scale, progress=progress,
                   checkpoint=save, existing=existing))

    event = tally(head["seeds"], per_seed, lambda seed: seed_dir(out_dir, seed) / "ceiling.json", write, on_event)

    write()
    try:
        each_seed(seeds, work, parallel, event, in_process=backend == "real")
        head["complete"] = True
    finally:
        cut_short(head["seeds"])
        write()
    return state["result"]
