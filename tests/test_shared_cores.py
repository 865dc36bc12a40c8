"""The machine's cores shared by kube-scheduler's loop and the rest of the control plane (fakes/sim/cores.py),
the scheduler_perf CPU readings it is fitted on (fakes/kube/schedperf.py) and its calibration
(loadgen/calibration/shared_cores.py)."""
import json

import numpy as np
import pytest

from fakes.kube import schedperf
from fakes.sim.cores import SharedCores
from loadgen.calibration import shared_cores
from support.simkit import job, sim


def test_a_cycle_gets_the_cores_the_others_leave():
    # 10 pods at t=0 cost the others 10 x 10 ms over a 0.1 s window: 1 core, plus 0.5 idle. A cycle
    # that uses 1 core gets the 0.5 left of 2: twice its quiet time. Once the window has passed,
    # only the idle 0.5 is asked for and the cycle has its core.
    cores = SharedCores(cores=2, idle_cores=0.5, pod_cpu_ms=10, window_s=0.1)
    cores.placed(0.0, pods=10)
    assert cores.others(0.05) == pytest.approx(1.5)
    assert cores.stretch(0.05, 1.0) == pytest.approx(2.0)
    assert cores.stretch(0.1, 1.0) == 1.0
    assert cores.stretches == 1


def test_a_cycle_is_never_starved_outright():
    cores = SharedCores(cores=2, pod_cpu_ms=10, window_s=0.1)
    cores.placed(0.0, pods=100)                   # 10 cores asked for on a 2-core machine
    assert cores.stretch(0.0, 1.0) == pytest.approx(1 / 0.05)


def test_no_cores_means_a_control_plane_with_machines_of_its_own():
    cores = SharedCores(cores=0, idle_cores=5, pod_cpu_ms=1000)
    cores.placed(0.0, pods=100)
    assert not cores.on and cores.stretch(0.0, 1.0) == 1.0
    assert SharedCores.from_config({}).on is False


QUIET = {"schedulers.kube.cycle_base_ms": 1.0, "schedulers.kube.cycle_per_node_us": 0,
         "schedulers.kube.score_per_node_us": 0, "schedulers.kube.filter_fail_us": 0,
         "schedulers.kube.cycle_sigma": 0, "schedulers.kube.observe_ms": 0, "schedulers.kube.client_create_ms": 0,
         "schedulers.kube.api_qps": 5000.0, "schedulers.kube.api_burst": 5000,
         "control_plane.create_ms": 0.0, "control_plane.write_ms": 0.0}
SHARED = {**QUIET, "control_plane.cores": 2.0, "control_plane.idle_cores": 0.0, "control_plane.pod_cpu_ms": 3.0,
          "schedulers.kube.cycle_cores": 1.0}


