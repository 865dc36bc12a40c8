"""Each simulated scheduling cycle takes its own time (kube.cycle_sigma), as kube-scheduler's do.

The real scheduler's algorithm histogram has a long tail (scheduler_perf at 2,000 nodes here: mean
3.44 ms, median 2.53, p99 22.9), and every pod queued behind a slow cycle waits for it. The real
backend records the tail's lognormal shape (fakes/kube/metrics.py), a calibration or a CI guard
reads it off the runs (loadgen/calibration/measure.py), and the twin draws each cycle around its
mean from a stream of its own (fakes/kube/sim.py). Exact numbers on constructed data."""
import numpy as np
import pytest

from fakes.kube.metrics import ALGORITHM, scheduler_figures
from fakes.kube.sim import CYCLE_STREAM_TAG
from fakes.sim.latency import BLOCK, stream
from loadgen.calibration.cases import Case
from loadgen.calibration.measure import kube as kube_measured
from loadgen.model.lognormal import fit_sigma
from support.simkit import job, sim

# 200 empty nodes: 100 examined and scored, so every cycle's mean is 2 ms + 100 x 10 us + 100 x 30 us = 6 ms
COSTS = {"schedulers.kube.observe_ms": 0, "schedulers.kube.release_ms": 0, "control_plane.create_ms": 0,
         "schedulers.kube.cycle_base_ms": 2, "schedulers.kube.cycle_per_node_us": 10,
         "schedulers.kube.score_per_node_us": 30}
BUCKETS = [(0.001, 40), (0.002, 70), (0.004, 90), (0.008, 97), (0.016, 100)]     # seconds, cumulative
EXPECTED_SIGMA = 1.0622     # fit_sigma of BUCKETS with the mean 2.5 ms held


def test_without_a_spread_every_cycle_takes_its_mean_and_draws_nothing():
    t, _, _ = sim("kube", [job(0, 2, gpus=1, dur=1000)], nodes=200, end=10,
                  overrides={**COSTS, "schedulers.kube.cycle_sigma": 0})
    assert t.cycle_ms == [pytest.approx(6.0), pytest.approx(6.0)]
    assert t.cycle_spread.rng.bit_generator.state == stream(1, CYCLE_STREAM_TAG).bit_generator.state


def test_each_cycle_is_its_mean_times_a_lognormal_draw_of_its_own_stream():
    t, rec, _ = sim("kube", [job(0, 2, gpus=1, dur=1000)], nodes=200, end=10,
                    overrides={**COSTS, "schedulers.kube.cycle_sigma": 0.8})
    z = np.random.default_rng([1, CYCLE_STREAM_TAG]).standard_normal(BLOCK)[:2]
    expected = 6.0 * np.exp(0.8 * z - 0.8 * 0.8 / 2)
    assert t.cycle_ms == pytest.approx(expected.tolist(), rel=1e-12)
    assert t.cycle_busy_s == pytest.approx(expected.sum() / 1000, rel=1e-12)   # the loop waits for both


def test_the_real_backend_records_the_algorithm_histograms_shape():
    lines = [f'{ALGORITHM}_bucket{{le="{le}"}} {n}' for le, n in BUCKETS]
    lines += [f'{ALGORITHM}_bucket{{le="+Inf"}} 100', f"{ALGORITHM}_sum 0.25", f"{ALGORITHM}_count 100"]
    f = scheduler_figures("\n".join(lines) + "\n")
    assert f["algorithm_ms_mean"] == 2.5
    assert f["algorithm_sigma"] == fit_sigma(BUCKETS + [(float("inf"), 100)], 0.0025) == EXPECTED_SIGMA


def test_a_calibration_takes_the_median_shape_of_its_runs():
    runs = [(Case("scenarios/calibrate-steady.yaml", n, "fit"),
             {"control_plane": {"scheduler": {"algorithm_sigma": s}}}) for n, s in ((32, 0.7), (64, 0.9), (64, 0.8))]
    value, source = kube_measured(runs)[("kube", "cycle_sigma")]
    assert value == 0.8 and "median of 3 real kube runs" in source


def test_the_measured_shape_goes_to_kube_and_to_the_sections_that_take_its_cycle(tmp_path):
    import shutil

    from loadgen.calibration.kube_spread import shapes, write_profile
    from loadgen.input.profile import load as load_profile
    from support.paths import ROOT
    assert shapes([{"control_plane": {"scheduler": {"algorithm_sigma": 0.9}}},
                   {"control_plane": {"scheduler": {"algorithm_sigma": None}}}, {"control_plane": {}}]) == [0.9]
    path = tmp_path / "mine.yaml"
    shutil.copy(ROOT / "fakes/profiles/local.yaml", path)
    write_profile(path, 0.85, "constructed runs", "python -m loadgen.calibration.kube_spread")
    p = load_profile(str(path))
    kube = p.params["kube"]["cycle_sigma"]
    assert (kube.value, kube.provenance, kube.source) == (0.85, "measured", "constructed runs")
    for section in ("kube-gang", "coscheduling"):
        shared = p.params[section]["cycle_sigma"]
        assert (shared.value, shared.provenance) == (0.85, "sourced")
