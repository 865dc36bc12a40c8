"""The gang twins of kube-scheduler: kube-gang (native gang scheduling) and coscheduling
(scheduler-plugins), both the kube twin with gang semantics on (fakes/kubegang/sim.py)."""
import numpy as np
import pytest

from loadgen.input.scenario import from_dict
from loadgen.model.errors import UserError
from loadgen.model.events import Kind
from support.simkit import job, sim


def contended():
    # 4 nodes. Gang 0 holds 2 until t=100; gang 1 (3 nodes, t=1) does not fit in the other 2; gang 2
    # (3 nodes, t=50) neither. Vanilla kube binds 2 of gang 1 at once and holds them 99 s, then 1 of
    # gang 2 for 100 s: 16 x 99 + 8 x 100 GPU-seconds (tests/test_kube_sim.py).
    return [job(0, 2, dur=100), job(1, 3, t=1, dur=100), job(2, 3, t=50, dur=100)]


@pytest.mark.parametrize("name", ["kube-gang", "coscheduling"])
def test_a_gang_that_does_not_fit_holds_nothing_and_waits_whole(name):
    t, rec, events = sim(name, contended(), nodes=4, end=2000)
    assert rec.partial_gpu_s == 0
    # gang 1 binds its 3 members once gang 0 ends (t=100); gang 2 once gang 1 ends (t=200)
    admitted = {e.job_id: e.t for e in events if e.kind is Kind.ADMITTED}
    assert admitted[1] == pytest.approx(100.053, abs=0.001) and admitted[2] == pytest.approx(200.064, abs=0.001)
    assert [e.members for e in events if e.job_id == 1 and e.kind is Kind.BOUND] == [1, 2, 3]
    # three attempts reserved what was free and gave it back: gang 1 at t=1 (2 members), gang 2 at
    # t=50 (2) and gang 2 again at t=100, on the node gang 1 left free (1). Coscheduling retries twice
    # more: a gang its plugin rejected wakes at any Pod or PodGroup event, with no queueing hint, so
    # gang 0's binds (t=0) and gang 1's (t=100), which update their PodGroups, send gangs 1 and 2 round
    # again whether or not they fit (fakes/coscheduling/sim.py)
    cp = t.control_plane()
    assert cp["group_reverts"] == {"kube-gang": 3, "coscheduling": 5}[name] and cp.get("permit_timeouts", 0) == 0
    _, kube, _ = sim("kube", contended(), nodes=4, end=2000)
    assert kube.partial_gpu_s == pytest.approx(16 * 99 + 8 * 100, rel=0.002)


def test_a_coscheduling_gang_rejected_at_its_permit_timeout_stalls_until_an_arrival_or_the_flush():
    # A 10-node gang on 9 nodes keeps 9 reservations in Permit (10 % missing) until the timeout (60 s),
    # then waits for an event: none comes, so kube-scheduler's 5-minute flush retries it (t=360)
    t, rec, _ = sim("coscheduling", [job(0, 10, dur=100)], nodes=9, end=400)
    cp = t.control_plane()
    assert cp["permit_timeouts"] == 1 and cp["flushed"] == 1
    assert t.snapshot(400).control_plane["permit_waiting_gpus"] == 72
    # a 1-GPU job submitted at t=100 is such an event (a Pod added): the gang, older, is retried at
    # once and holds its 9 nodes in Permit again
    t, rec, _ = sim("coscheduling", [job(0, 10, dur=100), job(1, 1, gpus=1, t=100, dur=1000)], nodes=9, end=150)
    assert t.control_plane()["permit_timeouts"] == 1 and t.control_plane().get("flushed", 0) == 0
    assert t.snapshot(150).control_plane["permit_waiting_gpus"] == 72


