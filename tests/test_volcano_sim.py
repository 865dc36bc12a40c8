"""Simulated Volcano mechanisms: controller and sessions, gang, proportion, drf, preempt, reclaim.

The timed tests fix the costs so every number can be worked by hand: a session costs 100 ms,
an apiserver write 10 ms, a create 20 ms, observation is instant.
"""
import numpy as np
import pytest

from fakes.volcano.sim import water_fill
from loadgen.model.events import Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction
from support.simkit import job, sim

TIMED = {"schedulers.volcano.observe_ms": 0, "schedulers.volcano.session_base_ms": 100,
         "schedulers.volcano.session_per_node_us": 0, "schedulers.volcano.session_per_task_us": 0,
         "schedulers.volcano.reject_per_node_us": 0, "schedulers.volcano.feasible_per_node_us": 0,
         "control_plane.write_ms": 10, "control_plane.create_ms": 20}
DEFAULT_PLUGINS = ["gang", "priority", "proportion", "drf", "binpack", "predicates", "nodeorder"]


def gang(i, members, t=0.0, dur=100.0, tenant="a", priority=0, min_available=None):
    return Job(id=i, tenant=tenant, queue=f"q-{tenant}", cls="small", members=members, gpus_per_member=8,
               duration_s=dur, submit_s=t, min_available=min_available or members, cpus_per_member=96,
               priority=priority)


def bound(events, job_id=None):
    return [(round(e.t, 3), e.job_id, e.members) for e in events
            if e.kind is Kind.BOUND and (job_id is None or e.job_id == job_id)]


def test_pods_are_created_after_one_session_enqueues_and_bound_by_a_later_one():
    # vcjob created at 0.2, returns 0.22; the controller's PodGroup create returns 0.24. Sessions
    # run at 0, 1.1, 2.21 (1 s period after each 100 ms session, plus 10 ms to write the status
    # the session changed). 1.1: enqueue -> Inqueue written at 1.21 -> the controller's pod
    # creates return at 1.23. 2.21: allocate; the binds go out at 2.31 and land at 2.32.
    t, rec, events = sim("volcano", [job(0, 2, t=0.2)], nodes=4, end=100, overrides=TIMED)
    assert rec.admit[0] == pytest.approx(2.32)
    assert bound(events) == [(2.32, 0, 2)]
    assert t.session_ms[:2] == pytest.approx([110.0, 110.0])


def test_a_slow_session_delays_the_next_one():
    # 1 s per pending task: the allocate session at 2.21 sees two pods and lasts 2.1 s (+10 ms
    # to write the PodGroup Running), so the next session starts at 4.32 + 1 = 5.32, not on a
    # 1.1 s grid. The second job (submitted 2.3) is enqueued there, its pod exists at 5.45, and
    # the session at 6.43 (1.1 s for its one pending task) binds it at 7.53 + 0.01.
    over = {**TIMED, "schedulers.volcano.session_per_task_us": 1e6}
    t, rec, _ = sim("volcano", [job(0, 2, t=0.2), job(1, 1, t=2.3)], nodes=4, end=100, overrides=over)
    assert list(rec.admit) == pytest.approx([4.32, 7.54])
    assert t.session_ms == pytest.approx([110.0, 2110.0, 110.0, 1110.0])


def test_the_job_controller_creates_pods_through_its_rate_limiter():
    # controller qps 2, burst 1: the job's status update takes the only token (0.22), the PodGroup
    # create waits until 0.72 (returns 0.74); after Inqueue (1.21) the four pod creates go out at
    # 1.22, 1.72, 2.22 and 2.72. The session at 2.21 sees two pods, fewer than minAvailable; the
    # one at 3.31 binds.
    over = {**TIMED, "schedulers.volcano.controller_qps": 2, "schedulers.volcano.controller_burst": 1}
    t, rec, _ = sim("volcano", [job(0, 4, t=0.2)], nodes=4, end=100, overrides=over)
    assert rec.admit[0] == pytest.approx(3.42)
    assert t.session_ms == pytest.approx([110.0, 100.0, 110.0])


