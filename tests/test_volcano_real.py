"""Real Volcano (vc-scheduler + vc-controller-manager) on a small KWOK cluster.

The @pytest.mark.real tests need `make k8s-bins volcano-bins` and fail (never skip) when a binary
is missing. One cluster for the module; each test uses its own tenants and waits for its jobs.
The unmarked tests at the end check the objects and configuration the adapter writes.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.target import ChaosAction, TargetContext
from support.walldriver import Driver, gang

NODES = 32
VOLCANO_PROCS = ("vc-scheduler", "vc-controller-manager", "kwok-controller")


HOLD_TAINT = {"key": "gangstorm.io/test-hold", "value": "volcano-real", "effect": "NoSchedule"}


def hold_fleet(target, held: bool) -> None:
    """Taint every node of the test's own fleet so that no pod can be placed, or lift the taint (through
    the adapter's own node patch, which carries its request timeout)."""
    for name in target.node_names:
        target._patch_node(name, {"spec": {"taints": [HOLD_TAINT] if held else None}})


def counts_every_pod(messages: dict[str, list[str]]) -> bool:
    return len(messages) == 3 and all(any("12 Pending, 12 minAvailable" in m for m in ms) for ms in messages.values())


def podgroup_messages(target, ids) -> dict[str, list[str]]:
    """vc-scheduler's condition messages on the podgroups of the given jobs, by podgroup name."""
    groups = target.custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", target.ns, "podgroups")
    prefixes = {f"g{i}" for i in ids}
    return {g["metadata"]["name"]: [c.get("message", "") for c in g.get("status", {}).get("conditions", [])]
            for g in groups["items"] if g["metadata"]["name"].split("-")[0] in prefixes}


@pytest.fixture(scope="module")
def volcano(tmp_path_factory):
    from fakes.volcano.target import RealVolcano
    run_dir = tmp_path_factory.mktemp("volcano-real")
    ctx = TargetContext(
        fleet=Fleet(nodes=NODES), seed=7, run_dir=run_dir,
        config={"schedule_period_s": 0.5, "actions": ["enqueue", "allocate", "backfill"],
                "plugins": ["gang", "priority", "proportion", "drf", "binpack", "predicates", "nodeorder"],
                "api_qps": 500, "api_burst": 1000,
                "queues": {"weights": {}, "capability_gpus": {"capped": 16}}},
        control_plane={"etcd_quota_bytes": 512 * 1024**2})
    target = RealVolcano(ctx)
    try:
        target.start()   # raises with `make k8s-bins` / `make volcano-bins` when binaries are missing
        yield target, run_dir
    finally:
        target.stop()


@pytest.mark.real
def test_gang_is_admitted_whole_or_not_at_all(volcano):
    """A 24-node gang holds the fleet; a 16-node gang behind it gets no member bound until it fits."""
    target, _ = volcano
    d = Driver(target)
    d.submit(gang(101, "atomic", members=24, gpus=8, duration_s=8, submit_s=d.now()))
    d.until(lambda: d.of(101, Kind.ADMITTED), 60, "gang 101 admitted")
    d.submit(gang(102, "atomic", members=16, gpus=8, duration_s=2, submit_s=d.now()))
    d.until(lambda: d.finished(101, 102), 90, "gangs 101 and 102 finished")

    a_done = d.of(101, Kind.FINISHED)[0].t
    b_bound = d.of(102, Kind.BOUND)
    assert b_bound and min(e.t for e in b_bound) >= a_done - 0.5, "gang 102 got members bound while it could not fit"
    assert max(e.members for e in b_bound) == 16
    assert max(e.members for e in d.of(101, Kind.BOUND)) == 24
    assert d.of(102, Kind.ADMITTED)[0].members == 16
    snap = target.snapshot(d.now())
    assert snap.partial_gangs == 0


@pytest.mark.real
def test_queue_capability_caps_running_gpus(volcano):
    """Queue 'capped' may hold 16 GPUs: of four 8-GPU jobs at most two run at a time."""
    target, _ = volcano
    d = Driver(target)
    ids = list(range(201, 205))
    for i in ids:
        d.submit(gang(i, "capped", members=1, gpus=8, duration_s=4, submit_s=d.now()))
    d.until(lambda: d.finished(*ids), 90, "capped jobs finished")
    spans = [(d.of(i, Kind.ADMITTED)[0].t, d.of(i, Kind.FINISHED)[0].t) for i in ids]
    points = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans], key=lambda p: (p[0], p[1]))
    running = peak = 0
    for _, delta in points:
        running += delta
        peak = max(peak, running)
    assert peak == 2, f"queue capability 16 GPUs should allow exactly two 8-GPU jobs at once, saw {peak}"


