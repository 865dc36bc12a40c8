"""The one quantile gangstorm reports: nearest rank over the exact samples.

summary.json's admission quantiles (loadgen.measure.statistics), the fakelet calibration
(fakes/ray/fakelets/calibrate.py) and the Kubernetes-family control-plane figures
(fakes/kube/metrics.py) all use it, so a p99 means the same wherever it is printed. Both sides
import it (fakes/ may import only loadgen.model), which is why it lives here.
"""
from __future__ import annotations

import numpy as np

QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99, "p999": 0.999}


def exact_quantile(values, q: float) -> float:
    """Nearest-rank quantile: the smallest sample with at least q of the samples at or below it."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0:
        return float("nan")
    rank = max(int(np.ceil(q * len(v))), 1)
    return float(v[rank - 1])
