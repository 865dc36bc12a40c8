"""Simulated kube-scheduler mechanisms."""
import numpy as np
import pytest

from fakes.kube.sim import PodState, Scorer, num_feasible_nodes_to_find
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.target import ChaosAction
from support.simkit import job, sim


@pytest.mark.parametrize("nodes,pct,expect", [
    (50, None, 50),          # fewer than 100 nodes: all
    (1000, None, 420),       # adaptive 50 - 1000/125 = 42%
    (5000, None, 500),       # adaptive 10%
    (10000, None, 500),      # adaptive floor 5%
    (100000, None, 5000),
    (10000, 100, 10000),
    (10000, 1, 100),         # never fewer than 100
    (10000, 30, 3000),
])
def test_num_feasible_nodes_to_find(nodes, pct, expect):
    assert num_feasible_nodes_to_find(nodes, pct) == expect


def test_least_allocated_spreads_and_most_allocated_packs():
    jobs = [job(i, 1, gpus=1, t=i * 0.1, dur=10_000) for i in range(8)]
    t, _, _ = sim("kube", jobs, nodes=8, end=100)
    assert sorted(int(x) for x in t.state.free_gpus) == [7] * 8
    t, _, _ = sim("kube", jobs, nodes=8, end=100, overrides={"schedulers.kube.scoring": "most_allocated"})
    assert sorted(int(x) for x in t.state.free_gpus) == [0] + [8] * 7


def test_scores_follow_kube_schedulers_integer_arithmetic():
    # A 1-GPU, 12-CPU, 1 GiB pod on an empty node and on one with 4 GPUs, 48 CPUs and 4 GiB used.
    # LeastAllocated (cpu 1, memory 1, GPU 3): (84*100//96 + 1023*100//1024 + 3 * 7*100//8) // 5
    # = (87 + 99 + 261) // 5 = 89, and (37 + 99 + 3*37) // 5 = 49. BalancedAllocation over cpu and
    # memory (1.36: the change in balance, 50 + (50 + with - without) // 2): with the pod
    # int((1 - |12/96 - 1/1024| / 2) * 100) = 93 and int((1 - |60/96 - 5/1024| / 2) * 100) = 68,
    # without it 100 and int((1 - |48/96 - 4/1024| / 2) * 100) = 75: 50 + 43 // 2 = 71 on both.
    state = PodState(Fleet(nodes=2))
    nodes = (np.array([8, 4]), np.array([96, 48]), np.array([1024, 1020]))
    assert list(Scorer("least_allocated", 3, state, 1, 12)(*nodes)) == [89 + 71, 49 + 71]
    # balanced_allocation alone over cpu, memory and GPUs: 1 - population std of the fractions,
    # with the pod 94 and 70, without it 100 and 76: 50 + 44 // 2 = 72 on both
    assert list(Scorer("balanced_allocation", 3, state, 1, 12)(*nodes)) == [72, 72]


def test_kube_scheduler_1_34_scored_the_balance_with_the_pod_and_coscheduling_runs_on_it():
    # scheduler-plugins v0.34.7 is built on kube-scheduler 1.34.7: BalancedAllocation over cpu and
    # memory is int((1 - |12/96 - 1/1024| / 2) * 100) = 93 and int((1 - |60/96 - 5/1024| / 2) * 100) = 68;
    # alone over cpu, memory and GPUs, 1 - the population std of the fractions: 94 and 70
    from fakes.coscheduling.sim import SimCoscheduling
    from fakes.kubegang.sim import SimKubeGang
    state = PodState(Fleet(nodes=2))
    nodes = (np.array([8, 4]), np.array([96, 48]), np.array([1024, 1020]))
    assert list(Scorer("least_allocated", 3, state, 1, 12, balance_change=False)(*nodes)) == [89 + 93, 49 + 68]
    assert list(Scorer("balanced_allocation", 3, state, 1, 12, balance_change=False)(*nodes)) == [94, 70]
    assert SimCoscheduling.balance_change is False and SimKubeGang.balance_change is True


def test_balanced_allocation_alone_no_longer_spreads_since_1_36_scores_the_change_in_balance():
    # CPUs follow GPUs and memory stays almost unrequested. 1.34 scored the balance with the pod,
    # so the emptiest node won; 1.36 scores how much the pod changes it: on an empty node
    # 50 + (50 + 94 - 100) // 2 = 72, on a node holding one such pod 50 + (50 + 88 - 94) // 2 = 72,
    # a tie that selectHost breaks at random.
    state = PodState(Fleet(nodes=2))
    nodes = (np.array([8, 7]), np.array([96, 84]), np.array([1024, 1023]))
    assert list(Scorer("balanced_allocation", 3, state, 1, 12)(*nodes)) == [72, 72]