def _burst_rate(overrides: dict, pods: int = 3000) -> tuple[float, object]:
    jobs = [job(i, 1, gpus=1, dur=1e6) for i in range(pods)]
    target, rec, _ = sim("kube", jobs, nodes=pods // 8 + 1, end=600, overrides=overrides)
    admit = np.sort(rec.admit)
    return (pods - 1) / (admit[-1] - admit[0]), target


def test_a_loop_never_short_of_pods_settles_where_the_machine_is_full():
    # quiet: one 1 ms cycle a pod, 1,000 pods/s. Shared: each pod also costs the others 3 ms of CPU,
    # so 2 cores hold 2 / (1 x 1 ms + 3 ms) = 500 pods/s
    quiet, _ = _burst_rate(QUIET)
    assert quiet == pytest.approx(1000, rel=0.01)
    shared, target = _burst_rate(SHARED)
    assert shared == pytest.approx(500, rel=0.03)
    assert target.control_plane()["scheduling_cycle_ms_mean"] == pytest.approx(2.0, rel=0.03)


def test_the_window_the_others_demand_is_averaged_over_moves_the_rate_under_2_percent(monkeypatch):
    import fakes.sim.cores as mod
    rates = []
    for window in (0.05, 0.2):
        monkeypatch.setattr(mod, "WINDOW_S", window)
        rates.append(_burst_rate(SHARED)[0])
    assert rates[0] == pytest.approx(rates[1], rel=0.02)


def test_a_light_load_leaves_every_cycle_at_its_quiet_cost():
    # 5 pods a second cost the others 15 ms of CPU a second: the cycle's core is always there
    jobs = [job(i, 1, gpus=1, t=i / 5, dur=1e6) for i in range(100)]
    target, _, _ = sim("kube", jobs, nodes=20, end=600, overrides=SHARED)
    cp = target.control_plane()
    assert cp["cycles_short_of_cores"] == 0 and cp["scheduling_cycle_ms_mean"] == pytest.approx(1.0)


def _klog(hms: str, pod: str) -> str:
    return (f'I1207 {hms}   12 schedule_one.go:314] "Successfully bound pod to node" pod="{pod}" node="n1" '
            'evaluatedNodes=230 feasibleNodes=230\n')


KLOG = (_klog("07:31:02.250000", "init-ns/p-1") + _klog("07:31:03.500000", "measured-ns/p-2")
        + _klog("07:31:02.750000", "measured-ns/p-1"))


def test_the_measured_pods_bind_times_come_from_the_schedulers_log():
    times = schedperf.bound_times(KLOG, "measured-ns", year=2026)
    assert len(times) == 2 and times[1] - times[0] == pytest.approx(0.75)


def test_the_cpu_a_measured_pod_cost_is_read_between_the_nearest_readings():
    # readings every 0.5 s; the benchmark's CPU grows 1.9 s a second, the machine's 2.0
    samples = [(100.0 + 0.5 * i, 10.0 + 0.95 * i, 20.0 + 1.0 * i) for i in range(10)]
    win = schedperf.window_cpu(samples, 100.9, 103.1, pods=760)
    assert win == {"seconds": 2.0, "pods": 760, "pods_per_s": 345.5, "benchmark_cores": 1.9,
                   "machine_cores": 2.0, "cpu_ms_per_pod": 5.0}
    assert schedperf.window_cpu(samples[:1], 100.0, 101.0, pods=10) is None


def test_the_line_is_cpu_per_pod_against_the_quiet_cycle():
    assert shared_cores.fit_line([1.5, 3.5], [4.5, 6.5]) == (pytest.approx(1.0), pytest.approx(3.0))
    with pytest.raises(ValueError, match="cycles differ"):
        shared_cores.fit_line([2.0, 2.0], [4.0, 5.0])


def _burst_file(path, rate, cores, idle_machine, idle_sched):
    path.write_text(json.dumps({"metrics": {"kwok": {
        "idle_cores": {"machine": idle_machine, "kube-scheduler": idle_sched},
        "burst": {"bound_per_s": rate, "cores_while_creating": {**cores, "kube-scheduler": 0.5}}}}}))


def test_the_kwok_stacks_cost_per_pod_is_its_other_components_cores_over_binds_per_second(tmp_path):
    _burst_file(tmp_path / "burst-500n-new.json", 100.0, {"kube-apiserver": 0.5, "etcd": 0.2, "generator": 0.1},
                0.2, 0.01)
    _burst_file(tmp_path / "burst-2000n-new.json", 200.0, {"kube-apiserver": 1.0, "etcd": 0.2, "generator": 0.2},
                0.3, 0.02)
    _burst_file(tmp_path / "burst-10000n-new.json", 160.0, {"kube-apiserver": 0.8, "etcd": 0.16, "generator": 0.16},
                0.9, 0.0)
    kw = shared_cores.kwok_stack(tmp_path)
    assert kw["per_burst_pod_cpu_ms"] == [8.0, 7.0, 7.0]          # by fleet size: 500, 2,000, 10,000
    assert kw["pod_cpu_ms"] == 7.0 and kw["idle_cores"] == 0.28


def test_a_benchmark_file_without_cpu_readings_names_itself_and_what_to_run(tmp_path, capsys):
    (tmp_path / "bench-500Nodes.json").write_text(json.dumps({"figure": 400.0}))
    assert shared_cores.main(["--dir", str(tmp_path), "--fit", "500Nodes,2000Nodes"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "bench-500Nodes.json: runs_window" in err and "fakes.kube.schedperf --workloads 500Nodes" in err
