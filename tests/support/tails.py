"""Admission tails a short guard run can resolve: the mean of its slowest share of jobs.

A guard run admits 30-80 jobs, where one order statistic (p90 is the 30th of 33) moves with a
single job: in one Ray guard run the four queued jobs waited 1.17 / 2.52 / 3.71 / 4.27 s against
the twin's 0.31 / 2.38 / 3.71 / 4.28, a p90 ratio of 3.8 from one job and 1.09 over all four.
"""
import csv
import math
from pathlib import Path

import numpy as np

from loadgen.measure.recorder import Recorder


def slowest_mean(values, share: float = 0.1) -> float:
    """The mean of the ceil(share x n) largest values (the expected shortfall at 1 - share)."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0:
        raise ValueError("no admissions to take a tail of")
    k = max(1, math.ceil(share * len(v) - 1e-9))
    return float(v[-k:].mean())


def csv_admissions(run_dir: Path, scheduler: str) -> list[float]:
    """Each admitted job's admission seconds from a run folder's jobs.csv."""
    with open(run_dir / "jobs.csv", newline="") as f:
        return [float(r["admission_s"]) for r in csv.DictReader(f)
                if r["scheduler"] == scheduler and r["admission_s"] != ""]


def recorder_admissions(rec: Recorder) -> list[float]:
    """Each admitted job's admission seconds from a recorder (a twin's)."""
    ok = ~np.isnan(rec.admit)
    return (rec.admit - rec.submit)[ok].tolist()


# jobs.csv keeps 6 decimals (each value off by <= 0.5e-6, so their mean is too) and both means
# are rounded to 6 decimals again (<= 0.5e-6 each): at most 1.5e-6 apart, plus float slack. One CI
# run met exactly 1e-6 (0.279574 against 0.279575), which a 1e-6 tolerance refused.
MEAN_OF_ROUNDED_TOLERANCE = 1.5e-6 + 1e-12


def assert_merged_tails_are_the_per_job_ones(merged: dict, admitted: list[float]) -> None:
    """A run's merged admission stats equal those of jobs.csv's values: exactly, but the mean."""
    from loadgen.measure.statistics import latency_stats
    merged, per_job = dict(merged), latency_stats(admitted)
    assert abs(merged.pop("mean") - per_job.pop("mean")) <= MEAN_OF_ROUNDED_TOLERANCE
    assert merged == per_job