def test_kube_gang_reverts_at_once_where_coscheduling_keeps_a_90_percent_gang_waiting_in_permit():
    # A 10-node gang on 9 free nodes: 1 member of 10 missing is 10 %, not more than coscheduling's
    # podGroupRejectPercentage (10), so its 9 reservations wait in Permit (72 GPUs held, none bound)
    # until permitWaitingTimeSeconds (60 s); kube-gang's pod-group cycle gives them back at once.
    t, _, _ = sim("kube-gang", [job(0, 10, dur=100)], nodes=9, end=30)
    assert int(t.state.free_gpus.sum()) == 72 and t.snapshot(30).control_plane["permit_waiting_gpus"] == 0
    t, _, _ = sim("coscheduling", [job(0, 10, dur=100)], nodes=9, end=30)
    assert int(t.state.free_gpus.sum()) == 0 and t.snapshot(30).control_plane["permit_waiting_gpus"] == 72
    t, rec, _ = sim("coscheduling", [job(0, 10, dur=100)], nodes=9, end=100)
    assert t.control_plane()["permit_timeouts"] == 1 and np.isnan(rec.admit[0]) and rec.partial_gpu_s == 0


def test_the_sections_default_to_their_components_own_settings():
    sc = from_dict({})
    gang, cosched = sc.scheduler_config("kube-gang"), sc.scheduler_config("coscheduling")
    assert gang["coscheduling"] and gang["permit_timeout_s"] == 300     # gangscheduling.go: 5 minutes, fixed
    assert cosched["coscheduling"] and cosched["permit_timeout_s"] == 60  # permitWaitingTimeSeconds default
    # every cost comes from the profile's own section, with a provenance
    for name in ("kube-gang", "coscheduling"):
        status = sc.model_status(name)
        assert status["profile"] == "reference", status
        assert sc.profile.params[name]["cycle_base_ms"].provenance == "sourced"


def test_the_twin_refuses_a_topology_it_does_not_model():
    with pytest.raises(UserError, match="does not model TopologyAwareWorkloadScheduling"):
        sim("kube-gang", [job(0, 2)], nodes=4, overrides={"schedulers.kube-gang.topology": "leaf"})


def test_the_ci_trace_of_the_three_new_schedulers_simulated(tmp_path):
    """The twins on the trace the real CI run uses (tests/support/gangtrace.py, test_kube_gang_real.py),
    with what issue 28 asks of it: partial-gang GPU-hours, tails by class, leaves spanned, Kueue's
    queues. Exact, since the twins are deterministic; vanilla kube beside them for the contrast."""
    import json

    from loadgen.drive.comparative import RunOptions, run
    from loadgen.input.scenario import load
    from support.gangtrace import NEW_THREE, scenario
    out = tmp_path / "run"
    run(load(str(scenario(tmp_path))), RunOptions(schedulers=["kube", *NEW_THREE], out_dir=out,
                                                  results_root=tmp_path, report=False))
    s = json.loads((out / "summary.json").read_text())["schedulers"]
    assert s["kube"]["partial_gang_gpu_hours"] == pytest.approx(0.84454, abs=1e-5)
    assert s["kube-gang"]["partial_gang_gpu_hours"] == s["coscheduling"]["partial_gang_gpu_hours"] == 0
    # Kueue admits the group whole, then kube-scheduler binds one pod every pod_bind_ms (12 ms)
    assert s["kueue"]["partial_gang_gpu_hours"] == pytest.approx(0.000298, abs=1e-6)

    def tails(name):
        return {c: (round(b["admission_s"]["p50"], 2), round(b["admission_s"]["p99"], 2), b["admission_s"]["count"])
                for c, b in s[name]["by_class"].items()}
    # the gang twins bind the 1-GPU jobs at once and gang 1 (3 nodes) when gang 0 ends; Kueue adds its
    # Workload creation (2.0 s) and ungate batch (1.1 s) to every job
    assert tails("kube") == {"large": (115.05, 220.07, 4), "small": (45.09, 165.06, 29)}
    assert tails("kube-gang") == tails("coscheduling") == {"large": (0.04, 145.06, 4), "small": (0.04, 55.05, 29)}
    assert tails("kueue") == {"large": (3.13, 166.65, 4), "small": (3.12, 59.87, 29)}
    # TAS puts a 2-node gang in one leaf; kube-scheduler's LeastAllocated spreads it over both
    spans = {n: (s[n]["placement"]["leaves_spanned"]["mean"], s[n]["placement"]["large_in_one_leaf_share"])
             for n in NEW_THREE}
    assert spans == {"kube-gang": (2.0, 0.0), "coscheduling": (2.0, 0.0), "kueue": (1.5, 0.5)}
    queues = s["kueue"]["control_plane"]["queues"]
    assert {q: (f["workloads_admitted"], f["nominal_gpus"], f["borrowed_gpus_max"]) for q, f in queues.items()} == {
        "q-a": (17, 16.0, 16.0), "q-b": (16, 16.0, 9.0)}