def test_a_node_whose_memory_is_requested_takes_no_more_pods():
    # Every pod asks for 1 GiB, as the real adapter's do: a 1 GiB node holds one pod whatever its GPUs.
    jobs = [job(0, 1, gpus=1, dur=100), job(1, 1, gpus=1, t=1, dur=100)]
    _, rec, _ = sim("kube", jobs, nodes=1, end=1000, overrides={"fleet.memory_gib_per_node": 1})
    assert rec.admit[1] >= rec.finish[0]
    _, rec, _ = sim("kube", jobs, nodes=1, end=1000, overrides={"fleet.memory_gib_per_node": 2})
    assert rec.admit[1] < 2


def test_a_pod_is_scheduled_only_once_its_create_returned():
    over = {"schedulers.kube.observe_ms": 0, "schedulers.kube.cycle_base_ms": 0, "schedulers.kube.cycle_per_node_us": 0,
            "schedulers.kube.score_per_node_us": 0,
            "control_plane.create_ms": 250, "control_plane.write_ms": 10}
    _, rec, events = sim("kube", [job(0, 2, gpus=1, t=1.0)], nodes=2, end=100, overrides=over)
    assert [e.t for e in events if e.kind is Kind.SUBMITTED] == [pytest.approx(1.25)]
    assert rec.admit[0] == pytest.approx(1.26)               # create returns, then the binds land


def test_bind_rate_limit_spaces_binds_at_qps():
    # 20 single-pod jobs at t=0, burst 5, qps 10: binds 6..20 wait for tokens at 10 per second.
    jobs = [job(i, 1, gpus=1, dur=1000) for i in range(20)]
    _, rec, _ = sim("kube", jobs, nodes=20, end=100,
                    overrides={"schedulers.kube.api_qps": 10, "schedulers.kube.api_burst": 5})
    lat = sorted(rec.admit - rec.submit)
    assert lat[4] < 0.1
    assert lat[19] == pytest.approx(1.5, abs=0.05)


def test_partial_gang_gpu_hours_are_integrated_exactly():
    # 4 nodes; A holds 2 until t=100. Gang B (3 nodes, t=1) binds 2 pods and waits 99 s holding
    # 16 GPUs; at t=100 B completes and gang C (t=50) takes the other node, holding 8 GPUs
    # until B ends at t=200. Partial: 16 x 99 + 8 x 100 = 2,384 GPU-seconds.
    jobs = [job(0, 2, dur=100), job(1, 3, t=1, dur=100), job(2, 3, t=50, dur=100)]
    _, rec, events = sim("kube", jobs, nodes=4, end=2000)
    assert [e.members for e in events if e.job_id == 1 and e.kind is Kind.BOUND] == [1, 2, 3]
    assert rec.partial_gpu_s == pytest.approx(16 * 99 + 8 * 100, rel=0.002)
    assert rec.partial_ever[1] and rec.partial_ever[2]


def deadlock_jobs():
    # Four 1-node jobs end 0.5 s apart and the two waiting 3-node gangs take turns: the first takes
    # the nodes freed at 10 and 10.5 (popped from the backoff queue while the active queue is empty),
    # the second, arriving at 10.7, the ones freed at 11 (its backoff already over) and 11.5 (its
    # backoff ends before the first gang's): two nodes each.
    ends = [job(i, 1, dur=d) for i, d in enumerate((10, 10.5, 11, 11.5))]
    return ends + [job(10, 3, t=1, dur=100), job(11, 3, t=10.7, dur=100)]


def test_partial_gangs_deadlock_without_gang_semantics():
    t, rec, _ = sim("kube", deadlock_jobs(), nodes=4, end=5000)
    assert np.isnan(rec.admit[4]) and np.isnan(rec.admit[5])
    assert len(t.state.holdings[10]) == 2 and len(t.state.holdings[11]) == 2
    assert rec.partial_gpu_s == pytest.approx(32 * (5000 - 12), rel=0.01)


def test_coscheduling_releases_reservations_and_admits_both():
    _, rec, _ = sim("kube", deadlock_jobs(), nodes=4, end=5000,
                    overrides={"schedulers.kube.coscheduling": True, "schedulers.kube.permit_timeout_s": 30})
    assert not any(x != x for x in rec.admit)       # both admitted
    assert rec.partial_gpu_s == 0


