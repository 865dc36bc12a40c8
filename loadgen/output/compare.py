"""Run A against run B, metric by metric, per scheduler and job class: what got worse beyond tolerance.

Pure: it takes two parsed summary.json documents and returns rows. A metric has a direction (lower
or higher is better) and a noise floor in its own unit. A change within the floor is no change
(`same`), so a p50 moving from 1 ms to 2 ms is not reported; beyond it a change is `better` or
`worse`, and `worse` becomes a `regression` when it also exceeds the relative tolerance of A's
value, so a p99 moving from 2 s to 3 s at 10% is. A scheduler, job class or number present in A
and absent from B is a regression too (`missing`): a baseline must not pass by measuring less.

Runs over several seeds (`--seeds`, output/aggregate.py) are compared on their medians, and where
both runs carry a metric's per-seed values, the seed-to-seed spread is the noise floor too: a worse
value beyond the tolerance is a regression only if the difference is also significant, by the exact
signed-rank test on the seeds both runs have (when there are at least 6 of them), else by the exact
rank-sum test on all seeds of each (alpha 0.05). When even that test cannot reach alpha (too few
seeds), the tolerance alone decides, as for single-seed runs, and the row says so.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadgen.measure import spread
from loadgen.model.numbers import significant


@dataclass(frozen=True)
class Metric:
    name: str
    lower_is_better: bool
    floor: float                           # changes at most this large (in the metric's unit) are noise
    get: Callable[[dict], Any]
    unit: str = ""


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _q(key: str, q: str) -> Callable[[dict], Any]:
    return lambda r: _dict(r.get(key)).get(q)


def _share(field: str) -> Callable[[dict], Any]:
    def get(r: dict):
        jobs = _dict(r.get("jobs"))
        n = jobs.get("submitted") if "submitted" in jobs else r.get("jobs_total")
        if not isinstance(n, (int, float)) or not n or not isinstance(jobs.get(field), (int, float)):
            return None
        return jobs[field] / n
    return get


def _class_share(r: dict):
    n, never = r.get("jobs"), r.get("never_admitted") or 0
    return never / n if isinstance(n, (int, float)) and n and isinstance(never, (int, float)) else None


SCHEDULER_METRICS = (
    Metric("admission_p50", True, 0.05, _q("admission_s", "p50"), "s"),
    Metric("admission_p99", True, 0.05, _q("admission_s", "p99"), "s"),
    Metric("admission_p999", True, 0.05, _q("admission_s", "p999"), "s"),
    Metric("admission_p99_incl_pending", True, 0.05, _q("admission_s_incl_pending", "p99"), "s"),
    Metric("never_admitted_share", True, 0.001, _share("never_admitted")),
    Metric("failed_share", True, 0.001, _share("failed")),
    Metric("finished_share", False, 0.001, _share("finished")),
    Metric("readmission_p99", True, 0.05, _q("readmission_s", "p99"), "s"),
    Metric("alloc_util", False, 0.005, lambda r: r.get("alloc_util")),
    Metric("fragmentation", True, 0.005, lambda r: r.get("fragmentation")),
    Metric("scheduling_tax", True, 0.002, lambda r: _dict(r.get("scheduling_tax")).get("tax")),
    Metric("partial_gang_gpu_hours", True, 1.0, lambda r: r.get("partial_gang_gpu_hours"), "GPU-h"),
    Metric("cost_per_million_gpu_hours", True, 1000.0, lambda r: r.get("cost_per_million_gpu_hours"), "USD"),
)
CLASS_METRICS = (
    Metric("admission_p50", True, 0.05, _q("admission_s", "p50"), "s"),
    Metric("admission_p99", True, 0.05, _q("admission_s", "p99"), "s"),
    Metric("admission_p999", True, 0.05, _q("admission_s", "p999"), "s"),
    Metric("never_admitted_share", True, 0.001, _class_share),
)
# One row per control-plane component (control_plane.busy_s, as the ceiling reads it): seconds the
# component was busy for the same jobs; the metric is named control_plane_busy_s.<component>.
BUSY = Metric("control_plane_busy_s", True, 1.0, lambda r: _dict(_dict(r.get("control_plane")).get("busy_s")), "s")
METRIC_NAMES = tuple(dict.fromkeys(m.name for m in SCHEDULER_METRICS + CLASS_METRICS + (BUSY,)))
# what must match for two runs to measure the same thing; a difference is reported, not refused
SAME_RUN = (("scenario", ("scenario",)), ("seed", ("seed",)), ("nodes", ("fleet", "nodes")),
            ("duration_h", ("duration_h",)), ("jobs", ("workload", "jobs")), ("profile", ("profile", "name")))
VERDICTS = ("same", "better", "worse", "regression", "new", "missing")


@dataclass(frozen=True)
class Row:
    scheduler: str
    cls: str                 # a job class, or "all"
    metric: str
    a: float | None
    b: float | None
    verdict: str             # one of VERDICTS
    count_a: int | None = None
    count_b: int | None = None
    test: str | None = None            # the rank test on the per-seed values, when both runs have them
    p_value: float | None = None
    significant: bool | None = None    # None: no test, or too few seeds for it to reach alpha
    seeds_a: int | None = None
    seeds_b: int | None = None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def delta_pct(self) -> float | None:
        d = self.delta
        return None if d is None or self.a == 0 else 100.0 * d / abs(self.a)


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    notes: list[str]

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict in ("regression", "missing")]


def verdict(m: Metric, a: float | None, b: float | None, tolerance: float) -> str:
    if a is None and b is None:
        return "same"
    if a is None:
        return "new"
    if b is None:
        return "missing"
    worse_by = (b - a) if m.lower_is_better else (a - b)
    # the 1e-9 keeps a change of exactly the floor or the tolerance on the passing side despite rounding
    if abs(worse_by) <= m.floor * (1 + 1e-9):
        return "same"
    if worse_by < 0:
        return "better"
    return "regression" if worse_by > max(tolerance * abs(a), m.floor) * (1 + 1e-9) else "worse"


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _count(r: dict) -> int | None:
    c = _dict(r.get("admission_s")).get("count")
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def _seed_values(entry) -> dict[int, float]:
    out = {}
    for s, v in _dict(_dict(entry).get("values")).items():
        if str(s).isdigit() and _num(v) is not None:
            out[int(s)] = float(v)
    return out


def seed_test(a: dict[int, float], b: dict[int, float], alpha: float = spread.ALPHA) -> tuple[str, float, bool | None]:
    """(test, p-value, significant) of B against A's per-seed values: signed-rank on the common seeds
    when they are enough to reach alpha, else rank-sum on all; significant is None when neither can."""
    common = a.keys() & b.keys()
    need = spread.min_seeds_for(alpha)
    if len(common) >= need:
        d = spread.paired_difference(a, b, alpha)
        return f"signed-rank, {d.seeds} common seeds", d.p_value, d.significant
    d = spread.unpaired_difference(list(a.values()), list(b.values()), alpha)
    m, n = len(a), len(b)
    reachable = m > 0 and n > 0 and 2 / math.comb(m + n, m) < alpha
    return f"rank-sum, {m} and {n} seeds", d.p_value, (d.significant if reachable else None)


def _row(scheduler: str, cls: str, m: Metric, name: str, a, b, tolerance: float, ra: dict, rb: dict) -> Row | None:
    a, b = _num(a), _num(b)
    if a is None and b is None:              # neither run has this number (e.g. kube-only figures on ray)
        return None
    v = verdict(m, a, b, tolerance)
    sa, sb = _seed_values(_dict(ra.get("spread")).get(name)), _seed_values(_dict(rb.get("spread")).get(name))
    if a is None or b is None or len(sa) < 2 or len(sb) < 2:
        return Row(scheduler, cls, name, a, b, v, _count(ra), _count(rb))
    test, p, significant = seed_test(sa, sb)
    if v == "regression" and significant is False:
        v = "worse"                          # beyond the tolerance, but within the seed-to-seed spread
    return Row(scheduler, cls, name, a, b, v, _count(ra), _count(rb), test, round(p, 6), significant, len(sa), len(sb))


def _rows(scheduler: str, cls: str, ra: dict, rb: dict, metrics, tolerance: Callable[[str], float]) -> list[Row]:
    rows = [_row(scheduler, cls, m, m.name, m.get(ra), m.get(rb), tolerance(m.name), ra, rb) for m in metrics]
    return [r for r in rows if r]


def _busy_rows(scheduler: str, ra: dict, rb: dict, tolerance: Callable[[str], float]) -> list[Row]:
    ba, bb = BUSY.get(ra), BUSY.get(rb)
    rows = [_row(scheduler, "all", BUSY, f"{BUSY.name}.{c}", ba.get(c), bb.get(c), tolerance(BUSY.name), ra, rb)
            for c in list(ba) + [c for c in bb if c not in ba]]
    return [r for r in rows if r]


def _dig(d: dict, path: tuple[str, ...]):
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def compare(a: dict, b: dict, tolerance: float = 0.10, per_metric: dict[str, float] | None = None) -> Comparison:
    """Every metric of every scheduler (and class) of run A against run B. per_metric maps a name
    of METRIC_NAMES to its own tolerance."""
    per_metric = per_metric or {}
    tol = lambda name: per_metric.get(name, tolerance)          # noqa: E731
    notes = []
    for label, path in SAME_RUN:
        va, vb = _dig(a, path), _dig(b, path)
        if va != vb:
            notes.append(f"the runs differ in {label}: {va} (A) vs {vb} (B)")
    for side, s in (("A", a), ("B", b)):
        if s.get("complete") is False:
            notes.append(f"run {side} is partial (\"complete\": false): compared as far as it got")
    notes += _seed_notes(a, b)
    rows: list[Row] = []
    sa, sb = _dict(a.get("schedulers")), _dict(b.get("schedulers"))
    for name in list(sa) + [n for n in sb if n not in sa]:
        if name not in sb:
            rows.append(Row(name, "all", "scheduler", None, None, "missing"))
            continue
        if name not in sa:
            rows.append(Row(name, "all", "scheduler", None, None, "new"))
            continue
        ra, rb = _dict(sa[name]), _dict(sb[name])
        if ra.get("backend") != rb.get("backend"):
            notes.append(f"{name}: backend {ra.get('backend')} (A) vs {rb.get('backend')} (B)")
        rows += _rows(name, "all", ra, rb, SCHEDULER_METRICS, tol) + _busy_rows(name, ra, rb, tol)
        ca, cb = _dict(ra.get("by_class")), _dict(rb.get("by_class"))
        for cls in list(ca) + [c for c in cb if c not in ca]:
            rows += _rows(name, cls, _dict(ca.get(cls)), _dict(cb.get(cls)), CLASS_METRICS, tol)
        if _count(ra) != _count(rb):
            notes.append(f"{name}: admission sample counts differ: {_count(ra)} (A) vs {_count(rb)} (B)")
    return Comparison(rows, notes)


def _seeds_of(s: dict) -> list | None:
    seeds = s.get("seeds")
    return list(seeds.get("completed") or []) if isinstance(seeds, dict) else None


def _seed_notes(a: dict, b: dict) -> list[str]:
    sa, sb = _seeds_of(a), _seeds_of(b)
    if sa is None and sb is None:
        return []
    if sa is None or sb is None:
        multi, n = ("A", len(sa)) if sa is not None else ("B", len(sb))
        return [f"run {multi} is over {n} seeds, the other is one run: its medians against that run's values, "
                f"the tolerance alone decides (no spread on both sides)"]
    common = len(set(sa) & set(sb))
    need = spread.min_seeds_for(spread.ALPHA)
    how = (f"the signed-rank test on the {common} seeds both runs have" if common >= need else
           f"the rank-sum test on the {len(sa)} and {len(sb)} seeds (fewer than {need} in common)")
    return [f"both runs are over seeds (A {len(sa)}, B {len(sb)}, {common} in common): medians compared, and a worse "
            f"value beyond the tolerance is a regression only when {how} finds the difference significant "
            f"(exact, two-sided, alpha {spread.ALPHA:g}); where the seeds are too few for the test to reach alpha, "
            f"the tolerance alone decides"]


def render(c: Comparison, show_all: bool = False) -> str:
    """The comparison as text: notes, then one line per changed metric (every metric with show_all),
    grouped by scheduler and class as compare() ordered them, then the count of regressions."""
    lines = [f"note: {n}" for n in c.notes]
    shown = [r for r in c.rows if show_all or r.verdict != "same"]
    if shown:
        w = max([28] + [len(r.metric) for r in shown])
        tested = any(r.test for r in shown)
        lines.append(f"{'scheduler':<10} {'class':<8} {'metric':<{w}} {'A':>12} {'B':>12} {'change':>9}  "
                     + ("verdict     seed spread" if tested else "verdict"))
        for r in shown:
            pct = "" if r.delta_pct is None else f"{r.delta_pct:+.1f}%"
            word = r.verdict.upper() if r.verdict in ("regression", "missing") else r.verdict
            lines.append(f"{r.scheduler:<10} {r.cls:<8} {r.metric:<{w}} {significant(r.a, 4):>12} "
                         f"{significant(r.b, 4):>12} {pct:>9}  "
                         + (f"{word:<11} {_spread_text(r)}" if tested else word).rstrip())
    else:
        lines.append(f"all {len(c.rows)} metrics unchanged (within their noise floors)")
    n = len(c.regressions)
    lines.append(f"{n} regression{'s' if n != 1 else ''} beyond tolerance" if n else "no regressions")
    return "\n".join(lines)


def _spread_text(r: Row) -> str:
    if not r.test:
        return ""
    verdict = {True: "significant", False: "n.s.", None: "too few seeds to test"}[r.significant]
    return f"p {r.p_value:.3g} {verdict} ({r.test})"