@pytest.mark.parametrize("workers, free", [(1, [0.11]), (3, [0.05, 0.05, 0.05]), (2, [0.08, 0.05])])
def test_a_sync_holds_its_controller_worker_until_its_last_call_returns(workers, free):
    # Three vcjobs return at 0.02. Each job's first sync is its status update (10 ms) and then its
    # PodGroup create (20 ms), one after the other on the job's worker (id modulo workers): 30 ms
    # a job, so one worker is free at 0.02 + 3 x 0.03, two at 0.08 (jobs 0 and 2) and 0.05.
    over = {**TIMED, "schedulers.volcano.controller_workers": workers}
    t, _, _ = sim("volcano", [job(i, 1, gpus=1) for i in range(3)], nodes=4, end=0.5, overrides=over)
    assert t.worker_free == pytest.approx(free)


@pytest.mark.parametrize("cores, idle, per_job_ms, free, short", [
    (0, 0, 0, 0.05, None),     # no cores given: a control plane with machines of its own
    (2, 0, 150, 0.08, 2),      # the vcjob's create asks 1.5 cores over the 0.1 s window: half a core left
    (2, 1.5, 0, 0.08, 2),      # the stack's idle demand alone leaves half a core
    (2, 0.9, 0, 0.05, 0),      # 1.1 cores left: a call's one core is there
    (2, 0, 50, 0.05, 0),       # the create asks 0.5 cores: 1.5 left
])
def test_a_controller_call_takes_longer_when_the_rest_of_the_control_plane_holds_the_cores(
        cores, idle, per_job_ms, free, short):
    # The vcjob returns at 0.02 and its sync makes two calls on the one worker: the status update
    # (10 ms) and the PodGroup create (20 ms), free at 0.05 on a quiet machine. With half a core
    # left for a call that uses one (REQUEST_CORES), both take twice as long: 0.02 + 0.02 + 0.04.
    over = {**TIMED, "schedulers.volcano.controller_workers": 1, "control_plane.cores": cores,
            "control_plane.idle_cores": idle, "control_plane.pod_cpu_ms": per_job_ms}
    t, _, _ = sim("volcano", [job(0, 1, gpus=1)], nodes=4, end=0.5, overrides=over)
    assert t.worker_free == pytest.approx([free])
    assert t.control_plane().get("controller_calls_short_of_cores") == short


def test_one_worker_makes_a_burst_of_jobs_wait_for_each_others_syncs():
    # 1 s per call: with one worker, job 2's first sync starts when jobs 0 and 1 have had theirs
    # (2 s each), so its PodGroup exists only at 1 + 3 x 2 = 7 s, and it is enqueued and bound
    # sessions later than with a worker per job.
    slow = {**TIMED, "control_plane.write_ms": 1000, "control_plane.create_ms": 1000}
    admit = {}
    for workers in (1, 3):
        over = {**slow, "schedulers.volcano.controller_workers": workers}
        _, rec, _ = sim("volcano", [job(i, 1, gpus=1) for i in range(3)], nodes=4, end=100, overrides=over)
        admit[workers] = list(rec.admit)
    assert admit[3][0] == admit[3][2] and admit[1][2] > admit[1][0] + 3.0


def test_closing_a_session_writes_podgroup_statuses_sixteen_at_a_time():
    t, _, _ = sim("volcano", [job(i, 1, gpus=1) for i in range(17)], nodes=4, end=100, overrides=TIMED)
    assert t.session_ms[0] == pytest.approx(100 + 2 * 10)     # 17 PodGroups Inqueue: two rounds


def test_the_gang_is_admitted_once_min_available_members_are_bound():
    # 4 nodes, 2 held until ~52 s: the 4-member job with minAvailable 2 starts on the two free
    # ones; its other two members follow once the first job is gone.
    jobs = [gang(0, 2, dur=50), gang(1, 4, min_available=2, dur=1000)]
    _, rec, events = sim("volcano", jobs, nodes=4, end=200, overrides=TIMED)
    assert rec.admit[1] == pytest.approx(2.32)
    assert [m for _, _, m in bound(events, 1)] == [2, 4]


def test_volcano_gang_is_atomic():
    jobs = [job(0, 3, dur=100), job(1, 3, dur=100)]
    _, rec, events = sim("volcano", jobs, nodes=4, end=1000)
    assert all(e.members == 3 for e in events if e.kind is Kind.BOUND)
    assert rec.partial_gpu_s == 0 and not np.isnan(rec.admit).any()
    assert rec.admit[1] >= rec.finish[0]


def test_volcano_session_period_sets_latency():
    _, rec, _ = sim("volcano", [job(0, 1, gpus=1, t=0.2)], end=100,
                    overrides={"schedulers.volcano.schedule_period_s": 5.0})
    assert rec.admit[0] >= 10.0                # enqueued in one session, bound in the next


