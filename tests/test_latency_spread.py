"""The spread of the apiserver's request latency, from its histogram to the twin's draws.

loadgen/model/lognormal.py fits a lognormal's shape to a histogram's buckets with its exact mean
held; fakes/sim/latency.py draws each simulated request from that lognormal (exact numbers on
constructed data)."""
import math

import numpy as np

from fakes.kube.metrics import apiserver_figures
from fakes.sim.latency import BLOCK, STREAM_TAG, Latency, stream
from loadgen.model.lognormal import cells, fit_sigma, quantile
from support.apiserver_text import apiserver_text

LE = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, math.inf)     # the apiserver's first buckets, k8s.io/apiserver v0.36.1


def _exact_buckets(mean: float, sigma: float, n: int = 1_000_000) -> list[tuple[float, float]]:
    mu = math.log(mean) - sigma * sigma / 2
    return [(le, n if math.isinf(le) else round(n * 0.5 * (1 + math.erf((math.log(le) - mu) / (sigma * math.sqrt(2))))))
            for le in LE]


def test_the_shape_of_a_lognormal_comes_back_from_its_buckets():
    for sigma in (0.3, 0.7, 1.2):
        assert fit_sigma(_exact_buckets(0.006, sigma), 0.006) == sigma


def test_buckets_that_say_nothing_about_the_spread_give_none():
    assert fit_sigma([(0.005, 0), (math.inf, 0)], 0.004) is None          # no observations
    assert fit_sigma([(0.005, 40), (math.inf, 40)], 0.004) is None        # all in one bucket
    assert fit_sigma(_exact_buckets(0.006, 0.7), 0.0) is None             # no mean
    assert fit_sigma(_exact_buckets(0.006, 0.7), math.nan) is None


def test_cells_are_the_counts_between_bucket_bounds():
    assert cells([(0.025, 90), (0.005, 60), (math.inf, 100), (0.05, 90)]) == [
        (0.0, 0.005, 60), (0.005, 0.025, 30), (0.05, math.inf, 10)]


def test_a_quantile_of_the_fitted_lognormal():
    # mean 6 ms, sigma 0.7: median 6 x e^-0.245 = 4.696 ms, p99 = median x e^(0.7 x 2.3263) = 23.93 ms
    assert round(quantile(0.5, 0.006, 0.7) * 1000, 3) == 4.696
    assert round(quantile(0.99, 0.006, 0.7) * 1000, 2) == 23.93


def test_the_real_backend_records_each_request_kinds_shape():
    f = apiserver_figures(apiserver_text())
    assert f["request_sigma"]["create_pod"] == 0.5451
    assert f["request_sigma"]["bind_pod"] == 0.01            # half under 5 ms at a 5 ms mean: no spread to speak of
    assert f["request_sigma"]["create_podgroup"] is None


def test_no_spread_takes_the_mean_and_draws_nothing():
    rng = stream(7)
    before = rng.bit_generator.state
    lat = Latency(0.004, 0.0, rng)
    assert [lat.draw() for _ in range(3)] == [0.004] * 3 and lat.slowest(5) == 0.004
    assert rng.bit_generator.state == before


def test_draws_are_the_streams_normals_through_the_lognormal_with_the_mean_held():
    lat = Latency(0.006, 0.7, stream(7))
    z = np.random.default_rng([7, STREAM_TAG]).standard_normal(BLOCK)
    expected = 0.006 * np.exp(0.7 * z - 0.7 * 0.7 / 2.0)
    got = [lat.draw() for _ in range(BLOCK + 1)]
    assert got[:BLOCK] == expected.tolist()
    assert round(float(np.mean(got[:BLOCK])) * 1000, 2) == 5.97    # the sample's mean, 4,096 draws


def test_the_slowest_of_several_requests_is_their_maximum():
    a, b = Latency(0.006, 0.7, stream(3)), Latency(0.006, 0.7, stream(3))
    assert a.slowest(4) == max(b.draw() for _ in range(4))


def test_a_profile_without_the_spread_takes_none_and_one_with_it_is_used():
    import copy

    from loadgen.input.profile import Param
    from loadgen.input.profile import load as load_profile
    from loadgen.input.scenario import from_dict
    without = copy.deepcopy(load_profile("local"))
    for key in ("create_sigma", "write_sigma"):
        without.params["control_plane"].pop(key, None)
    with_it = copy.deepcopy(without)
    with_it.params["control_plane"]["create_sigma"] = Param(0.61, "ln", "measured", "constructed")
    raw = {"name": "spread", "fleet": {"nodes": 8}}
    assert from_dict(raw, profile=without).data["control_plane"]["create_sigma"] == 0.0
    cp = from_dict(raw, profile=with_it).data["control_plane"]
    assert cp["create_sigma"] == 0.61 and cp["write_sigma"] == 0.0
