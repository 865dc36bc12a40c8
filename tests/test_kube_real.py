"""Real kube-scheduler, kube-apiserver, etcd and kwok on ~100 KWOK nodes (needs `make k8s-bins`).

Drives RealKube directly (submit/advance on the wall clock), the way the wall-clock runner does.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from fakes.kube.cluster import leftover_processes
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, TargetContext
from support.kube import KUBE_DEFAULTS, drive

pytestmark = pytest.mark.real

def make_target(run_dir, nodes=100, config=None, control_plane=None, seed=1):
    from fakes.kube.target import RealKube
    ctx = TargetContext(fleet=Fleet(nodes=nodes), config={**KUBE_DEFAULTS, **(config or {})},
                        control_plane={"etcd_quota_bytes": 2 * 1024**3, "compaction_interval_s": 300,
                                       "max_requests_inflight": 400, "max_mutating_requests_inflight": 200,
                                       **(control_plane or {})},
                        seed=seed, run_dir=run_dir)
    return RealKube(ctx)


@pytest.fixture(scope="module")
def kube(bins, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("kube-real")
    target = make_target(run_dir)
    try:
        target.start()
        yield target
    finally:
        target.stop()
        assert leftover_processes(under=run_dir) == [], "control-plane processes left behind"


# Tenants as a trace may name them: a label value allows neither spaces nor '/' nor 70 characters.
TENANTS = ("t0", "Team A/B (vision)", "ml-" * 30)


def bimodal(n, seed=3, t0=0.0):
    rng = np.random.default_rng(seed)
    jobs = []
    t = t0
    for i in range(n):
        t += float(rng.exponential(0.15))
        if rng.random() < 0.8:   # small: 1 member of 1/2/4/8 GPUs, or 2-4 whole nodes
            if rng.random() < 0.7:
                members, gpm = 1, int(rng.choice([1, 2, 4, 8]))
            else:
                members, gpm = int(rng.integers(2, 5)), 8
            dur = float(rng.uniform(1.0, 3.0))
        else:                     # large gang: 8-16 whole nodes
            members, gpm, dur = int(rng.integers(8, 17)), 8, float(rng.uniform(3.0, 6.0))
        jobs.append(Job(id=i, tenant=TENANTS[i % 3], queue="default", cls="small" if members < 8 else "large",
                        members=members, gpus_per_member=gpm, duration_s=dur, submit_s=t,
                        min_available=members, cpus_per_member=4))
    return jobs


def by_kind(events, kind):
    return [e for e in events if e.kind == kind]


def test_bimodal_trace_is_admitted_bound_and_finished(kube):
    jobs = bimodal(40)

    def done(ev):
        return len({e.job_id for e in ev if e.kind in (Kind.FINISHED, Kind.REJECTED, Kind.FAILED)}) >= len(jobs)

    events, took = drive(kube, jobs, until_s=120, stop_when=done)
    admitted = {e.job_id: e.t for e in by_kind(events, Kind.ADMITTED)}
    assert set(admitted) == {j.id for j in jobs}, f"not admitted: {sorted({j.id for j in jobs} - set(admitted))}"
    assert {e.job_id for e in by_kind(events, Kind.FINISHED)} == set(admitted)
    for j in jobs:   # admission measured from the intended submit, after it, BOUND counts cumulative
        assert admitted[j.id] >= j.submit_s
        bound = [e.members for e in by_kind(events, Kind.BOUND) if e.job_id == j.id]
        assert bound == list(range(1, j.members + 1))
    cp = kube.control_plane()
    assert cp["backend"] == "real"
    assert cp["scheduler"]["sli_count"] >= sum(j.members for j in jobs)
    assert cp["apiserver"]["requests_total"] > 0 and "requests_429" in cp["apiserver"]
    assert cp["etcd"]["db_size_bytes"] > 0
    assert cp["client_pod_bind_count"] >= 0.95 * sum(j.members for j in jobs)
    lat = np.array([admitted[j.id] - j.submit_s for j in jobs])
    print(f"\nbimodal: {len(jobs)} jobs in {took:.1f}s, admission p50={np.median(lat):.3f}s "
          f"max={lat.max():.3f}s; bind check {cp.get('bind_latency_check')}")
    # Everything released: no allocation left once every job finished and pods are gone.
    time.sleep(2)
    kube.advance(took + 2)
    assert kube.snapshot(took + 2).running_jobs == 0


def test_eviction_and_node_failure_recreate_lost_members(kube):
    start = time.monotonic()

    def now():
        return time.monotonic() - start

    job = Job(id=2000, tenant="t1", queue="default", cls="small", members=2, gpus_per_member=8,
              duration_s=60.0, submit_s=now(), min_available=2, cpus_per_member=4)
    events = kube.submit(job, now())
    events += _wait(kube, start, lambda ev: by_kind(ev, Kind.ADMITTED), 30)
    assert by_kind(events, Kind.ADMITTED)
    # Eviction API on one running member: the pod is gone, recreated, the gang re-admitted.
    kube.chaos(ChaosAction(now(), "evict", {"members": 1}), now())
    events += _wait(kube, start, lambda ev: len(by_kind(events + ev, Kind.ADMITTED)) >= 2, 30)
    ev = by_kind(events, Kind.EVICTED)
    assert ev and ev[0].reason == "evicted" and ev[0].members == 1, events
    assert by_kind(events, Kind.REQUEUED) and len(by_kind(events, Kind.ADMITTED)) == 2
    # node_fail: KWOK flips the node NotReady, the NoExecute taint makes the controller-manager
    # evict its pod; the replacement lands elsewhere, and the failed node takes nothing new.
    node = sorted(kube.gangs[2000].bound.values())[0]
    idx = kube.node_index[node]
    kube.chaos(ChaosAction(now(), "node_fail", {"nodes": [idx]}), now())
    events += _wait(kube, start, lambda ev: len(by_kind(events + ev, Kind.ADMITTED)) >= 3, 60)
    lost = [e for e in by_kind(events, Kind.EVICTED) if e.reason == "node-failure"]
    assert lost, events
    assert node not in kube.gangs[2000].bound.values()
    from kubernetes import client as k8s
    n = k8s.CoreV1Api(kube.api.api_client).read_node(node)
    ready = [c.status for c in n.status.conditions if c.type == "Ready"]
    assert ready == ["False"] and any(t.key == "gangstorm.io/node-failed" for t in n.spec.taints)
    kube.chaos(ChaosAction(now(), "node_recover", {"nodes": [idx]}), now())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        n = k8s.CoreV1Api(kube.api.api_client).read_node(node)
        # (the controller-manager's own not-ready taint goes at its next node-monitor period)
        if [c.status for c in n.status.conditions if c.type == "Ready"] == ["True"] and \
                not any(t.key == "gangstorm.io/node-failed" for t in n.spec.taints or []):
            break
        time.sleep(0.5)
    assert [c.status for c in n.status.conditions if c.type == "Ready"] == ["True"]
    # Clean up: finish the job now so the next test starts from an empty fleet.
    kube.gangs[2000].finish_at = now()
    events += _wait(kube, start, lambda ev: by_kind(ev, Kind.FINISHED), 10)
    _wait(kube, start, lambda ev: kube.snapshot(now()).gpus_allocated == 0, 30)
    print(f"\nchaos: {[(round(e.t, 1), e.kind.value, e.members, e.reason) for e in events if e.kind != Kind.BOUND]}")


def test_partial_gangs_under_fragmentation(kube):
    # One GPU pinned on 90 of 100 nodes: only 10 nodes can take a whole-node (8-GPU) member.
    start = time.monotonic()

    def now():
        return time.monotonic() - start

    kube.chaos(ChaosAction(0, "prefill", {"placements": [[n, 1] for n in range(90)], "duration_s": 40}), now())
    events = _wait(kube, start, lambda ev: kube.snapshot(now()).gpus_allocated >= 90, 60)
    base = kube.snapshot(now()).gpus_allocated
    assert base == 90, base
    # Two gangs of 8 whole-node members = 16 pods for 10 usable nodes; kube-scheduler binds pods
    # one by one (no coscheduling), so at least one gang is left part-bound holding GPUs.
    gangs = [Job(id=1000 + k, tenant="t0", queue="default", cls="large", members=8, gpus_per_member=8,
                 duration_s=8.0, submit_s=now(), min_available=8, cpus_per_member=4) for k in range(2)]
    for j in gangs:
        events += kube.submit(j, now())
    events += _wait(kube, start, lambda ev: kube.snapshot(now()).gpus_allocated >= base + 80, 60)
    snap = kube.snapshot(now())
    print(f"\nfragmentation: {snap}")
    assert snap.gpus_allocated == base + 80            # every usable node taken, 6 members pending
    assert snap.partial_gangs >= 1 and snap.gpus_partial >= 8 and snap.pending_jobs >= 1
    assert snap.gpus_stranded == 90 * 7                  # 7 free GPUs on each prefilled node, useless to 8-GPU members
    last_bound = {}
    for e in by_kind(events, Kind.BOUND):
        last_bound[e.job_id] = e.members
    assert any(0 < m < 8 for m in last_bound.values()), last_bound
    # Prefill expires and admitted gangs finish: the stuck gang completes admission.
    # (a gang whole before the prefill expired was ADMITTED in the events so far: count those too)
    events += _wait(kube, start, lambda ev: len({e.job_id for e in by_kind(events + ev, Kind.ADMITTED)}) >= 2, 90)
    print(f"both gangs admitted {now():.1f} s after the prefill (which holds for 40 s)")
    assert {e.job_id for e in by_kind(events, Kind.ADMITTED)} == {1000, 1001}


def test_etcd_quota_nospace_then_recovery(bins, tmp_path):
    quota = 48 * 1024**2
    target = make_target(tmp_path, nodes=20, control_plane={
        "etcd_quota_bytes": quota, "client_retry_s": 0.5, "submit_timeout_s": 4.0})
    try:
        target.start()
        start = time.monotonic()

        def now():
            return time.monotonic() - start

        target.chaos(ChaosAction(0, "etcd_fill", {"bytes": 4 * quota, "object_bytes": 900 * 1024}), now())
        _wait(target, start, lambda ev: "etcd_fill" in target.figures, 120)   # runs on the chaos thread
        fill = target.figures["etcd_fill"]
        assert fill["stopped_by"] == "etcd-nospace", fill
        alarms = target.cluster.etcdctl("alarm", "list").stdout
        assert "NOSPACE" in alarms
        job = Job(id=1, tenant="t0", queue="default", cls="small", members=2, gpus_per_member=8,
                  duration_s=1.0, submit_s=now(), min_available=2, cpus_per_member=4)
        events = target.submit(job, now())
        events += _wait(target, start, lambda ev: by_kind(ev, Kind.FAILED), 30)
        failed = by_kind(events, Kind.FAILED)   # creates refused, retried, given up after 4 s
        assert failed and failed[0].reason == "etcd-nospace", events
        assert not by_kind(events, Kind.SUBMITTED)
        assert target.figures.get("create_refused_etcd-nospace", 0) >= 2
        assert "database space exceeded" in target.figures["first_refusal"]["etcd-nospace"]   # the apiserver's words

        target.chaos(ChaosAction(0, "etcd_recover", {}), now())
        _wait(target, start, lambda ev: "etcd_recover" in target.figures, 120)
        rec = target.figures["etcd_recover"]
        assert "NOSPACE" not in rec["alarms_after"], rec
        print(f"\netcd quota {quota} B: filled {fill}; recovered {rec}")
        job2 = Job(id=2, tenant="t0", queue="default", cls="small", members=2, gpus_per_member=8,
                   duration_s=1.0, submit_s=now(), min_available=2, cpus_per_member=4)
        events = target.submit(job2, now())
        events += _wait(target, start, lambda ev: by_kind(ev, Kind.FINISHED), 60)
        assert by_kind(events, Kind.ADMITTED) and by_kind(events, Kind.FINISHED)
    finally:
        target.stop()
        assert leftover_processes(under=tmp_path) == [], "control-plane processes left behind"


def _wait(target, start, cond, timeout):
    """Advance until cond(the events of this wait) holds; a count over the whole test must add the
    events so far, or the wait runs out its timeout."""
    events = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events += target.advance(time.monotonic() - start)
        if cond(events):
            break
        time.sleep(0.1)
    return events


def test_stop_leaves_no_control_plane_process(kube, tmp_path_factory):
    # Last in this module: stop the shared cluster now (idempotent with the fixture's stop) and
    # check nothing this session started survives (scoped to this session's temp dirs, so a
    # cluster another run keeps on the same machine does not count).
    kube.stop()
    left = leftover_processes(under=tmp_path_factory.getbasetemp())
    assert left == [], f"left behind: {left}"


def test_a_tenant_of_any_spelling_becomes_a_valid_pod_label():
    from fakes.kube.pods import L_TENANT, job_labels, label_value
    assert label_value("Team A/B (vision)") == "Team-A-B-vision"
    assert label_value("ml-" * 30) == "ml-" * 20 + "ml"          # cut at 63, never ending on '-'
    assert label_value("pearson-moreno-and-pittm") == "pearson-moreno-and-pittm"
    assert label_value("--") == ""                                 # an empty value is a valid one
    job = Job(id=1, tenant="a b", queue="q", cls="small", members=1, gpus_per_member=1, duration_s=1, submit_s=0,
              min_available=1)
    assert job_labels(job)[L_TENANT] == "a-b"