def test_volcano_queue_capability_is_respected():
    jobs = [job(i, 2, dur=100, tenant="a") for i in range(3)] + [job(9, 2, dur=100, tenant="b")]
    t, rec, events = sim("volcano", jobs, nodes=16, end=50,
                         overrides={"schedulers.volcano.queues": {"weights": {}, "capability_gpus": {"a": 32}}})
    admitted_a = [i for i in range(3) if not np.isnan(rec.admit[i])]
    assert len(admitted_a) == 2 and not np.isnan(rec.admit[3])
    assert t.counters["enqueue_rejected_capability"] > 0


def test_proportion_water_filling():
    d = water_fill(100, {"a": 1, "b": 1, "c": 2}, {"a": 10, "b": 100, "c": 100})
    assert d == pytest.approx({"a": 10, "b": 30, "c": 60})


def test_drf_gives_a_freed_node_to_the_elastic_job_holding_less():
    # Pinned nodes free up at 10, 20, 30 and 40 s. Two elastic jobs (3 members, minAvailable 1)
    # take one node each (the one not yet ready goes first, gang's order), then the node freed at
    # 30 s goes to the older one. At 40 s drf orders by the job's dominant share: the job holding
    # one node gets it; without drf, creation time gives it to the older job again.
    pins = [ChaosAction(0, "prefill", {"placements": [[n, 8]], "duration_s": d})
            for n, d in ((0, 10), (1, 20), (2, 30), (3, 40), (4, None), (5, None))]
    jobs = [gang(1, 3, min_available=1, dur=1000), gang(2, 3, t=15, min_available=1, dur=1000)]
    _, _, with_drf = sim("volcano", jobs, nodes=6, end=100, chaos=pins, overrides=TIMED)
    no_drf = {**TIMED, "schedulers.volcano.plugins": [p for p in DEFAULT_PLUGINS if p != "drf"]}
    _, _, without = sim("volcano", jobs, nodes=6, end=100, chaos=pins, overrides=no_drf)
    assert [(j, m) for _, j, m in bound(with_drf)] == [(1, 1), (2, 1), (1, 2), (2, 2)]
    assert [(j, m) for _, j, m in bound(without)] == [(1, 1), (2, 1), (1, 2), (1, 3)]


def test_reclaim_evicts_a_queue_above_its_deserved_share_for_one_below():
    # Queue b holds the whole fleet; queue a's 2-node gang makes both deserve 16 GPUs. With
    # reclaim, b's job (above its share) is evicted and restarts whole once a's job is done;
    # without it (the default actions) a waits for b's job to finish.
    jobs = [gang(0, 4, dur=1000, tenant="b"), gang(1, 2, t=5, tenant="a")]
    actions = {**TIMED, "schedulers.volcano.actions": ["enqueue", "allocate", "reclaim", "backfill"]}
    t, rec, events = sim("volcano", jobs, nodes=4, end=3000, overrides=actions)
    assert [(e.job_id, e.reason) for e in events if e.kind is Kind.EVICTED] == [(0, "reclaimed")]
    assert rec.admit[1] < 10 and t.counters["reclaim_victims"] == 1
    assert rec.readmission and rec.readmission[0] > rec.finish[1] - rec.admit[1]
    _, rec, _ = sim("volcano", jobs, nodes=4, end=3000, overrides=TIMED)
    assert rec.admit[1] > rec.finish[0]


def test_preempt_within_a_queue_where_gang_spares_rigid_gangs_and_drf_picks_the_victim():
    # Gang (first tier) refuses victims whose job would fall below minAvailable, so for rigid
    # gangs the second tier decides: drf evicts a job whose share, one task less, is still at
    # least the preemptor's. A 2-node job of queue a is evicted for queue a's 1-node job; a job of
    # another queue is not (preempt stays within the queue). The third node lets the queue enqueue
    # the preemptor at all: enqueue admits no more than the cluster holds.
    actions = {**TIMED, "schedulers.volcano.actions": ["enqueue", "allocate", "preempt", "backfill"]}
    same = [gang(0, 2, dur=1000), gang(2, 1, dur=1000, tenant="b"), gang(1, 1, t=5, priority=10)]
    t, rec, events = sim("volcano", same, nodes=3, end=3000, overrides=actions)
    assert [(e.job_id, e.reason) for e in events if e.kind is Kind.EVICTED] == [(0, "preempted")]
    assert rec.admit[2] < 10 and t.counters["preempt_victims"] == 1
    other = [gang(0, 2, dur=1000, tenant="c"), gang(2, 1, dur=1000, tenant="b"), gang(1, 1, t=5, priority=10)]
    t, rec, events = sim("volcano", other, nodes=3, end=3000, overrides=actions)
    assert not [e for e in events if e.kind is Kind.EVICTED] and rec.admit[2] > 1000


