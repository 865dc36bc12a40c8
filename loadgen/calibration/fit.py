"""Fit the parameters no component metric gives directly: a deterministic, bounded coordinate
search in log space over a cheap objective (the simulated twins take milliseconds each).

The objective compares twins with the mean of the real repeats on the fitting cases: squared
log-ratios of admission p50 and p99, plus the allocation-utilization gap (in 10-point units).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

FLOOR_S = 1e-3           # latencies below a millisecond count as a millisecond (log of 0)
STEPS = (4.0, 2.0, 1.41, 1.19, 1.09)
GRID = 9                 # points of the first, coarse scan of each parameter's range


def _grid(lo: float, hi: float, n: int) -> list[float]:
    lo = max(lo, hi * 1e-6, 1e-9)
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


@dataclass(frozen=True)
class Free:
    """One parameter to fit: profile section and key, and the range it may take."""
    section: str
    key: str
    lo: float
    hi: float

    def clamp(self, v: float) -> float:
        return min(max(v, self.lo), self.hi)


def case_loss(real: dict, sim: dict) -> float:
    """real: mean over repeats {p50, p99, alloc_util}; sim: the twin's result."""
    a = sim["admission_s"]
    if a["count"] == 0 or real["p50"] is None:
        return 100.0 if (a["count"] == 0) != (real["p50"] is None) else 0.0
    err = 0.0
    for q in ("p50", "p99"):
        err += math.log(max(a[q], FLOOR_S) / max(real[q], FLOOR_S)) ** 2
    return err + (10.0 * (sim["alloc_util"] - real["alloc_util"])) ** 2


def search(objective: Callable[[dict[tuple[str, str], float]], float], start: dict[tuple[str, str], float],
           free: list[Free], max_evals: int = 120) -> tuple[dict[tuple[str, str], float], float, int]:
    """Minimise objective over the free parameters from `start`; returns (best, loss, evaluations)."""
    best = dict(start)
    for f in free:
        best[(f.section, f.key)] = f.clamp(best[(f.section, f.key)] or f.lo)
    best_loss = objective(best)
    evals = 1
    # A coarse log-spaced scan of each parameter's range first: a start far from the answer (a
    # placeholder of 0, a value from other hardware) is reached in a few evaluations.
    for f in free:
        k = (f.section, f.key)
        for cand in _grid(f.lo, f.hi, GRID):
            if evals >= max_evals:
                break
            trial = {**best, k: cand}
            loss = objective(trial)
            evals += 1
            if loss < best_loss - 1e-9:
                best, best_loss = trial, loss
    for step in STEPS:
        improved = True
        while improved and evals < max_evals:
            improved = False
            for f in free:
                k = (f.section, f.key)
                for cand in (f.clamp(best[k] * step), f.clamp(best[k] / step)):
                    if cand == best[k] or evals >= max_evals:
                        continue
                    trial = {**best, k: cand}
                    loss = objective(trial)
                    evals += 1
                    if loss < best_loss - 1e-9:
                        best, best_loss, improved = trial, loss, True
                        break
    return best, best_loss, evals
