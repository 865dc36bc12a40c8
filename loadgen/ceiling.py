"""Control-plane ceiling: sweep the churn multiplier, find the highest that keeps the SLO.

Each point keeps the job count roughly constant: the horizon shrinks as churn grows (durations
shrink by the same factor), so every point covers the same number of mean job lifetimes.
"""
from __future__ import annotations

from pathlib import Path

from loadgen.comparative import RunOptions, run
from loadgen.plan import preflight
from loadgen.scenario import Scenario


def point(scenario: Scenario, m: float, base_h: float, base_churn: float) -> Scenario:
    horizon_h = max(base_h * base_churn / m, 0.05)
    return scenario.with_overrides(**{"workload.churn_multiplier": m, "duration_h": horizon_h,
                                      "warmup_h": horizon_h / 4, "drain_h": horizon_h / 2})


def sweep(scenario: Scenario, schedulers: list[str], out_dir: Path, progress=None) -> dict:
    cfg = scenario.data["ceiling"]
    base_churn = scenario.data["workload"]["churn_multiplier"]
    base_h = cfg["duration_h"]
    slo = scenario.data["slo"]
    points: dict[str, list[dict]] = {n: [] for n in schedulers}
    sweep_points = [(m, point(scenario, m, base_h, base_churn)) for m in sorted(cfg["multipliers"])]
    for _, sc in sweep_points:
        preflight(sc)                   # every point's input checked before the first run
    for m, sc in sweep_points:
        if progress:
            progress(f"churn {m:g}x", 0.0)
        s = run(sc, RunOptions(schedulers=schedulers, out_dir=out_dir / f"churn-{m:g}x", jobs_csv=False))
        for n in schedulers:
            r = s["schedulers"][n]
            points[n].append({"churn_multiplier": m, "jobs": r["jobs"]["submitted"],
                              "p99_s": r["admission_s"]["p99"], "p999_s": r["admission_s"]["p999"],
                              "never_admitted": r["jobs"]["never_admitted"], "slo_met": r["slo_met"]})
    ceiling = {}
    for n, pts in points.items():
        ok = [p["churn_multiplier"] for p in pts if p["slo_met"]]
        # the ceiling is the last multiplier before the first miss
        best = None
        for p in pts:
            if not p["slo_met"]:
                break
            best = p["churn_multiplier"]
        ceiling[n] = {"ceiling_churn_multiplier": best, "any_met": bool(ok),
                      "beyond_sweep": best == pts[-1]["churn_multiplier"] if pts else False}
    return {"scenario": scenario.name, "slo": slo, "base_churn": base_churn, "points": points, "ceiling": ceiling}