def test_priority_picks_the_victim_only_when_gang_is_not_in_the_first_tier():
    # A 1-node low-priority job: drf spares it (one task less its share is zero, below the
    # preemptor's). Without gang, priority alone is the first tier and names it, so it is evicted;
    # with the default tiers gang names nothing, the first tier stays undecided and drf refuses.
    actions = {**TIMED, "schedulers.volcano.actions": ["enqueue", "allocate", "preempt", "backfill"]}
    jobs = [gang(0, 1, dur=1000), gang(2, 2, dur=1000, tenant="b"), gang(1, 1, t=5, priority=10)]
    no_gang = {**actions, "schedulers.volcano.plugins": [p for p in DEFAULT_PLUGINS if p != "gang"]}
    _, rec, events = sim("volcano", jobs, nodes=3, end=3000, overrides=no_gang)
    assert [(e.job_id, e.reason) for e in events if e.kind is Kind.EVICTED] == [(0, "preempted")]
    assert rec.admit[2] < 10
    _, rec, events = sim("volcano", jobs, nodes=3, end=3000, overrides=actions)
    assert not [e for e in events if e.kind is Kind.EVICTED] and rec.admit[2] > 1000


def test_every_session_after_a_placement_pays_for_the_tasks_left_running():
    # Job 0's two pods are placed by the session at 2.21 (its open saw none running). From the next
    # session on, the snapshot holds them: 2 x 100 ms more per session while they run (100 s), so
    # the sessions that enqueue job 1 (submitted at 3.0) at 3.32 and place it at 4.63 (not 4.43)
    # last 310 ms, and job 1 is admitted 0.4 s later.
    jobs = [job(0, 2, t=0.2), job(1, 1, t=3.0)]
    base, base_rec, _ = sim("volcano", jobs, nodes=4, end=50, overrides=TIMED)
    over = {**TIMED, "schedulers.volcano.session_per_running_task_us": 1e5}
    t, rec, _ = sim("volcano", jobs, nodes=4, end=50, overrides=over)
    assert [s for s, _, _ in t.session_log] == pytest.approx([1.1, 2.21, 3.32, 4.63])
    assert [round(a - b, 6) for a, b in zip(t.session_ms, base.session_ms)] == [0, 0, 200, 200]
    assert t.running_tasks == 3
    assert list(base_rec.admit) == pytest.approx([2.32, 4.54])
    assert list(rec.admit) == pytest.approx([2.32, 4.94])


def test_the_job_updater_writes_each_podgroup_when_its_pods_start_running_at_podgroup_update_ms_a_write():
    # 17 one-pod jobs: the session at 1.1 enqueues them (17 PodGroup writes: two rounds of 16 at
    # 50 ms, 100 + 100 ms) and the one at 2.3 places them (17 more, Running). Their binds land
    # at 2.51; the next session with work (job 17, submitted at 4.0) is at 4.6 and writes the 17
    # PodGroups whose status.running changed beside job 17's Inqueue: 18, two rounds again. 5.8
    # places job 17: one write. 17 + 17 + 18 + 1 = 53 PUT podgroups.
    jobs = [job(i, 1, gpus=1, t=0.2) for i in range(17)] + [job(17, 1, gpus=1, t=4.0)]
    over = {**TIMED, "schedulers.volcano.podgroup_update_ms": 50}
    t, rec, _ = sim("volcano", jobs, nodes=8, end=50, overrides=over)
    assert [(round(s, 3), round(ms, 3)) for s, ms, _ in t.session_log] == [(1.1, 200.0), (2.3, 200.0), (4.6, 200.0),
                                                                          (5.8, 150.0)]
    assert t.counters["podgroup_updates"] == 53
    assert rec.admit[17] == pytest.approx(5.91)


def test_a_profile_without_a_podgroup_update_cost_charges_the_apiserver_write():
    t, _, _ = sim("volcano", [job(i, 1, gpus=1) for i in range(17)], nodes=4, end=100, overrides=TIMED)
    assert t.pg_update_s == pytest.approx(0.010)
