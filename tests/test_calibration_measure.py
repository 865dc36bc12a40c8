"""The component costs read off real runs' own metrics, and a profile re-measured from one run."""
import pytest

from loadgen.calibration.calibrate import remeasured
from loadgen.calibration.cases import Case
from loadgen.calibration.measure import extract, line
from loadgen.input.profile import load as load_profile


def kube_result(attempt_ms: float, create_ms: float, bind_ms: float) -> dict:
    return {"control_plane": {"scheduler": {"attempt_ms_mean": attempt_ms},
                              "apiserver": {"request_ms_mean": {"create_pod": create_ms, "bind_pod": bind_ms}},
                              "etcd_object_bytes": {"pod": 2000.0, "node": 2828.0, "lease": 513.0}}}


def test_a_line_through_two_scales_splits_a_fixed_and_a_per_node_cost():
    assert line([32, 64], [10.0, 12.0]) == pytest.approx((8.0, 0.0625))


def test_one_scale_gives_the_whole_cost_as_fixed():
    assert line([32], [5.9]) == (5.9, 0.0)


def test_kube_apiserver_latency_is_the_median_and_the_attempt_histogram_is_no_cycle_cost():
    # scheduler_scheduling_attempt_duration_seconds ends with the asynchronous bind in 1.36: it is
    # not the serial cycle, whose costs come from the cost curve (fakes/kube/costcurve.py)
    runs = [(Case("s.yaml", 32, "fit"), kube_result(10.0, 4.0, 3.0)),
            (Case("s.yaml", 64, "fit"), kube_result(12.0, 6.0, 2.0)),
            (Case("s.yaml", 64, "fit"), kube_result(12.0, 20.0, 1.0))]
    m = extract("kube", runs)
    assert ("kube", "cycle_base_ms") not in m and ("kube", "cycle_per_node_us") not in m
    assert m[("control_plane", "create_ms")][0] == 6.0
    assert m[("control_plane", "write_ms")][0] == 2.0
    assert m[("control_plane", "node_bytes")][0] == 2828.0


def test_a_profile_remeasured_from_one_run_takes_its_costs_and_keeps_what_was_fitted():
    local = load_profile("local")
    here = remeasured(local, "kube", Case("s.yaml", 32, "fit"), kube_result(5.9, 4.4, 3.0))
    for cycle in ("cycle_base_ms", "cycle_per_node_us", "score_per_node_us"):     # measured at scale
        assert here.params["kube"][cycle].value == local.params["kube"][cycle].value
    assert here.params["control_plane"]["create_ms"].value == 4.4
    assert here.params["control_plane"]["write_ms"].value == 3.0
    for fitted in ("observe_ms", "release_ms"):
        assert here.params["kube"][fitted].value == local.params["kube"][fitted].value
    assert local.params["control_plane"]["create_ms"].value != 4.4     # the shipped profile is untouched


def test_a_run_without_component_metrics_leaves_the_profile_as_it_was():
    local = load_profile("local")
    here = remeasured(local, "volcano", Case("s.yaml", 32, "fit"), {"control_plane": {}})
    assert here.params == local.params


def test_the_real_clients_pace_is_re_measured_like_the_apiserver_latencies():
    runs = [(Case("s.yaml", 32, "fit"), {"control_plane": {**kube_result(1.0, 4.0, 3.0)["control_plane"],
                                                           "client_pace_ms": pace}}) for pace in (12.0, 20.0, 16.0)]
    assert extract("kube", runs)[("kube", "client_create_ms")][0] == 16.0


def test_a_volcano_run_re_measures_what_a_podgroup_update_costs_the_apiserver():
    def result(pg_ms):
        api = {"request_ms_mean": {"create_pod": 4.0, "bind_pod": 3.0, "update_podgroup": pg_ms}}
        return {"control_plane": {"apiserver": api}}
    runs = [(Case("s.yaml", 500, "held_out"), result(15.0)), (Case("s.yaml", 500, "held_out"), result(39.0)),
            (Case("s.yaml", 500, "held_out"), result(20.0))]
    m = extract("volcano", runs)
    assert m[("volcano", "podgroup_update_ms")][0] == 20.0
    assert "PUT podgroups" in m[("volcano", "podgroup_update_ms")][1]
    assert ("volcano", "podgroup_update_ms") not in extract("volcano", [(Case("s.yaml", 500, "fit"), result(None))])
