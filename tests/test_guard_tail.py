"""The tail a short guard run is judged on: the mean of its slowest tenth of jobs (tests/support/tails.py)."""
import pytest

from support.tails import slowest_mean


def test_the_slowest_tenth_of_33_jobs_is_the_four_slowest():
    queued = [1.17, 2.52, 3.71, 4.27]
    assert slowest_mean([0.01] * 29 + queued) == pytest.approx(sum(queued) / 4)


def test_one_job_moves_the_tail_by_its_share_not_by_its_own_ratio():
    real = [0.01] * 29 + [1.17, 2.52, 3.71, 4.27]
    twin = [0.01] * 29 + [0.31, 2.38, 3.71, 4.28]
    assert round(slowest_mean(real) / slowest_mean(twin), 3) == 1.093


def test_a_share_that_is_a_whole_count_takes_exactly_that_many():
    assert slowest_mean(list(range(1, 11)), 0.1) == 10.0
    assert slowest_mean(list(range(1, 11)), 0.3) == 9.0
    assert slowest_mean([5.0], 0.1) == 5.0


def test_no_admissions_has_no_tail():
    with pytest.raises(ValueError):
        slowest_mean([])
