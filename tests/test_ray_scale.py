"""The Ray cost curve's pieces with exact numbers: the GCS's event-loop statistics as printed, the
twin's scheduling latency on the curve's workload, the per-node costs fitted from curve files, what
makes a size this machine's limit rather than the GCS's, and the held-out burst trace."""
import pytest

from fakes.ray import gcsstats
from loadgen.calibration import heldout, raycurve
from loadgen.calibration.calibrate import with_values
from loadgen.input.profile import load as load_profile

PRINT = """[2026-12-05 12:06:41,344 I 6214 6214] (gcs_server) gcs_server.cc:1322: Main service Event stats:


Global stats: 18459 total (2 active)
Queueing time: mean = 0.40ms, max = 14.76ms, min = 0.00ms, total = 7303.99ms
Execution time:  mean = 0.63ms, total = 11636.53ms
Event stats:
\tGcsInMemoryStore.Put - 191 total (0 active), Execution time: mean = 1.02ms, total = 195.64ms, Queueing time: mean = 0.10ms, max = 14.76ms, min = 0.00ms, total = 18.76ms
\tNodeManagerService.grpc_client.PrepareBundleResources - 660 total (0 active), Execution time: mean = 7.67ms, total = 5060.84ms, Queueing time: mean = 0.00ms, max = -0.00ms, min = 9223372036854.78ms, total = 0.00ms
\tNodeManagerService.grpc_client.PrepareBundleResources.OnReplyReceived - 660 total (0 active), Execution time: mean = 0.02ms, total = 11.95ms, Queueing time: mean = 0.49ms, max = 9.96ms, min = 0.01ms, total = 320.78ms
[2026-12-05 12:06:41,344 I 6214 6214] (gcs_server) gcs_server.cc:1326: node_manager_io_context Event stats:
Event stats:
\tNodeManagerService.grpc_client.PrepareBundleResources - 40 total (0 active), Execution time: mean = 1.00ms, total = 40.00ms, Queueing time: mean = 0.00ms, max = -0.00ms, min = 9223372036854.78ms, total = 0.00ms
"""


def test_the_gcs_statistics_print_is_read_per_io_context_and_rpc_durations_are_not_busy_time():
    snap, prints = gcsstats.parse(PRINT)
    assert prints == 1 and set(snap) == {"Main service", "node_manager_io_context"}
    main = snap["Main service"]
    assert main["GcsInMemoryStore.Put"] == gcsstats.Stat(191, 195.64, 18.76)
    assert gcsstats.busy_ms(main) == pytest.approx(195.64 + 11.95)        # the call's own duration is not
    assert gcsstats.rpc_mean_ms(snap, "PrepareBundleResources") == (round(5100.84 / 700, 3), 700)


def test_two_prints_differ_by_what_happened_between_them():
    before, _ = gcsstats.parse(PRINT)
    after, _ = gcsstats.parse(PRINT.replace("660 total", "700 total").replace("total = 5060.84ms", "total = 5100.84ms"))
    d = gcsstats.diff(after, before)["Main service"]["NodeManagerService.grpc_client.PrepareBundleResources"]
    assert (d.count, d.exec_ms, d.mean_ms) == (40, pytest.approx(40.0), pytest.approx(1.0))


def test_the_twin_on_the_curve_workload_is_one_attempt_per_group():
    # 1 ms + 0.5 ms per bundle + 0.1 us per node + 10 ns per node and bundle, two 0.25 ms round trips
    prof = with_values(load_profile("local"), {
        ("ray", "gcs_base_ms"): 1.0, ("ray", "gcs_per_bundle_ms"): 0.5, ("ray", "gcs_per_bundle_sq_us"): 0.0,
        ("ray", "gcs_per_node_us"): 0.1, ("ray", "gcs_per_node_scored_ns"): 10.0, ("ray", "commit_rtt_ms"): 0.25,
        ("ray", "gcs_followup_ratio"): 0.5})
    got = raycurve.twin_stat(prof, 2000, 16, 5, "SPREAD")
    assert got == pytest.approx(1.0 + 8.0 + 0.2 + 0.32 + 0.5, abs=1e-3)


