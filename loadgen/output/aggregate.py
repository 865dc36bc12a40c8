"""summary.json of a run over several seeds, built from the seeds' own summary.json files.

Each seed is a complete run (results/<run>/seeds/<seed>/summary.json, the single-seed layout). The
run's own summary.json keeps that layout with every number the median over the completed seeds of
that number (so what reads one run, `compare`, the pytest plugin's assertions, the index, reads the
medians), and adds:

- `schedulers.<name>.spread` and `schedulers.<name>.by_class.<class>.spread`: per figure the median,
  the order-statistic interval around it and its exact coverage (loadgen.measure.spread), the
  per-seed values and, for quantiles, the per-seed sample counts;
- `spread`: the method, the confidence asked for, the seeds aggregated;
- `significance`: for each pair of schedulers and each headline figure, the exact signed-rank test
  of the per-seed differences over the seeds both completed, and which one is better when the
  difference exceeds the seed-to-seed spread. With fewer paired seeds than the test needs to reach
  alpha at all, `significant` is null: untestable, which is not the same as "no difference".

`ceiling` does the same for `gangstorm ceiling`'s per-seed ceiling.json files.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.measure import spread
from loadgen.output.compare import CLASS_METRICS, SCHEDULER_METRICS, Metric

ALL = "all"
METHOD = ("order-statistic interval for the median: [x(k), x(n+1-k)] of the n sorted per-seed values, k the "
          "largest rank whose exact binomial coverage is at least the confidence; below 6 seeds the interval "
          "is the range and its coverage 1 - 2/2^n is stated")
TEST = "wilcoxon signed-rank, exact, two-sided, on the seeds both schedulers completed"
MEANING = ("significant: the per-seed differences are centred away from zero beyond what the seed-to-seed spread "
           "explains (p < alpha); not significant: these seeds cannot tell the two apart, which is not evidence "
           "that they are equal; null: too few common seeds for the test to reach alpha at all")


def _d(v) -> dict:
    return v if isinstance(v, dict) else {}


@dataclass(frozen=True)
class Figure:
    """One number per scheduler (cls "all") or per scheduler and job class, read off a seed's result."""
    name: str
    label: str
    get: Callable[[dict, str], Any]               # (scheduler result, class or "all") -> value
    lower_is_better: bool = True
    count: Callable[[dict, str], Any] | None = None   # the sample count behind a quantile
    unit: str = ""
    headline: bool = True                          # shown in summary.md / report.html and tested pairwise


def _admission(q: str) -> Callable[[dict, str], Any]:
    def get(r: dict, cls: str):
        return _d(r.get("admission_s") if cls == ALL else _d(_d(r.get("by_class")).get(cls)).get("admission_s")).get(q)
    return get


def _budget(key: str, q: str) -> Callable[[dict, str], Any]:
    return lambda r, cls: _d(_d(_d(r.get("budgets")).get(key)).get(cls)).get(q)


def _of_metric(m: Metric, per_class: bool) -> Callable[[dict, str], Any]:
    if per_class:
        return lambda r, cls: m.get(_d(_d(r.get("by_class")).get(cls)))
    return lambda r, cls: m.get(r)


QUANTILES = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))
BUDGETS = (("placement_to_ready", "placement-to-ready"), ("rendezvous", "rendezvous"),
           ("time_to_training", "time to training"))
ADMISSION = tuple(Figure(f"admission_{q}", f"admission {label} s", _admission(q), count=_admission("count"), unit="s")
                  for q, label in QUANTILES)
BUDGET_FIGURES = tuple(Figure(f"{key}_{q}", f"{name} {label} s", _budget(key, q), count=_budget(key, "count"), unit="s")
                       for key, name in BUDGETS for q, label in QUANTILES)
RESOURCE = (
    Figure("alloc_util", "alloc util", lambda r, c: r.get("alloc_util"), lower_is_better=False),
    Figure("fragmentation", "fragmentation", lambda r, c: r.get("fragmentation")),
    Figure("scheduling_tax", "sched. tax", lambda r, c: _d(r.get("scheduling_tax")).get("tax")),
    Figure("partial_gang_gpu_hours", "partial-gang GPU-h", lambda r, c: r.get("partial_gang_gpu_hours"), unit="GPU-h"),
    Figure("cost_per_million_gpu_hours", "$ per 1M GPU-h",
           lambda r, c: r.get("cost_per_million_gpu_hours"), unit="USD"),
)
_NAMED = {f.name for f in ADMISSION + BUDGET_FIGURES + RESOURCE}
# compare's other metrics, so `compare` finds a spread for every metric it reads (not tested pairwise here)
EXTRA = tuple(Figure(m.name, m.name.replace("_", " "), _of_metric(m, False), m.lower_is_better, unit=m.unit,
                     headline=False) for m in SCHEDULER_METRICS if m.name not in _NAMED)
