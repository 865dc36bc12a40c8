"""What every simulated scheduler shares (fakes/sim/base.py): the observation lag and the release lag."""
import pytest

from loadgen.model.events import Kind
from support.simkit import job, sim


def _kube(release_ms: float, observe_ms: float = 0.0):
    # job 0 takes the only node's 8 GPUs for 5 s; job 1 arrives at 1 s and waits for them
    return sim("kube", [job(0, 1, t=0, dur=5), job(1, 1, t=1, dur=5)], nodes=1, end=100, leaf_size=1,
               overrides={"schedulers.kube.release_ms": release_ms, "schedulers.kube.observe_ms": observe_ms,
                          "control_plane.create_ms": 0})


def test_a_finished_jobs_resources_come_back_release_ms_later():
    _, now, ev0 = _kube(0)
    _, late, ev2 = _kube(2000)

    def finished(evs):
        return [e.t for e in evs if e.job_id == 0 and e.kind is Kind.FINISHED]

    assert finished(ev0) == finished(ev2)                  # the job is done at the same moment
    assert late.admit[1] - now.admit[1] == pytest.approx(2.0)   # its GPUs are usable 2 s later


def test_every_job_event_reaches_the_runner_observe_ms_late_in_order():
    _, now, ev0 = _kube(0)
    _, seen, ev3 = _kube(0, observe_ms=300)
    assert [e.kind for e in ev0] == [e.kind for e in ev3]
    assert [round(b.t - a.t, 9) for a, b in zip(ev0, ev3)] == [0.3] * len(ev0)
