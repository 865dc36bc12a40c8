"""Spread over seeds: a median with a distribution-free interval, and exact rank tests of whether
two schedulers (or two runs) differ by more than the seed-to-seed spread. Pure, numpy only.

Interval: the order-statistic confidence interval for the median. With n seeds sorted, the interval
[x(k), x(n+1-k)] covers the true median with probability 1 - 2 * P(Binomial(n, 1/2) < k); k is the
largest rank that keeps that coverage at or above the level asked for. No resampling, so it is exact
and the same for the same values. Below 6 values no k reaches 95%: the interval is then the whole
range and its coverage (1 - 2 / 2**n) is reported as it is.

Paired test (two schedulers on the same seeds): the exact Wilcoxon signed-rank test, two-sided.
Zero differences are dropped (Wilcoxon's rule); tied absolute differences take their mid-rank and
the exact null distribution is built over those ranks (doubled, so they stay integers).

Unpaired test (two runs whose seed sets differ): the exact Mann-Whitney U test, two-sided, with
mid-ranks for ties and the exact distribution over those ranks.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
ALPHA = 0.05
MAX_EXACT = 60          # values per side the exact tests enumerate (seed counts are far below)


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    confidence: float   # the interval's exact coverage (>= the level asked for when n allows it)
    n: int

    def as_dict(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high,
                "confidence": round(self.confidence, 6), "n": self.n}


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2 ** n


def median_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The median of the finite values and its order-statistic interval; None when there are none."""
    v = np.sort(np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float))
    n = len(v)
    if n == 0:
        return None
    median = float(np.median(v))
    k = 1                                   # 1-based rank of the lower bound
    for cand in range(1, n // 2 + 1):
        if 1 - 2 * _binom_cdf_half(n, cand - 1) >= confidence:
            k = cand
        else:
            break
    coverage = 1 - 2 * _binom_cdf_half(n, k - 1)
    return Interval(median, float(v[k - 1]), float(v[n - k]), coverage, n)


def _midranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties sharing their mid-rank, doubled so they stay integers."""
    order = np.argsort(values, kind="stable")
    ranks2 = np.empty(len(values), dtype=np.int64)
    sorted_v = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks2[order[i:j + 1]] = (i + 1) + (j + 1)        # 2 x mid-rank of positions i..j
        i = j + 1
    return ranks2


def wilcoxon_signed_rank(diffs: Iterable[float]) -> float:
    """Exact two-sided p-value of the signed-rank test that the differences are centred on 0."""
    d = np.asarray([x for x in diffs if x is not None and math.isfinite(x)], dtype=float)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 1.0
    if n > MAX_EXACT:
        raise ValueError(f"exact signed-rank test: at most {MAX_EXACT} differences, got {n}")
    r2 = _midranks(np.abs(d))
    w_plus = int(r2[d > 0].sum())
    total = int(r2.sum())
    # counts[s] = number of sign assignments whose positive doubled-rank sum is s
    counts = np.zeros(total + 1, dtype=object)
    counts[0] = 1
    for r in r2:
        r = int(r)
        shifted = np.zeros_like(counts)
        shifted[r:] = counts[:len(counts) - r]
        counts = counts + shifted
    mean = total / 2
    dev = abs(w_plus - mean)
    extreme = sum(int(c) for s, c in enumerate(counts) if abs(s - mean) >= dev - 1e-9)
    return min(1.0, extreme / 2 ** n)


def mann_whitney(x: Iterable[float], y: Iterable[float]) -> float:
    """Exact two-sided p-value of the rank-sum test that x and y come from one distribution."""
    a = [v for v in x if v is not None and math.isfinite(v)]
    b = [v for v in y if v is not None and math.isfinite(v)]
    m, n = len(a), len(b)
    if m == 0 or n == 0:
        return 1.0
    if m > MAX_EXACT or n > MAX_EXACT:
        raise ValueError(f"exact rank-sum test: at most {MAX_EXACT} values a side, got {m} and {n}")
    r2 = _midranks(np.asarray(a + b, dtype=float))
    observed = int(r2[:m].sum())
    total = int(r2.sum())
    # ways[k, s]: subsets of k of the pooled ranks with doubled-rank sum s, built one rank at a
    # time (a 0/1 knapsack over k). Counts stay below C(m+n, (m+n)//2): integers while that fits
    # in int64 (m + n <= 66), floating point beyond (relative error ~1e-16 on the p-value).
    exact = math.comb(m + n, (m + n) // 2) < 2 ** 62
    ways = np.zeros((m + 1, total + 1), dtype=np.int64 if exact else np.float64)
    ways[0, 0] = 1
    for r in r2:
        r = int(r)
        ways[1:, r:] = ways[1:, r:] + ways[:-1, :total + 1 - r]
    mean = total * m / (m + n)
    dev = abs(observed - mean)
    sums = np.arange(total + 1)
    extreme = ways[m][np.abs(sums - mean) >= dev - 1e-9].sum()
    extreme = int(extreme) if exact else float(extreme)
    return min(1.0, extreme / math.comb(m + n, m))


@dataclass(frozen=True)
class Difference:
    """B against A on the seeds both have: the median paired difference and whether it exceeds
    the seed-to-seed spread."""
    seeds: int
    median_diff: float | None       # median of (b - a) over common seeds
    p_value: float
    significant: bool
    test: str

    def as_dict(self) -> dict:
        return {"seeds": self.seeds, "median_diff": self.median_diff, "p_value": round(self.p_value, 6),
                "significant": self.significant, "test": self.test}


def paired_difference(a: Mapping[int, float], b: Mapping[int, float], alpha: float = ALPHA) -> Difference:
    """Signed-rank test of b - a over the seeds both have a finite value for."""
    common = sorted(s for s in a.keys() & b.keys() if _finite(a[s]) and _finite(b[s]))
    diffs = [b[s] - a[s] for s in common]
    p = wilcoxon_signed_rank(diffs)
    med = float(np.median(diffs)) if diffs else None
    return Difference(len(common), med, p, p < alpha, "wilcoxon signed-rank, exact, two-sided")


def unpaired_difference(a: Iterable[float], b: Iterable[float], alpha: float = ALPHA) -> Difference:
    """Rank-sum test of b against a (runs whose seed sets differ)."""
    av = [v for v in a if _finite(v)]
    bv = [v for v in b if _finite(v)]
    p = mann_whitney(av, bv)
    med = float(np.median(bv) - np.median(av)) if av and bv else None
    return Difference(min(len(av), len(bv)), med, p, p < alpha, "mann-whitney rank-sum, exact, two-sided")


def min_seeds_for(alpha: float = ALPHA) -> int:
    """The fewest paired seeds with which the signed-rank test can reach p < alpha at all
    (all differences of one sign: p = 2 / 2**n)."""
    n = 1
    while 2 / 2 ** n >= alpha:
        n += 1
    return n


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
