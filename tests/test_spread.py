"""Seed spread: the median's order-statistic interval and the exact rank tests, on constructed data
whose answers are known by hand (and agree with scipy.stats' exact tests)."""
import math

import pytest

from loadgen.measure.spread import (
    Interval,
    mann_whitney,
    median_interval,
    min_seeds_for,
    paired_difference,
    unpaired_difference,
    wilcoxon_signed_rank,
)


def test_ten_seeds_give_the_second_and_ninth_values_at_97_9_percent():
    # 1 - 2 P(Bin(10, 1/2) <= 1) = 1 - 2 x 11/1024
    assert median_interval(range(1, 11)) == Interval(5.5, 2.0, 9.0, 1 - 22 / 1024, 10)


def test_below_six_seeds_the_interval_is_the_range_with_its_true_coverage():
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == Interval(3.0, 1.0, 5.0, 1 - 2 / 32, 5)
    assert median_interval([7.0]) == Interval(7.0, 7.0, 7.0, 0.0, 1)


def test_the_interval_ignores_missing_and_non_finite_values():
    assert median_interval([None, float("nan"), 2.0, float("inf"), 4.0]) == Interval(3.0, 2.0, 4.0, 0.5, 2)
    assert median_interval([None]) is None


def test_signed_rank_p_value_is_exact():
    # 10 differences, two negative with ranks 1 and 6: 38 of the 1,024 sign patterns are as extreme
    assert wilcoxon_signed_rank([1.2, -0.4, 2.5, 3.1, 0.7, -1.9, 4.4, 2.2, 0.9, 1.5]) == 38 / 1024


def test_signed_rank_all_one_sign_is_two_over_two_to_the_n():
    assert wilcoxon_signed_rank([1, 2, 3, 4, 5]) == 2 / 32
    assert wilcoxon_signed_rank([-1, -2, -3, -4, -5, -6]) == 2 / 64
    assert min_seeds_for(0.05) == 6


def test_signed_rank_drops_zeros_and_shares_tied_ranks():
    # zeros dropped -> [1, 2, 2, -3]: ranks 1, 2.5, 2.5, 4; W+ = 6 against a mean of 5; only the two
    # sign patterns summing to exactly 5 ({1, 4} and {2.5, 2.5}) are less extreme: 14 of 16
    assert wilcoxon_signed_rank([0, 1, 2, 2, -3, 0]) == 14 / 16
    assert wilcoxon_signed_rank([1, 1, -1]) == 1.0     # all ranks tied: every pattern is as extreme
    assert wilcoxon_signed_rank([0, 0]) == 1.0


def test_rank_sum_p_value_is_exact():
    # 8 of the C(11, 5) = 462 splits are as extreme
    assert mann_whitney([1.1, 2.3, 0.4, 5.0, 3.3], [4.4, 6.1, 7.2, 5.5, 8.0, 3.9]) == 8 / 462


def test_paired_difference_uses_common_seeds_only():
    a = {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0, 5: 14.0, 6: 15.0, 7: 99.0}
    b = {1: 12.0, 2: 14.0, 3: 13.0, 4: 18.0, 5: 15.5, 6: 16.0, 8: 0.0}
    d = paired_difference(a, b)
    assert (d.seeds, d.median_diff, d.p_value, d.significant) == (6, 1.75, 2 / 64, True)


def test_five_seeds_never_make_a_difference_significant():
    a = {s: 1.0 for s in range(5)}
    b = {s: 100.0 for s in range(5)}
    d = paired_difference(a, b)
    assert (d.p_value, d.significant) == (2 / 32, False)


def test_unpaired_difference_reports_the_median_shift():
    d = unpaired_difference([1.0, 2.0, 3.0], [11.0, 12.0, 13.0])
    assert (d.median_diff, d.p_value, d.significant) == (10.0, 2 / math.comb(6, 3), False)


def test_exact_tests_refuse_sizes_they_would_not_finish():
    with pytest.raises(ValueError):
        wilcoxon_signed_rank(range(1, 100))