@pytest.mark.real
def test_evicted_member_restarts_the_whole_job(volcano):
    target, _ = volcano
    d = Driver(target)
    d.submit(gang(301, "evict", members=4, gpus=8, duration_s=6, submit_s=d.now()))
    d.until(lambda: d.of(301, Kind.ADMITTED), 60, "gang 301 admitted")
    d.events += target.chaos(ChaosAction(t=d.now(), kind="evict", params={"members": 1}), d.now())
    d.until(lambda: d.of(301, Kind.REQUEUED), 30, "gang 301 requeued after eviction")
    d.until(lambda: len(d.of(301, Kind.ADMITTED)) >= 2, 60, "gang 301 re-admitted")
    d.until(lambda: d.finished(301), 60, "gang 301 finished")
    evicted = d.of(301, Kind.EVICTED)[0]
    readmitted = d.of(301, Kind.ADMITTED)[1]
    assert readmitted.t > evicted.t and readmitted.members == 4
    cp = target.control_plane()
    assert cp["restarts"] >= 1 and cp["restart_to_readmission_s"]["n"] >= 1
    assert cp["session_ms"]["count"] > 0, cp


@pytest.mark.real
def test_proportion_starves_gangs_that_each_exceed_their_deserved_share_on_an_idle_fleet(volcano):
    """Three 12-node gangs in three queues arrive together on 32 idle nodes. Two would fit; none
    runs: proportion water-fills 256 GPUs over three requests of 96 (deserved 85.3 each), a task
    is allocatable only while its queue stays within deserved, so each gang stops at 10 of 12
    members and gang discards it, every session, for as long as all three wait (compare
    volcano-sh/volcano#4460). The simulated Volcano, given the same three gangs, does the same.
    Near the module's end: the three stay pending and would shift later tests' shares."""
    from support.simkit import sim
    target, _ = volcano
    d = Driver(target)
    ids = (401, 402, 403)
    # "Together" means: no session sees a gang while another's pods are still being created, whatever the
    # machine's speed. The job controller creates a gang's pods only once enqueue made it Inqueue, so a
    # session can see two gangs' pods and none of the third's, give those two the whole fleet as their
    # deserved share, and run them (CI, 2026-12-07). So the fleet is held (a taint no pod tolerates)
    # until vc-scheduler's own podgroup conditions count all 12 pods of every gang, then released.
    hold_fleet(target, True)
    try:
        for i, tenant in zip(ids, ("share-a", "share-b", "share-c")):
            d.submit(gang(i, tenant, members=12, gpus=8, duration_s=5, submit_s=d.now()))
        d.until(lambda: counts_every_pod(podgroup_messages(target, ids)), 300,
                "vc-scheduler's conditions count all 36 pods of the three gangs")
    finally:
        hold_fleet(target, False)
    sessions0, deadline = target.control_plane()["session_ms"]["count"], time.monotonic() + 300
    while target.control_plane()["session_ms"]["count"] < sessions0 + 20:      # ~10 s at the 0.5 s period
        assert time.monotonic() < deadline, "vc-scheduler ran fewer than 20 sessions in 300 s"
        d.until(lambda: True, 30, "one advance")
        time.sleep(0.5)
    assert [e for e in d.events if e.job_id in ids and e.kind in (Kind.BOUND, Kind.ADMITTED)] == []
    assert target.snapshot(d.now()).running_jobs == 0                 # the fleet stayed idle throughout
    why = sorted(m for ms in podgroup_messages(target, ids).values() for m in ms)
    # vc-scheduler's own words: 10 members within 85.3 GPUs deserved, the last 2 not allocatable
    assert len(why) == 3 and all(m.endswith("12 Pending, 12 minAvailable; Pending: 10 Schedulable, 2 Unschedulable")
                                 for m in why), why

    twin_jobs = [gang(i, t, members=12, gpus=8, duration_s=5, submit_s=0.0)
                 for i, t in zip(range(3), ("share-a", "share-b", "share-c"))]
    _, rec, events = sim("volcano", twin_jobs, nodes=NODES, end=600, leaf_size=NODES)
    assert [e for e in events if e.kind in (Kind.BOUND, Kind.ADMITTED)] == [] and rec.admit.size == 3
    # 5 s apart instead, two run at once (each queue's request is all it holds) and the third
    # runs when the first finishes (its queue's request drops to 0)
    _, rec, _ = sim("volcano", [gang(i, t, 12, 8, 30, submit_s=5.0 * i) for i, t in
                                zip(range(3), ("share-a", "share-b", "share-c"))], nodes=NODES, end=600,
                    leaf_size=NODES)
    admitted = rec.admit
    assert admitted[1] < admitted[0] + 30 < admitted[2]