CLASS_EXTRA = tuple(Figure(m.name, m.name.replace("_", " "), _of_metric(m, True), m.lower_is_better, unit=m.unit,
                           headline=False) for m in CLASS_METRICS if m.name not in _NAMED)
FIGURES = ADMISSION + BUDGET_FIGURES + RESOURCE + EXTRA           # per scheduler
CLASS_FIGURES = ADMISSION + BUDGET_FIGURES + CLASS_EXTRA            # per scheduler and class
BY_NAME = {f.name: f for f in FIGURES + CLASS_FIGURES}


# --- the median of every number ---------------------------------------------------------------
def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def median_tree(items: list) -> Any:
    """The per-seed documents folded into one: a number becomes the median of the seeds that have it
    (an int stays an int when the median is whole), a mapping is folded key by key, anything else
    is kept when every seed agrees and is null otherwise."""
    if not items:
        return None
    if all(isinstance(x, dict) for x in items):
        keys = list(dict.fromkeys(k for x in items for k in x))
        return {k: median_tree([x[k] for x in items if k in x]) for k in keys}
    nums = [x for x in items if _number(x) and math.isfinite(x)]
    if nums and all(x is None or _number(x) for x in items):
        m = float(np.median(nums))
        if all(isinstance(x, int) for x in nums) and m.is_integer():
            return int(m)
        return round(m, 6)
    first = items[0]
    return first if all(x == first for x in items) else None


# --- intervals ----------------------------------------------------------------------------------
def _finite(v) -> float | None:
    return float(v) if _number(v) and math.isfinite(v) else None


def interval(values: dict[int, Any], counts: dict[int, Any] | None = None) -> dict:
    """A figure's per-seed values -> its median, interval and exact coverage, with the values kept
    (JSON keys are text: seeds as strings). Seeds without the number are listed as null."""
    iv = spread.median_interval(_finite(v) for v in values.values())
    out = iv.as_dict() if iv else {"median": None, "low": None, "high": None, "confidence": None, "n": 0}
    if out["median"] is not None:
        out["median"] = round(out["median"], 6)       # as median_tree rounds it: one median, two places
    out["values"] = {str(s): _finite(v) for s, v in values.items()}
    if counts is not None:
        out["counts"] = {str(s): c for s, c in counts.items()}
    return out


def figure_spread(per_seed: dict[int, dict], figures, cls: str) -> dict[str, dict]:
    """Each figure's interval over the seeds' results of one scheduler (and class)."""
    out = {}
    for f in figures:
        values = {s: f.get(r, cls) for s, r in per_seed.items()}
        if all(_finite(v) is None for v in values.values()):
            continue
        counts = {s: f.count(r, cls) for s, r in per_seed.items()} if f.count else None
        out[f.name] = interval(values, counts)
    return out


def seed_values(entry: dict) -> dict[int, float | None]:
    """An interval entry's per-seed values back as {seed: value}."""
    return {int(s): v for s, v in _d(entry.get("values")).items()}


# --- significance ------------------------------------------------------------------------------
def pair(a_name: str, b_name: str, cls: str, f: Figure, a: dict, b: dict, min_seeds: int) -> dict:
    """The signed-rank test of b - a over the seeds both have; `better` names the winner when it is
    significant, `significant` is None when too few seeds are common to reach alpha."""
    d = spread.paired_difference(seed_values(a), seed_values(b))
    testable = d.seeds >= min_seeds
    better = None
    if testable and d.significant and d.median_diff:
        b_lower = d.median_diff < 0
        better = b_name if b_lower == f.lower_is_better else a_name
    return {"a": a_name, "b": b_name, "class": cls, "figure": f.name, "seeds": d.seeds,
            "median_diff": None if d.median_diff is None else round(d.median_diff, 6),
            "p_value": round(d.p_value, 6), "significant": d.significant if testable else None, "better": better}


def significance(schedulers: dict[str, dict], classes: list[str], n_seeds: int) -> dict:
    """Every pair of schedulers on every headline figure, all jobs and per class."""
    min_seeds = spread.min_seeds_for(spread.ALPHA)
    pairs = []
    for a, b in itertools.combinations(list(schedulers), 2):
        for cls in [ALL, *classes]:
            sa = _d(schedulers[a].get("spread") if cls == ALL
                    else _d(_d(schedulers[a].get("by_class")).get(cls)).get("spread"))
            sb = _d(schedulers[b].get("spread") if cls == ALL
                    else _d(_d(schedulers[b].get("by_class")).get(cls)).get("spread"))
            for f in (FIGURES if cls == ALL else CLASS_FIGURES):
                if f.headline and f.name in sa and f.name in sb:
                    pairs.append(pair(a, b, cls, f, sa[f.name], sb[f.name], min_seeds))
    return {"test": TEST, "alpha": spread.ALPHA, "min_seeds": min_seeds, "seeds": n_seeds,
            "testable": n_seeds >= min_seeds, "meaning": MEANING, "pairs": pairs}