def _doc(nodes, lat, gcs=10, load=0.5):
    return {"nodes": nodes, "workload": {"groups": 10, "strategy": "SPREAD"}, "load_avg": {"before": [load, 1, 1]},
            "metrics": {"idle": {"machine_busy_pct": 20.0, "gcs_cpu_pct": gcs, "fleet_cpu_pct": 35,
                                 "driver_cpu_pct": 5},
                        "phases": [{"bundles": b, "groups": 10, "created": 10, raycurve.STAT: ms}
                                   for b, ms in lat.items()]}}


def test_a_spread_group_puts_its_bundles_evenly_on_the_nodes():
    assert [raycurve._same_node(b, 5) for b in (1, 4, 10, 12, 40)] == [1, 4, 20, 2 * 9 + 3 * 4, 320]


def test_the_per_node_costs_are_the_shared_slopes_over_sizes_the_machine_did_not_limit():
    # c_B + n x (0.5 us + 0.1 us x B): 2 ms + 1 ms per bundle apart from the nodes
    def lat(n):
        return {b: 2.0 + 1.0 * b + n * (0.5e-3 + 0.1e-3 * b) for b in (1, 4, 16)}
    docs = [_doc(n, lat(n)) for n in (500, 2000, 5000)] + [_doc(10000, {1: 99.0, 4: 99.0, 16: 99.0}, gcs=60)]
    per_node, scored, src = raycurve.node_costs(docs)
    assert per_node == pytest.approx(0.5, rel=1e-6) and scored == pytest.approx(100.0, rel=1e-6)
    assert "[10000] nodes left out" in src


def test_a_fakelet_fleet_costs_a_fixed_part_and_a_round_per_node_it_is_called(tmp_path):
    # on top of the profile's node costs: 1.5 ms (two 0.3 ms round trips and a 0.9 ms base)
    # + 2 x 0.25 ms per node called
    prof = with_values(load_profile("local"), {("ray", "gcs_per_node_us"): 0.5, ("ray", "gcs_per_node_scored_ns"): 0.0,
                                               ("ray", "commit_rtt_ms"): 0.3})
    docs = [_doc(n, {b: 1.5 + 0.5 * b + n * 0.5e-3 for b in (1, 4, 16)}) for n in (500, 2000)]
    got = raycurve.fakelet_costs(docs, tmp_path, prof)
    assert got[("ray", "commit_per_node_ms")] == pytest.approx(0.25)
    assert got[("ray", "gcs_base_ms")] + 2 * got[("ray", "commit_rtt_ms")] == pytest.approx(1.5)
    assert got[("ray", "gcs_per_bundle_ms")] == got[("ray", "gcs_per_bundle_sq_us")] == 0.0


def test_a_size_is_this_machines_limit_when_idle_its_own_fleet_took_a_core_or_the_machine_was_loaded():
    assert raycurve.machine_limit(_doc(500, {1: 2.0})) is None
    assert "load average of 1.7" in raycurve.machine_limit(_doc(500, {1: 2.0}, load=1.7))
    assert "the GCS took 60% of a core" in raycurve.machine_limit(_doc(10000, {1: 2.0}, gcs=60))
    short = _doc(500, {1: 2.0})
    short["metrics"]["phases"][0]["created"] = 9
    assert raycurve.machine_limit(short) == "not every group was created"


def test_the_burst_trace_is_the_calibration_mix_within_its_window():
    jobs = heldout.burst(600, 0.5, 60.0, 7)
    assert len(jobs) == 600 and jobs[-1].submit_s < 0.5 and {j.duration_s for j in jobs} == {60.0}
    assert {(j.members, j.gpus_per_member) for j in jobs} <= {(m, g) for m, g, _ in heldout.SMALL + heldout.LARGE}
    assert 0.10 <= sum(j.cls == "large" for j in jobs) / 600 <= 0.20
    assert jobs == heldout.burst(600, 0.5, 60.0, 7)                     # seeded