@pytest.mark.real
def test_a_full_etcd_fails_the_job_as_kube_and_the_twin_do_with_the_apiservers_words(volcano):
    """etcd past its quota refuses the Job create; the client retries, gives up, and the job
    FAILS (etcd-nospace), as on kube and in the simulated control plane, not REJECTED. Runs after
    the others: etcd stays full until the stop test."""
    target, _ = volcano
    d = Driver(target)
    quota = 512 * 1024**2
    d.events += target.chaos(ChaosAction(t=d.now(), kind="etcd_fill",
                                         params={"bytes": 2 * quota, "object_bytes": 900 * 1024}), d.now())
    d.until(lambda: "etcd_fill" in target.figures, 180, "etcd filled")
    assert target.figures["etcd_fill"]["stopped_by"] == "etcd-nospace", target.figures["etcd_fill"]
    d.submit(gang(501, "full", members=1, gpus=8, duration_s=2, submit_s=d.now()))
    d.until(lambda: d.of(501, Kind.FAILED) or d.of(501, Kind.REJECTED), 60, "job 501 refused")
    assert [e.reason for e in d.of(501, Kind.FAILED)] == ["etcd-nospace"] and not d.of(501, Kind.REJECTED)
    assert "database space exceeded" in target.figures["first_refusal"]["etcd-nospace"]


@pytest.mark.real
def test_stop_leaves_no_process(volcano):
    from fakes.kube.cluster import COMPONENT_NAMES, leftover_processes
    target, run_dir = volcano
    assert target.vc is not None and all(p.alive() for p in target.vc.procs)
    target.stop()
    left = leftover_processes(COMPONENT_NAMES + VOLCANO_PROCS, under=Path(run_dir))
    assert left == [], left


@pytest.mark.real
def test_reclaim_takes_gpus_back_for_an_underserved_queue(tmp_path):
    """Queue 'ra' holds the whole fleet; 'rb' (same weight) submits: reclaim evicts ra's pods
    (API churn: evictions + restarts) and rb runs long before ra's jobs would have finished."""
    from fakes.kube.cluster import COMPONENT_NAMES, leftover_processes
    from fakes.volcano.target import RealVolcano
    ctx = TargetContext(fleet=Fleet(nodes=8), seed=3, run_dir=tmp_path,
                        config={"schedule_period_s": 0.5, "actions": ["enqueue", "allocate", "reclaim", "backfill"],
                                "plugins": ["gang", "priority", "proportion", "drf", "binpack", "predicates",
                                            "nodeorder"],
                                "api_qps": 500, "api_burst": 1000, "queues": {"weights": {"ra": 1, "rb": 1}}},
                        control_plane={"etcd_quota_bytes": 256 * 1024**2})
    target = RealVolcano(ctx)
    try:
        target.start()
        d = Driver(target)
        hogs = list(range(401, 409))
        for i in hogs:
            d.submit(gang(i, "ra", members=1, gpus=8, duration_s=300, submit_s=d.now()))
        d.until(lambda: all(d.of(i, Kind.ADMITTED) for i in hogs), 60, "queue ra filling the fleet")
        before = target.control_plane()["apiserver"]["requests_total"]
        for i in (411, 412):
            d.submit(gang(i, "rb", members=1, gpus=8, duration_s=3, submit_s=d.now()))
        d.until(lambda: d.finished(411, 412), 90, "queue rb admitted through reclaim")
        evicted = [e for e in d.events if e.kind == Kind.EVICTED and e.job_id in hogs]
        assert len(evicted) >= 2, "reclaim should have evicted at least two of ra's pods"
        assert all(not d.of(i, Kind.FINISHED) for i in hogs)
        cp = target.control_plane()
        assert cp["apiserver"]["requests_total"] > before
    finally:
        target.stop()
    assert leftover_processes(COMPONENT_NAMES + VOLCANO_PROCS, under=tmp_path) == []


# --- what the adapter writes (no cluster) ------------------------------------------------------
def test_scheduler_conf_names_actions_and_tiers():
    import yaml

    from fakes.volcano.controlplane import scheduler_conf
    conf = yaml.safe_load(scheduler_conf({"actions": ["enqueue", "allocate", "preempt", "reclaim", "backfill"],
                                          "plugins": ["gang", "priority", "proportion", "binpack"],
                                          "gpu_weight": 5}))
    assert conf["actions"] == "enqueue, allocate, preempt, reclaim, backfill"
    assert [p["name"] for p in conf["tiers"][0]["plugins"]] == ["gang", "priority"]
    binpack = conf["tiers"][1]["plugins"][1]
    assert binpack["arguments"]["binpack.resources.nvidia.com/gpu"] == 5


