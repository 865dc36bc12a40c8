"""Bind bursts (loadgen/measure/bursts.py): bind times split into the sessions that bound them, and
the per-pod pace inside the long ones, as the Volcano bench and its twin are compared."""
import pytest

from loadgen.measure.bursts import bursts, stream_ms_per_pod


def test_binds_split_at_gaps_longer_than_the_threshold():
    got = bursts([5.0, 1.0, 1.2, 1.5, 3.0, 3.4, 5.3], gap_s=0.4)
    assert got == [{"start_s": 1.0, "end_s": 1.5, "pods": 3},
                   {"start_s": 3.0, "end_s": 3.4, "pods": 2},
                   {"start_s": 5.0, "end_s": 5.3, "pods": 2}]


def test_no_binds_no_bursts():
    assert bursts([]) == []
    assert stream_ms_per_pod([]) is None


def test_pace_counts_only_long_bursts_and_not_their_opening_bind():
    runs = [{"start_s": 0.0, "end_s": 3.0, "pods": 101},      # 100 gaps of 30 ms
            {"start_s": 10.0, "end_s": 10.1, "pods": 5},      # short: not a streaming session
            {"start_s": 20.0, "end_s": 24.0, "pods": 101}]    # 100 gaps of 40 ms
    assert stream_ms_per_pod(runs, min_pods=100) == pytest.approx(35.0)
    assert stream_ms_per_pod(runs, min_pods=200) is None
