"""The simulated Kueue (fakes/kueue/sim.py) and its two pure parts, quota (fakes/kueue/quota.py)
and TAS placement (fakes/kueue/tas.py), with exact numbers: every expected time is the sum of the
profile's stages the gang went through, every expected node list is BestFit's choice."""
from __future__ import annotations

import numpy as np
import pytest

from fakes.kueue.quota import FIT, NO_FIT, PREEMPT, Admitted, ClusterQueue, Cohort
from fakes.kueue.tas import place
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction
from support.simkit import sim
from support.walldriver import gang

QUOTAS = {"schedulers.kueue.queues.nominal_gpus": {"lender": 16, "borrower": 16}}


def stages(target) -> dict[str, float]:
    return {"create": target.create_s, "workload": target.create_wl_s, "cycle": target.cycle_s,
            "ungate": target.ungate_s, "pod": target.pod_s, "release": target.release_s}


def at(events, job_id: int, kind: Kind) -> list[float]:
    return [e.t for e in events if e.job_id == job_id and e.kind == kind]


# --- quota --------------------------------------------------------------------------------------
def cohort(*queues: tuple[str, int]) -> Cohort:
    c = Cohort()
    for name, nominal in queues:
        c.add(ClusterQueue(name, nominal))
    return c


def test_a_queue_borrows_what_the_cohort_leaves_idle_and_no_more():
    c = cohort(("a", 16), ("b", 16))
    a, b = c.queues["a"], c.queues["b"]
    assert (c.available(a), c.potential(a)) == (32, 32)
    assert c.mode(a, 16) == FIT
    c.admit(a, Admitted(1, "a", 16, 0, 1.0))
    assert c.mode(a, 16) == FIT and c.available(a) == 16           # the second 16 borrows b's
    c.admit(a, Admitted(2, "a", 16, 0, 2.0))
    assert a.borrowed == 16 and c.available(b) == 0
    assert c.mode(a, 8) == PREEMPT                                  # 8 <= nominal: preemption might help
    assert c.mode(a, 40) == NO_FIT                                  # above the cohort's 32
    assert c.mode(b, 16) == PREEMPT


def test_a_borrowing_limit_caps_the_maximum_capacity():
    c = Cohort()
    a = c.add(ClusterQueue("a", 16, borrowing_limit=8))
    c.add(ClusterQueue("b", 16))
    assert (c.available(a), c.potential(a)) == (24, 24)
    assert c.mode(a, 24) == FIT and c.mode(a, 32) == NO_FIT


def test_reclaim_takes_the_most_recently_admitted_borrowing_workload_and_keeps_the_rest():
    c = cohort(("a", 16), ("b", 16))
    a, b = c.queues["a"], c.queues["b"]
    for wid, since in ((1, 1.0), (2, 2.0), (3, 3.0)):
        c.admit(a, Admitted(wid, "a", 8, 0, since))
    c.admit(a, Admitted(4, "a", 8, 0, 4.0))                         # a holds 32: 16 borrowed from b
    targets = c.preemption_targets(b, 16, 0, 10.0)
    assert [t.wid for t in targets] == [4, 3]                       # newest first, until a is within nominal
    assert a.usage == 32 and b.usage == 0                           # the snapshot is left as it was
    assert c.preemption_targets(b, 24, 0, 10.0) == []               # 24 > b's nominal: no reclaim covers it


def test_reclaim_stops_at_a_queue_back_within_its_nominal_quota():
    c = cohort(("a", 16), ("b", 16))
    a, b = c.queues["a"], c.queues["b"]
    c.admit(a, Admitted(1, "a", 16, 0, 1.0))
    c.admit(a, Admitted(2, "a", 8, 0, 2.0))
    c.admit(b, Admitted(3, "b", 8, 0, 3.0))                          # a borrows 8, b uses 8 of its 16
    assert c.mode(b, 8) == PREEMPT
    assert [t.wid for t in c.preemption_targets(b, 8, 0, 10.0)] == [2]
    # 16 more would take b above its nominal quota: reclaiming never lets the reclaimer borrow
    assert c.mode(b, 16) == PREEMPT and c.preemption_targets(b, 16, 0, 10.0) == []


def test_within_its_queue_only_lower_priority_is_preempted():
    c = cohort(("a", 16), ("b", 16))
    a = c.queues["a"]
    c.admit(c.queues["b"], Admitted(9, "b", 16, 0, 0.5))             # b uses all of its own
    c.admit(a, Admitted(1, "a", 8, 0, 1.0))
    c.admit(a, Admitted(2, "a", 8, 5, 2.0))
    assert [t.wid for t in c.preemption_targets(a, 8, 3, 10.0)] == [1]
    assert c.preemption_targets(a, 8, 0, 10.0) == []                # same priority: LowerPriority refuses
    a.within_cluster_queue = "LowerOrNewerEqualPriority"            # equal priority, if queued later
    assert c.preemption_targets(a, 8, 0, 1.5) == []                 # 1 was admitted before it queued
    assert [t.wid for t in c.preemption_targets(a, 8, 0, 0.5)] == [1]


# --- TAS ----------------------------------------------------------------------------------------
LEAF = np.arange(8) // 2            # 8 nodes, 2 per leaf, 2 leaves per spine
SPINE = LEAF // 2