def test_vcjob_is_one_gang_task_with_restart_on_eviction():
    from fakes.kube.pods import COMPLETE_AFTER
    from fakes.volcano.target import RealVolcano
    ctx = TargetContext(fleet=Fleet(nodes=4), config={"queues": {"weights": {"a": 3},
                                                                  "capability_gpus": {"a": 16}}},
                        control_plane={}, seed=0)
    t = RealVolcano(ctx)
    job = gang(9, "a", members=3, gpus=8, duration_s=12.5, submit_s=0)
    body = t.vcjob(job, "q-a")
    spec = body["spec"]
    assert spec["minAvailable"] == 3 and spec["schedulerName"] == "volcano" and spec["queue"] == "q-a"
    assert spec["policies"] == [{"event": "PodEvicted", "action": "RestartJob"}]
    (task,) = spec["tasks"]
    assert task["replicas"] == 3
    pod = task["template"]
    assert pod["metadata"]["annotations"][COMPLETE_AFTER] == "12.500s"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"
    q = t.queue_body(job, "q-a")
    assert q["spec"]["weight"] == 3 and q["spec"]["capability"] == {"nvidia.com/gpu": "16"}
    assert "capability" not in t.queue_body(gang(1, "b", 1, 1, 1, 0), "q-b")["spec"]


def test_queue_names_stay_valid_and_distinct_when_the_run_label_leaves_little_room():
    """On an existing cluster a queue is gs-<run label>-<tenant>; a plain cut at 60 characters
    ended one tenant's name on '-', and the apiserver refused that queue and all its jobs (422)."""
    import re

    from fakes.volcano.target import dns_name
    label = "gs-20261205-004054-existing-small-f1b4a7"
    pearson, scott = dns_name(f"{label}-pearson-moreno-and-pittm"), dns_name(f"{label}-scott-howard-and-vaughn")
    assert pearson == "gs-20261205-004054-existing-small-f1b4a7-pearson-mo-f6cc45e2"
    assert dns_name(f"{label}-pearson-moreno-and-smith") != pearson        # same 60-character prefix
    rfc1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
    for name in (pearson, scott, dns_name("a" * 61), dns_name("x-" * 40)):
        assert len(name) <= 60 and rfc1123.fullmatch(name), name
    assert dns_name("Team A/B") == "team-a-b" and dns_name("---") == "q" and dns_name("a" * 60) == "a" * 60


def test_session_histogram_from_prometheus_text():
    from fakes.volcano.metrics import scheduler_figures
    text = "\n".join([
        'volcano_e2e_scheduling_latency_milliseconds_bucket{le="5"} 3',
        'volcano_e2e_scheduling_latency_milliseconds_bucket{le="10"} 4',
        'volcano_e2e_scheduling_latency_milliseconds_bucket{le="+Inf"} 4',
        'volcano_e2e_scheduling_latency_milliseconds_sum 20',
        'volcano_e2e_scheduling_latency_milliseconds_count 4',
        'volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="5"} 2',
        'volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="+Inf"} 2',
        'volcano_action_scheduling_latency_milliseconds_sum{action="allocate"} 3',
        'volcano_action_scheduling_latency_milliseconds_count{action="allocate"} 2',
    ])
    fig = scheduler_figures(text)
    assert fig["session_ms"] == {"count": 4, "mean": 5.0, "p50_le": 5.0, "p99_le": 10.0}
    assert fig["action_ms"]["allocate"]["count"] == 2


def test_each_plugins_session_open_and_close_from_prometheus_text():
    from fakes.volcano.metrics import scheduler_figures
    name = "volcano_plugin_scheduling_latency_milliseconds"
    text = "\n".join([
        f'{name}_bucket{{OnSession="OnSessionOpen",plugin="proportion",le="+Inf"}} 4',
        f'{name}_sum{{OnSession="OnSessionOpen",plugin="proportion"}} 38',
        f'{name}_count{{OnSession="OnSessionOpen",plugin="proportion"}} 4',
        f'{name}_bucket{{OnSession="OnSessionClose",plugin="gang",le="+Inf"}} 4',
        f'{name}_sum{{OnSession="OnSessionClose",plugin="gang"}} 4.4',
        f'{name}_count{{OnSession="OnSessionClose",plugin="gang"}} 4',
        'volcano_e2e_scheduling_latency_milliseconds_count 4',
    ])
    assert scheduler_figures(text)["plugin_ms"] == {"gang.OnSessionClose": {"count": 4, "mean": 1.1},
                                                    "proportion.OnSessionOpen": {"count": 4, "mean": 9.5}}


def test_controller_client_requests_from_prometheus_text():
    from fakes.volcano.metrics import controller_figures
    text = ('rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 12\n'
            'rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 3\n'
            'rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="POST"} 0.5\n')
    assert controller_figures(text) == {"client_requests": 15, "client_rate_limiter_wait_s": 0.5}
    assert controller_figures("# HELP nothing\n")["client_requests"] is None
