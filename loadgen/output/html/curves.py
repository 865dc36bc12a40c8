"""Pure transforms from per-job and per-sample arrays to the few hundred points a figure needs.

A 10,000-node run has ~43,000 jobs and ~500 samples per scheduler; a figure drawn from every
point would make report.html tens of megabytes. These keep what the eye (and the tail) needs.
"""
from __future__ import annotations

import numpy as np

QUANTILE_MARKS = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
MIN_LATENCY_S = 1e-3     # a log axis has no 0: faster admissions are drawn at 1 ms


def nearest_rank(n: int, p: np.ndarray) -> np.ndarray:
    """Indices of the nearest-rank quantiles p of n sorted samples (loadgen.model.quantiles.exact_quantile)."""
    return np.maximum(np.ceil(np.asarray(p, dtype=float) * n).astype(np.int64), 1) - 1


def cdf_points(sorted_values: np.ndarray, points: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of sorted samples at about `points` ranks: half spread evenly over the body,
    half log-spaced into the tail (1 - p from 0.1 down to 1/n), plus the exact p50/p99/p99.9 ranks,
    so the curve passes through the table's quantiles. Returns (x, F(x)) with F = rank / n."""
    v = np.asarray(sorted_values, dtype=float)
    n = len(v)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    half = max(points // 2, 2)
    body = np.linspace(0.0, 1.0, half)
    tail = 1.0 - np.logspace(-1.0, np.log10(1.0 / n) if n > 10 else -1.0, half)
    p = np.concatenate([body, tail, list(QUANTILE_MARKS.values()), [1.0]])
    idx = np.unique(np.clip(nearest_rank(n, p), 0, n - 1))
    return v[idx], (idx + 1) / n


def quantile_marks(sorted_values: np.ndarray) -> dict[str, tuple[float, float]]:
    """name -> (x, F) of the p50/p99/p99.9 nearest-rank samples."""
    v = np.asarray(sorted_values, dtype=float)
    n = len(v)
    if n == 0:
        return {}
    idx = nearest_rank(n, np.array(list(QUANTILE_MARKS.values())))
    return {name: (float(v[i]), (i + 1) / n) for name, i in zip(QUANTILE_MARKS, idx)}


def decimate(t: np.ndarray, y: np.ndarray, max_points: int = 1200) -> tuple[np.ndarray, np.ndarray]:
    """At most ~max_points of a sampled series: per bucket its minimum and its maximum (in time
    order), so a spike survives the thinning."""
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    n = len(t)
    if n <= max_points:
        return t, y
    buckets = np.array_split(np.arange(n), max_points // 2)
    keep: list[int] = []
    for b in buckets:
        seg = y[b]
        if np.all(np.isnan(seg)):
            keep.append(int(b[0]))
            continue
        lo, hi = int(b[np.nanargmin(seg)]), int(b[np.nanargmax(seg)])
        keep.extend(sorted({lo, hi}))
    k = np.array(keep)
    return t[k], y[k]


def rate(t: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A cumulative counter as a rate per second between samples, at the end of each interval.
    A counter that has not appeared yet (NaN before its first value) counts as 0."""
    t, c = np.asarray(t, dtype=float), np.asarray(total, dtype=float)
    if len(t) < 2:
        return np.zeros(0), np.zeros(0)
    first = np.flatnonzero(~np.isnan(c))
    if len(first):
        c = c.copy()
        c[: first[0]] = 0.0
    dt = np.diff(t)
    ok = dt > 0
    return t[1:][ok], np.diff(c)[ok] / dt[ok]