def test_tas_takes_the_fullest_leaf_that_still_fits():
    # leaves hold 2, 4, 1, 3 pods: the best fit for 3 is leaf 3 (3), not leaf 1 (4)
    assert place(np.array([1, 1, 2, 2, 1, 0, 2, 1]), LEAF, SPINE, 3) == [6, 6, 7]


def test_tas_goes_up_to_the_spine_when_no_leaf_fits_unless_required():
    per_node = np.array([1, 1, 1, 1, 1, 0, 1, 1])                   # leaves 2, 2, 1, 2; spines 4, 3
    assert place(per_node, LEAF, SPINE, 3) == [4, 6, 7]               # spine 1 fits 3 exactly
    assert place(per_node, LEAF, SPINE, 3, "required") is None
    assert place(per_node, LEAF, SPINE, 6) == [0, 1, 2, 3, 6, 7]      # spine 0 whole, then the best fit
    assert place(per_node, LEAF, SPINE, 8) is None


# --- the simulated Kueue --------------------------------------------------------------------------
def test_a_tenant_borrows_and_the_third_gang_waits_for_quota_not_for_nodes():
    """As the real test: the lender runs one short job, the borrower's three 2 x 8 gangs follow; one
    ClusterQueue head per cycle, so the second is admitted a cycle after the first (borrowing 16),
    and the third waits for the first's quota to come back."""
    jobs = [gang(1, "lender", 1, 8, 1.0, 0.0), *(gang(i, "borrower", 2, 8, 4.0, 5.0) for i in (2, 3, 4))]
    target, _, events = sim("kueue", jobs, nodes=4, end=200, leaf_size=2, overrides=QUOTAS)
    s = stages(target)
    admitted2 = 5.0 + s["create"] + s["workload"] + s["cycle"]          # Workload admitted
    assert at(events, 2, Kind.BOUND) == pytest.approx([admitted2 + s["ungate"], admitted2 + s["ungate"] + s["pod"]])
    # gang 3: the next cycle; kube-scheduler binds it after gang 2's two pods
    assert at(events, 3, Kind.ADMITTED) == pytest.approx([admitted2 + s["ungate"] + 3 * s["pod"]])
    finished2 = at(events, 2, Kind.ADMITTED)[0] + 4.0
    assert at(events, 4, Kind.ADMITTED) == pytest.approx(
        [finished2 + s["release"] + s["cycle"] + s["ungate"] + s["pod"]])
    q = target.kueue_figures()["queues"]
    assert q["q-borrower"]["borrowed_gpus_max"] == 16 and q["q-lender"]["borrowed_gpus_max"] == 0
    assert q["q-borrower"]["workloads_admitted"] == 3
    assert target.counters["inadmissible"] == 1 and "preemptions" not in target.counters


def test_a_lender_reclaims_its_quota_by_preempting_the_newest_borrower():
    """Queues exist from their tenant's first job: the lender's short job makes its 16 GPUs part
    of the cohort, the borrower takes all 32, the lender's gang takes its 16 back."""
    jobs = [gang(1, "lender", 1, 8, 1.0, 0.0), gang(2, "borrower", 2, 8, 100.0, 5.0),
            gang(3, "borrower", 2, 8, 100.0, 5.0), gang(5, "lender", 2, 8, 5.0, 20.0)]
    target, _, events = sim("kueue", jobs, nodes=4, end=400, leaf_size=2, overrides=QUOTAS)
    s = stages(target)
    evicted = 20.0 + s["create"] + s["workload"] + s["cycle"]           # the preempting cycle ends
    assert at(events, 3, Kind.EVICTED) == pytest.approx([evicted])
    assert [e.reason for e in events if e.job_id == 3 and e.kind == Kind.EVICTED] == ["preempted"]
    assert at(events, 2, Kind.EVICTED) == []
    admitted5 = evicted + s["cycle"] + s["ungate"] + s["pod"]
    assert at(events, 5, Kind.ADMITTED) == pytest.approx([admitted5])
    assert at(events, 3, Kind.ADMITTED)[1] == pytest.approx(admitted5 + 5.0 + s["release"] + s["cycle"] + s["ungate"]
                                                           + s["pod"])
    assert target.counters["preemptions"] == 1
    assert target.kueue_figures()["queues"]["q-borrower"]["evictions"] == 1


def test_an_evicted_member_is_replaced_and_the_workload_keeps_its_quota():
    jobs = [gang(7, "evict", 2, 8, 50.0, 0.0)]
    chaos = [ChaosAction(t=20.0, kind="evict", params={"members": 1})]
    target, _, events = sim("kueue", jobs, nodes=4, end=200, leaf_size=2, chaos=chaos,
                            overrides={"schedulers.kueue.queues.nominal_gpus": {"evict": 16}})
    s = stages(target)
    assert [e.members for e in events if e.job_id == 7 and e.kind == Kind.EVICTED] == [1]
    assert at(events, 7, Kind.ADMITTED)[1] == pytest.approx(20.0 + s["ungate"])
    assert target.kueue_figures()["queues"]["q-evict"]["workloads_admitted"] == 1   # admitted once
    assert "preemptions" not in target.counters
