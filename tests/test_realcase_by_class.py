"""A real case compared per job class as well as overall (loadgen/calibration/realcase.py): the
real runs' per-class p50 and p99 averaged over the runs, against the twin's, on constructed results."""
from loadgen.calibration.realcase import by_class


def _result(small, large):
    return {"by_class": {"small": {"admission_s": {"count": 40, "p50": small[0], "p99": small[1]}},
                         "large": {"admission_s": {"count": 30, "p50": large[0], "p99": large[1]}}}}


def test_each_class_is_compared_on_its_own():
    reals = [_result((0.06, 2.0), (1.0, 30.0)), _result((0.08, 3.0), (1.4, 50.0))]
    sim = _result((0.1, 5.0), (1.0, 25.0))
    out = by_class(reals, sim)
    assert out["small"] == {"jobs": 40, "real_p50": 0.07, "sim_p50": 0.1, "p50_ratio": 0.7,
                            "real_p99": 2.5, "sim_p99": 5.0, "p99_ratio": 0.5}
    assert out["large"]["real_p50"] == 1.2 and out["large"]["p50_ratio"] == 1.2
    assert out["large"]["real_p99"] == 40.0 and out["large"]["p99_ratio"] == 1.6


def test_a_class_the_real_runs_never_saw_is_left_out():
    reals = [{"by_class": {"small": {"admission_s": {"count": 5, "p50": 0.1, "p99": 0.2}}}}]
    sim = _result((0.1, 0.2), (1.0, 2.0))
    assert list(by_class(reals, sim)) == ["small"]