@pytest.mark.parametrize("name", ["kube-gang", "coscheduling"])
def test_an_evicted_member_is_replaced_alone_while_its_sibling_keeps_its_node(name):
    """Neither gang plugin restarts the gang: the replacement pod meets the gang's quorum with the
    members still bound (kube-gang: Permit counts assumed and assigned pods, ScheduledPodsCount,
    v1.36.1 gangscheduling.go; coscheduling: Permit's assigned set, v0.34.7 core.go), so it is
    bound alone, and the sibling's 8 GPUs count as a partial gang until then. Volcano, for
    contrast, restarts the whole gang."""
    from loadgen.model.target import ChaosAction
    evict = [ChaosAction(t=20.0, kind="evict", params={"members": 1})]
    _, rec, events = sim(name, [job(0, 2, dur=50)], nodes=4, end=300, chaos=evict, leaf_size=2)
    mine = [(e.kind, e.members) for e in events if e.t >= 20.0]
    assert mine[:4] == [(Kind.EVICTED, 1), (Kind.REQUEUED, 1), (Kind.BOUND, 2), (Kind.ADMITTED, 2)]
    again = [e.t for e in events if e.kind is Kind.ADMITTED]
    assert again[1] == pytest.approx(20.029, abs=0.001)
    assert rec.partial_gpu_s == pytest.approx(8 * (again[1] - 20.019), abs=0.01)
    _, rec, events = sim("volcano", [job(0, 2, dur=50)], nodes=4, end=300, chaos=evict, leaf_size=2)
    assert [e.members for e in events if e.kind is Kind.EVICTED] == [0] and rec.partial_gpu_s == 0


# The shipped chaos scenarios, small: every chaos kind reaches the three new schedulers through the
# same vocabulary, and does the same to each (the plan is the scenario's, not the scheduler's).
CHAOS = {
    "evictions": {"evict": 387, "node_fail": 1, "node_recover": 1},
    "etcd-quota": {"etcd_fill": 1, "etcd_recover": 1},
    "fragmentation": {"prefill": 1},
}


@pytest.mark.parametrize("scenario", sorted(CHAOS))
def test_every_chaos_kind_applies_to_the_kubernetes_gang_schedulers(scenario, tmp_path):
    import json

    from loadgen.drive.comparative import RunOptions, run
    from loadgen.input.scenario import load
    from support.gangtrace import NEW_THREE
    from support.paths import ROOT
    sc = load(str(ROOT / "scenarios" / f"{scenario}.yaml")).with_overrides(**{"fleet.nodes": 300, "duration_h": 3})
    out = tmp_path / "run"
    run(sc, RunOptions(schedulers=NEW_THREE, out_dir=out, results_root=tmp_path, report=False, jobs_csv=False))
    s = json.loads((out / "summary.json").read_text())["schedulers"]
    for name in NEW_THREE:
        r, cp = s[name], s[name]["control_plane"]
        assert {k: v["applied"] for k, v in r["chaos_applied"].items()} == CHAOS[scenario], name
        assert all(v["unsupported"] == 0 for v in r["chaos_applied"].values()), name
        if scenario == "evictions":
            assert (cp["evictions"], cp["node_failures"]) == (387, 64), name
            # a lost member is replaced alone: its siblings keep their GPUs while it waits for a node
            assert r["partial_gang_gpu_hours"] > 0 and r["jobs"]["never_admitted"] == 0, name
        elif scenario == "etcd-quota":
            # etcd refuses every write for 30 min + recovery: creates fail after submit_timeout_s
            assert (cp["nospace_seconds"], cp["recoveries"], r["failure_reasons"]) == (1920.0, 1, {"etcd-nospace": 56})
        else:
            assert cp["prefill_gpus"] == 120 and r["jobs"]["never_admitted"] == 0, name
        if scenario != "evictions":
            # whole-gang admission: nothing held partly, but Kueue's pods are bound one by one after it
            assert (r["partial_gang_gpu_hours"] == 0) == (name != "kueue"), (name, r["partial_gang_gpu_hours"])
