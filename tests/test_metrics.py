"""Statistics: nearest-rank quantiles, cost model."""
import numpy as np
import pytest

from loadgen.metrics import cost_per_million_gpu_hours, exact_quantile, latency_stats


def test_nearest_rank_quantiles():
    v = np.arange(1, 1001)          # 1..1000
    assert exact_quantile(v, 0.5) == 500
    assert exact_quantile(v, 0.99) == 990
    assert exact_quantile(v, 0.999) == 999
    assert exact_quantile([7.0], 0.999) == 7.0
    s = latency_stats(v)
    assert (s["p50"], s["p99"], s["p999"], s["max"], s["count"]) == (500, 990, 999, 1000, 1000)


def test_empty_stats_report_zero_count():
    assert latency_stats([]) == {"count": 0, "p50": None, "p90": None, "p99": None, "p999": None,
                                 "mean": None, "max": None}


def test_cost_model_matches_the_seed_formula():
    # $2.50 per GPU-hour, 80% allocated, 70% active, 5% scheduling tax
    assert cost_per_million_gpu_hours(2.5, 0.8, 0.7, 0.05) == pytest.approx(2.5 / 0.56 / 0.95 * 1e6)
    assert cost_per_million_gpu_hours(2.5, 0.0, 0.7, 0.05) is None