def test_eviction_recreates_only_the_lost_pod():
    jobs = [job(0, 4, dur=1000)]
    t, rec, events = sim("kube", jobs, nodes=4, end=3000, chaos=[ChaosAction(10, "evict", {"members": 1})])
    ev = [e for e in events if e.kind is Kind.EVICTED]
    assert ev and ev[0].members == 3            # siblings keep their pods
    assert rec.evictions[0] == 1 and rec.readmission and rec.readmission[0] < 1.0


# Costs that are not under test set to zero: every time below follows from write_ms and the
# client's and the queue's rules alone.
NO_COSTS = {"schedulers.kube.observe_ms": 0, "schedulers.kube.release_ms": 0, "schedulers.kube.cycle_base_ms": 0,
            "schedulers.kube.cycle_per_node_us": 0, "schedulers.kube.score_per_node_us": 0,
            "control_plane.create_ms": 0}


def test_the_serial_cycle_charges_filter_per_node_examined_and_score_per_node_scored():
    # 200 empty nodes: numFeasibleNodesToFind = max(200 x 48 // 100, 100) = 100 examined and scored.
    # 2 ms + 100 x 10 us + 100 x 30 us = 6 ms; the 1-GPU job's two pods take 12 ms of the loop.
    over = {**NO_COSTS, "schedulers.kube.cycle_base_ms": 2, "schedulers.kube.cycle_per_node_us": 10,
            "schedulers.kube.score_per_node_us": 30}
    t, _, _ = sim("kube", [job(0, 2, gpus=1, dur=1000)], nodes=200, end=10, overrides=over)
    assert t.cycle_ms == [pytest.approx(6.0), pytest.approx(6.0)]
    assert t.cycle_busy_s == pytest.approx(0.012)
    # a 1-node fleet: Filter examines one node, and a single feasible node is not scored
    t, _, _ = sim("kube", [job(0, 1, gpus=1, dur=1000)], nodes=1, end=10, overrides=over)
    assert t.cycle_ms == [pytest.approx(2.0 + 1 * 0.010)]


def test_a_node_filter_rejects_costs_filter_fail_us_more_than_one_it_passes():
    # 4 nodes (all examined). The gang's first 8-GPU pod: 4 pass, 4 scored: 2 + 4 x 0.01 + 4 x 0.03 ms.
    # The second: the first pod's node is full, so 1 of the 4 is rejected and 3 are scored:
    # 2 + 4 x 0.01 + 1 x 0.1 + 3 x 0.03 ms (kube-scheduler keeps a rejected node's status for the
    # cycle's diagnosis: schedule_one.go findNodesThatPassFilters).
    over = {**NO_COSTS, "schedulers.kube.cycle_base_ms": 2, "schedulers.kube.cycle_per_node_us": 10,
            "schedulers.kube.score_per_node_us": 30, "schedulers.kube.filter_fail_us": 100}
    t, _, _ = sim("kube", [job(0, 2, gpus=8, dur=1000)], nodes=4, end=10, overrides=over)
    assert t.cycle_ms == [pytest.approx(2.16), pytest.approx(2.23)]
    # without the key a rejected node costs what a passing one does
    t, _, _ = sim("kube", [job(0, 2, gpus=8, dur=1000)], nodes=4, end=10,
                  overrides={**over, "schedulers.kube.filter_fail_us": 0})
    assert t.cycle_ms == [pytest.approx(2.16), pytest.approx(2.13)]


def test_a_bind_answered_429_is_retried_by_client_go_and_never_parks_the_pod():
    # The apiserver serves 1 mutating request per second here (1 in flight x 1 s per write). The
    # pod is created at 0.3 (the second's only write); its bind lands at 1.3, after the chaos
    # write at 1.1 took second 1: 429. client-go waits Retry-After (1 s), takes a limiter token and
    # sends it again: it lands at 1.3 + 1 + 1 = 3.3, alone in its second, and binds.
    over = {**NO_COSTS, "control_plane.max_mutating_requests_inflight": 1, "control_plane.write_ms": 1000}
    fill = ChaosAction(1.1, "etcd_fill", {"bytes": 1, "object_bytes": 1})
    t, rec, _ = sim("kube", [job(0, 1, gpus=1, t=0.3, dur=1000)], nodes=1, end=100, chaos=[fill], overrides=over)
    assert rec.admit[0] == pytest.approx(3.3)
    assert t.counters["bind_retries_429"] == 1 and "bind_refused" not in t.counters
    assert t.unschedulable == {}