# --- a run ------------------------------------------------------------------------------------
def over_seeds(head: dict, per_seed: dict[int, dict]) -> dict:
    """The run's summary.json from the completed seeds' summaries (seed -> parsed summary.json):
    `head` (the run-level fields: run id, scenario, seeds, ...) with schedulers, workload, spread
    and significance filled in. Pure: the same seeds' summaries give the same document."""
    from loadgen.output.summary import slo_met
    seeds = sorted(per_seed)
    out = dict(head)
    docs = [per_seed[s] for s in seeds]
    if docs:
        out["workload"] = median_tree([_d(d.get("workload")) for d in docs])
        out["duration_h"] = median_tree([d.get("duration_h") for d in docs])
    names = [n for n in _d(docs[0].get("schedulers"))
             if all(n in _d(d.get("schedulers")) for d in docs)] if docs else []
    schedulers = {}
    for name in names:
        results = {s: per_seed[s]["schedulers"][name] for s in seeds}
        r = median_tree(list(results.values()))
        r.pop("wall_s", None)
        r["seeds"] = len(seeds)
        r["spread"] = figure_spread(results, FIGURES, ALL)
        for cls in _d(r.get("by_class")):
            r["by_class"][cls]["spread"] = figure_spread(results, CLASS_FIGURES, cls)
        met = [bool(x.get("slo_met")) for x in results.values()]
        r["slo_met"] = slo_met(r, out.get("slo") or {"admission_p99_s": math.inf})
        r["slo_met_seeds"] = {"met": sum(met), "of": len(met)}
        schedulers[name] = r
    out["schedulers"] = schedulers
    out["spread"] = {"method": METHOD, "confidence": spread.CONFIDENCE, "seeds": seeds}
    classes = sorted({c for r in schedulers.values() for c in _d(r.get("by_class"))})
    out["significance"] = significance(schedulers, classes, len(seeds))
    return out


# --- a ceiling --------------------------------------------------------------------------------
CEILING = Figure("ceiling_churn_multiplier", "ceiling (churn x)", lambda r, c: r.get("ceiling_churn_multiplier"),
                 lower_is_better=False)
CEILING_FIGURES = (CEILING,
                   Figure("broke_at_churn_multiplier", "broke at (churn x)",
                          lambda r, c: r.get("broke_at_churn_multiplier"), lower_is_better=False, headline=False),
                   Figure("jobs_per_s", "jobs/s at the ceiling", lambda r, c: r.get("jobs_per_s"),
                          lower_is_better=False, headline=False),
                   Figure("pods_per_s", "pods/s at the ceiling", lambda r, c: r.get("pods_per_s"),
                          lower_is_better=False, headline=False))


BY_NAME.update({f.name: f for f in CEILING_FIGURES})


def ceiling(head: dict, per_seed: dict[int, dict]) -> dict:
    """The ceiling.json of a search over several seeds from each seed's ceiling.json: per scheduler
    the median of each number, the interval of the ceiling and the rates at it, what saturated at
    the break on how many seeds, and each pair's signed-rank test on the ceiling."""
    seeds = sorted(per_seed)
    docs = [_d(per_seed[s].get("ceiling")) for s in seeds]
    names = [n for n in (docs[0] if docs else {}) if all(n in d for d in docs)]
    out = dict(head)
    result = {}
    for name in names:
        runs = {s: _d(per_seed[s]["ceiling"][name]) for s in seeds}
        r = median_tree([{k: v for k, v in x.items() if k != "evidence"} for x in runs.values()])
        saturated: dict[str, int] = {}
        for x in runs.values():
            key = x.get("saturated") or ("none near full" if x.get("broke_at_churn_multiplier") is not None
                                         else "did not break")
            saturated[key] = saturated.get(key, 0) + 1
        r["saturated_seeds"] = dict(sorted(saturated.items(), key=lambda kv: (-kv[1], kv[0])))
        caps: dict[str, int] = {}
        for x in runs.values():
            if x.get("cap"):
                caps[x["cap"]] = caps.get(x["cap"], 0) + 1
        r["cap_seeds"] = caps
        r["seeds"] = len(seeds)
        r["spread"] = figure_spread(runs, CEILING_FIGURES, ALL)
        result[name] = r
    out["ceiling"] = result
    out["spread"] = {"method": METHOD, "confidence": spread.CONFIDENCE, "seeds": seeds}
    min_seeds = spread.min_seeds_for(spread.ALPHA)
    pairs = [pair(a, b, ALL, CEILING, result[a]["spread"][CEILING.name], result[b]["spread"][CEILING.name], min_seeds)
             for a, b in itertools.combinations(names, 2)
             if CEILING.name in result[a]["spread"] and CEILING.name in result[b]["spread"]]
    out["significance"] = {"test": TEST, "alpha": spread.ALPHA, "min_seeds": min_seeds, "seeds": len(seeds),
                           "testable": len(seeds) >= min_seeds, "meaning": MEANING, "pairs": pairs}
    return out
