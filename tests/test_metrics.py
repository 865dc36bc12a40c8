"""Statistics: nearest-rank quantiles, cost model."""
import numpy as np
import pytest

from loadgen.measure.statistics import cost_per_million_gpu_hours, exact_quantile, latency_stats


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
    assert cost_per_million_gpu_hours(2.5, 0.8, 0.7, 1.0) is None      # every GPU-hour wasted


def _recorder(events, members=2, gpm=8):
    from loadgen.measure.recorder import Recorder
    from loadgen.model.events import Event, Kind
    from loadgen.model.job import Job
    rec = Recorder([Job(id=1, tenant="a", queue="q", cls="large", members=members, gpus_per_member=gpm,
                        duration_s=100.0, submit_s=0.0, min_available=members)])
    rec.record([Event(t, 1, Kind(k), m) for t, k, m in events])
    return rec


def test_scheduling_tax_counts_gpus_held_by_a_partial_gang():
    from loadgen.measure.statistics import scheduling_tax
    # one of two 8-GPU members bound for 10 s before the second, then 100 s of the whole gang
    rec = _recorder([(0, "bound", 1), (10, "bound", 2), (10, "admitted", 2), (110, "finished", 0)])
    assert rec.partial_gpu_s == 80 and rec.held_gpu_s == 80 + 16 * 100
    assert scheduling_tax(rec)["tax"] == round(80 / 1680, 6)


def test_scheduling_tax_counts_the_work_of_an_evicted_run_as_lost():
    from loadgen.measure.statistics import scheduling_tax
    # a 1 x 8-GPU job runs 50 s, is evicted, waits 10 s, runs its full 100 s again
    rec = _recorder([(0, "admitted", 1), (50, "evicted", 0), (50, "requeued", 0), (60, "admitted", 1),
                     (160, "finished", 0)], members=1)
    assert rec.lost_gpu_s == 50 * 8 and rec.held_gpu_s == 8 * 50 + 8 * 100
    assert scheduling_tax(rec) == {"tax": round(400 / 1200, 6), "partial_gang_gpu_hours": 0.0,
                                   "lost_work_gpu_hours": round(400 / 3600, 6)}
