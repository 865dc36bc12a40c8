"""How far a twin is from the real runs of a case, next to how far the real runs are from each other.

Ratios are real/sim of admission p50, p99 and p99.9 (p99.9 only where a real run has at least
P999_MIN_N samples: below that it is the maximum) and the allocation-utilization difference in
percentage points. The goal band is GOAL_RATIO and GOAL_UTIL_PP.
"""
from __future__ import annotations

from statistics import mean

from loadgen.model.numbers import NA, fixed, significant

P999_MIN_N = 1000
GOAL_RATIO = (0.8, 1.25)
GOAL_UTIL_PP = 3.0


def real_stats(results: list[dict]) -> dict:
    """Mean and spread (min, max) over the repeats of one case (each a scheduler result)."""
    out: dict = {"runs": len(results), "n": min(r["admission_s"]["count"] for r in results)}
    for q in ("p50", "p99", "p999"):
        vals = [r["admission_s"][q] for r in results if r["admission_s"][q] is not None]
        out[q] = mean(vals) if vals else None
        out[f"{q}_spread"] = [min(vals), max(vals)] if vals else None
    utils = [r["alloc_util"] for r in results]
    out["alloc_util"] = mean(utils)
    out["alloc_util_spread"] = [min(utils), max(utils)]
    return out


def ratio(real: float | None, sim: float | None) -> float | None:
    if real is None or sim is None:
        return None
    return round(max(real, 1e-3) / max(sim, 1e-3), 3)


def row(label: str, role: str, real: dict, sim: dict) -> dict:
    a = sim["admission_s"]
    out = {"case": label, "role": role, "runs": real["runs"], "n": real["n"],
           "p50_ratio": ratio(real["p50"], a["p50"]), "p99_ratio": ratio(real["p99"], a["p99"]),
           "p999_ratio": ratio(real["p999"], a["p999"]) if real["n"] >= P999_MIN_N else None,
           "util_diff_pp": round((real["alloc_util"] - sim["alloc_util"]) * 100, 2),
           "real": {k: real[k] for k in ("p50", "p99", "p999", "alloc_util")},
           "real_spread": {k: real[f"{k}_spread"] for k in ("p50", "p99", "p999", "alloc_util")},
           "sim": {"p50": a["p50"], "p99": a["p99"], "p999": a["p999"], "alloc_util": sim["alloc_util"]}}
    out["within_goal"] = within_goal(out)
    return out


def within_goal(r: dict) -> bool:
    lo, hi = GOAL_RATIO
    ratios = [r[k] for k in ("p50_ratio", "p99_ratio", "p999_ratio") if r.get(k) is not None]
    return all(lo <= x <= hi for x in ratios) and abs(r["util_diff_pp"]) <= GOAL_UTIL_PP


def held_out_summary(rows: list[dict]) -> dict:
    """The flat figures a profile's validation keeps (and every simulated result quotes)."""
    held = [r for r in rows if r["role"] == "held_out"]

    def span(key):
        vals = [r[key] for r in held if r.get(key) is not None]
        return [min(vals), max(vals)] if vals else None

    return {"cases": ", ".join(r["case"] for r in held),
            "real_runs_per_case": min((r["runs"] for r in held), default=0),
            "p50_ratio": span("p50_ratio"), "p99_ratio": span("p99_ratio"), "p999_ratio": span("p999_ratio"),
            "util_diff_pp": span("util_diff_pp"), "within_goal": all(r["within_goal"] for r in held)}


def table(scheduler: str, rows: list[dict]) -> str:
    """Markdown: one line per case, real mean with its spread, the twin, the ratios."""
    def f(x, util=False):    # seconds and ratios: 3 significant digits (tails span ms to minutes)
        return fixed(x, 3) if util else significant(x, 3)

    def spread(s, util=False):
        return NA if not s else f"{f(s[0], util)}-{f(s[1], util)}"

    lines = [f"| {scheduler} case | role | runs x n | real p50 s (spread) | sim p50 | ratio | real p99 s (spread) "
             "| sim p99 | ratio | p99.9 ratio | real util (spread) | sim util | diff pp | in goal |",
             "|---|---|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        rl, sp, sm = r["real"], r["real_spread"], r["sim"]
        lines.append(f"| {r['case']} | {r['role']} | {r['runs']} x {r['n']} | {f(rl['p50'])} ({spread(sp['p50'])}) "
                     f"| {f(sm['p50'])} | {f(r['p50_ratio'])} | {f(rl['p99'])} ({spread(sp['p99'])}) | {f(sm['p99'])} "
                     f"| {f(r['p99_ratio'])} | {f(r['p999_ratio'])} | {f(rl['alloc_util'], util=True)} "
                     f"({spread(sp['alloc_util'], util=True)}) | {f(sm['alloc_util'], util=True)} "
                     f"| {f(r['util_diff_pp'])} "
                     f"| {'yes' if r['within_goal'] else 'no'} |")
    return "\n".join(lines)
