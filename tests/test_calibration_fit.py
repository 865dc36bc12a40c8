"""The fitter finds known parameters of a known function, stays in bounds and is deterministic."""
import math

from loadgen.calibration.fit import Free, case_loss, search


def test_search_recovers_the_parameters_of_a_known_curve():
    truth = {("a", "x"): 3.0, ("a", "y"): 0.2}

    def objective(p):
        return sum((math.log(p[k]) - math.log(v)) ** 2 for k, v in truth.items())

    best, loss, evals = search(objective, {("a", "x"): 1.0, ("a", "y"): 1.0},
                               [Free("a", "x", 0.01, 100), Free("a", "y", 0.01, 100)])
    assert abs(best[("a", "x")] / 3.0 - 1) < 0.05 and abs(best[("a", "y")] / 0.2 - 1) < 0.05
    assert search(objective, {("a", "x"): 1.0, ("a", "y"): 1.0},
                  [Free("a", "x", 0.01, 100), Free("a", "y", 0.01, 100)]) == (best, loss, evals)


def test_search_never_leaves_the_bounds():
    best, _, _ = search(lambda p: -p[("a", "x")], {("a", "x"): 1.0}, [Free("a", "x", 0.5, 2.0)])
    assert best[("a", "x")] == 2.0


def test_case_loss_is_zero_for_a_perfect_twin_and_counts_log_ratios():
    real = {"p50": 2.0, "p99": 8.0, "alloc_util": 0.5}
    sim = {"admission_s": {"count": 10, "p50": 2.0, "p99": 8.0}, "alloc_util": 0.5}
    assert case_loss(real, sim) == 0
    sim2 = {"admission_s": {"count": 10, "p50": 4.0, "p99": 8.0}, "alloc_util": 0.52}
    assert math.isclose(case_loss(real, sim2), math.log(2) ** 2 + 0.2 ** 2)