def test_after_ten_429_retries_the_bind_fails_into_the_error_backoff_queue():
    # 2 in flight x 2 s per write = 1 request per second; binds land 2 s after they go out. Each
    # attempt lands at 2.3 + 3i (i = 0..10: the first send and client-go's 10 retries, each sent
    # 1 s after its 429) and finds its second taken by a chaos write 0.2 s earlier. The 11th refusal
    # (32.3) is the scheduler's binding error: the pod is forgotten and backs off 1 s, aligned down
    # to the backoff queue's 1 s window: retried at 33.0, its bind lands at 35.0 and succeeds.
    over = {**NO_COSTS, "control_plane.max_mutating_requests_inflight": 2, "control_plane.write_ms": 2000}
    fills = [ChaosAction(2.1 + 3 * i, "etcd_fill", {"bytes": 1, "object_bytes": 1}) for i in range(11)]
    t, rec, _ = sim("kube", [job(0, 1, gpus=1, t=0.3, dur=1000)], nodes=1, end=100, chaos=fills, overrides=over)
    assert t.counters["bind_retries_429"] == 10 and t.counters["bind_refused"] == 1
    assert rec.admit[0] == pytest.approx(35.0)
    assert t.unschedulable == {} and "failed_attempts" not in t.counters


def test_a_bind_refused_for_nospace_backs_off_and_retries_until_etcd_recovers():
    # etcd is filled past its quota at 0.5, between the create (0.0) and the bind (it lands at 1.0):
    # NOSPACE. The apiserver answers 500 without Retry-After, so client-go does not retry: a binding
    # error, backoff 1 s (retry 2.0, refused at 3.0), 2 s (5.0, refused at 6.0), 4 s (10.0). The
    # operator recovers etcd at 6.2 + 2 s; the bind sent at 10.0 lands at 11.0 and succeeds.
    over = {**NO_COSTS, "control_plane.write_ms": 1000, "control_plane.recovery_s": 2.0,
            "control_plane.etcd_quota_bytes": 1024**2}
    chaos = [ChaosAction(0.5, "etcd_fill", {"bytes": 2 * 1024**2, "object_bytes": 100_000}),
             ChaosAction(6.2, "etcd_recover", {})]
    t, rec, _ = sim("kube", [job(0, 1, gpus=1, dur=1000)], nodes=1, end=100, chaos=chaos, overrides=over)
    assert t.counters["bind_refused"] == 3 and "bind_retries_429" not in t.counters
    assert rec.admit[0] == pytest.approx(11.0)
    assert t.unschedulable == {}


def test_a_create_burst_that_draws_429s_on_binds_still_binds_every_pod_in_minutes():
    # 4,000 one-GPU pods created at once on 2,000 nodes with the apiserver serving 4,000 mutating
    # requests per second: the creates take second 0 and the first binds are answered 429. client-go
    # retries them; none waits for a release (before: parked until the first pods ended).
    over = {"control_plane.max_mutating_requests_inflight": 40, "control_plane.write_ms": 10}
    jobs = [job(i, 1, gpus=1, dur=3600) for i in range(4000)]
    t, rec, _ = sim("kube", jobs, nodes=2000, end=7200, overrides=over)
    wait = rec.admit - rec.submit
    assert t.counters["bind_retries_429"] > 0 and "bind_refused" not in t.counters
    assert not np.isnan(wait).any() and wait.max() < 4000 / 50 + 5     # the qps-50 limiter paces them


def test_a_pod_backing_off_is_popped_at_once_when_the_active_queue_is_empty():
    # The node is taken until 1.3; the pod that failed at 1.0 would back off until 2.0, but the
    # release moves it to the backoff queue and, nothing else being active, kube-scheduler pops
    # it from there at once (SchedulerPopFromBackoffQ): bound at 1.3, not 2.0.
    over = {**NO_COSTS, "control_plane.write_ms": 0}
    jobs = [job(0, 1, dur=1.3), job(1, 1, t=1.0, dur=100)]
    t, rec, _ = sim("kube", jobs, nodes=1, end=100, overrides=over)
    assert rec.admit[1] == pytest.approx(1.3)
    assert t.counters["popped_from_backoff"] == 1


def test_a_bind_updates_the_pod_it_creates_nothing_in_etcd():
    # live bytes: the fleet's nodes and leases, plus one pod object while it runs, whatever its binds
    t, _, _ = sim("kube", [job(0, 1, gpus=1, dur=1000)], nodes=2, end=10)
    cp = t.cp
    assert cp.live_bytes == 2 * (cp.cfg["node_bytes"] + cp.cfg["lease_bytes"]) + t.pod_bytes
