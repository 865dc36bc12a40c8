"""What loadgen.calibration.gangcosts reads off the gang twins' fitting runs, on constructed runs:
exact means, the gang objects summed, and the client's pace only where every run recorded it."""
from loadgen.calibration.gangcosts import costs


def _run(bind_ms, workload_ms, podgroup_ms, pace_ms):
    cp = {"scheduler": {"extension_point_ms_mean": {"Bind": bind_ms}, "serial_cycle_ms_mean": 0.5,
                        "attempts_scheduled": 10, "attempts_unschedulable": 30, "attempts_error": 0,
                        "attempt_s_total": 0.04, "client_requests": 20, "client_rate_limiter_wait_s": 0.002},
          "apiserver": {"request_ms_mean": {"create_pod": 6.0, "bind_pod": 4.0, "create_workload": workload_ms,
                                            "create_podgroup": podgroup_ms}},
          "host_cpu": {"cpu_wait_share": 0.2, "busy_share": 0.5}}
    if pace_ms is not None:
        cp["client_pace_ms"] = pace_ms
    return {"control_plane": cp, "wall_s": 10.0}


def test_the_measured_costs_are_means_over_the_runs():
    found = costs("kube-gang", [_run(8.0, 3.0, 4.0, 1.25), _run(10.0, 5.0, 6.0, 1.75)])
    assert found["bind_ms"][0] == 9.0
    assert found["gang_objects_ms"][0] == 9.0          # workloads 4.0 + podgroups 5.0
    assert found["client_create_ms"][0] == 1.5
    assert "per run: 1.25, 1.75 ms" in found["client_create_ms"][1]


def test_runs_without_the_client_pace_leave_it_to_the_profile():
    found = costs("coscheduling", [_run(8.0, None, 4.0, 1.25), _run(10.0, None, 6.0, None)])
    assert "client_create_ms" not in found
    assert found["gang_objects_ms"][0] == 5.0          # coscheduling creates podgroups only
