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
