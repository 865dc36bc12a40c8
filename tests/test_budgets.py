"""The budgets after admission: the image cache, rendezvous and GPU activity models, the lifecycle
that applies rendezvous to any target, and what a simulated run reports. Exact where exact."""
from __future__ import annotations

import pytest

from loadgen.drive.lifecycle import Lifecycle
from loadgen.input.scenario import from_dict
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.startup import activity
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.startup.rendezvous import Rendezvous
from loadgen.model.startup.spec import ActivitySpec, ImageSpec, RendezvousSpec, StartupSpec
from loadgen.model.target import ChaosUnsupported

# 40 GB at 0.4444 Gbit/s: the seed's twelve minutes (720 s) when the registry keeps up
SEED = ImageSpec(image_gb=40, node_pull_gbps=40 * 8 / 720, registry_gbps=100, container_start_s=20)


def test_a_cold_node_pulls_for_twelve_minutes_then_starts_and_stays_warm():
    cache = ImageCache(SEED, nodes=4, seed=0)
    assert cache.gang_ready_at(0.0, [0]) == pytest.approx(740.0)
    assert cache.gang_ready_at(100.0, [0]) == pytest.approx(740.0)     # the pull in flight is shared
    assert cache.gang_ready_at(800.0, [0]) == pytest.approx(820.0)     # warm: the container start only
    assert cache.figures() == {"image_pulls": 1, "image_gb_pulled": 40.0, "nodes_warm": 1}


def test_pulls_started_together_share_the_registry():
    cache = ImageCache(ImageSpec(image_gb=1, node_pull_gbps=4, registry_gbps=8), nodes=8, seed=0)
    assert cache.ready_at(0.0, [0, 1]) == {0: 2.0, 1: 2.0}               # 8 / 2 = 4 Gbit/s each
    assert cache.ready_at(0.0, [2, 3, 4, 5]) == {n: pytest.approx(6.0) for n in (2, 3, 4, 5)}   # 8 / 6 each


def test_a_prepull_starts_every_cold_node_at_once_and_warm_nodes_need_none():
    cache = ImageCache(ImageSpec(image_gb=1, node_pull_gbps=4, registry_gbps=8, warm_fraction=0.5, prepull=True),
                       nodes=8, seed=3)
    assert int(cache.warm.sum()) == 4 and cache.pulls == 4              # 8 / 4 = 2 Gbit/s: 4 s each
    cold = int(next(n for n in range(8) if not cache.warm[n]))
    assert cache.gang_ready_at(1.0, [cold]) == pytest.approx(4.0)


def test_no_image_means_ready_at_placement():
    assert ImageCache(ImageSpec(), nodes=2, seed=0).gang_ready_at(5.0, [0, 1]) == 5.0


def test_rendezvous_grows_with_leaves_and_misalignment_and_repeats_per_attempt():
    fleet = Fleet(nodes=64, leaf_size=32)
    rdv = Rendezvous(RendezvousSpec(base_s=10, per_member_s=1, per_extra_leaf_s=5, misaligned_s=100, timeout_s=120),
                     fleet, seed=1)
    one_leaf = rdv.attempt(1, 1, 4, 8, (0, 1, 2, 3))
    two_leaves = rdv.attempt(1, 1, 4, 8, (0, 1, 32, 33))
    partial_nodes = rdv.attempt(1, 1, 2, 4, (0, 1))
    assert (one_leaf.seconds, one_leaf.misaligned) == (14.0, False)
    assert (two_leaves.seconds, two_leaves.leaves, two_leaves.timed_out) == (119.0, 2, False)
    assert (partial_nodes.seconds, partial_nodes.misaligned) == (112.0, True)
    jittered = Rendezvous(RendezvousSpec(base_s=10, jitter_sigma=0.5), fleet, seed=1)
    assert jittered.attempt(7, 2, 1, 8, (0,)) == jittered.attempt(7, 2, 1, 8, (0,))
    assert jittered.attempt(7, 2, 1, 8, (0,)) != jittered.attempt(7, 3, 1, 8, (0,))


def test_activity_is_zero_before_training_and_during_checkpoints():
    spec = ActivitySpec(sm_active=0.8, dataloader_stall=0.1, checkpoint_every_s=100, checkpoint_s=10)
    assert activity.at(spec, None, 50) == 0.0
    assert activity.at(spec, 0.0, 50) == pytest.approx(0.72)
    assert activity.at(spec, 0.0, 95) == 0.0
    assert activity.seconds(spec, 0.0, 0.0, 250.0) == pytest.approx(0.72 * 230)
    assert spec.training_mean == pytest.approx(0.72 * 0.9)


class Stub:
    """A target that admits and readies job 1 on nodes (0, 1) when told to."""
    name, backend = "volcano", "stub"

    def __init__(self, requeue=True):
        self.out, self.requeue, self.restarted = [], requeue, []

    def submit(self, job, now):
        return [Event(now, job.id, Kind.SUBMITTED)]

    def advance(self, now):
        out, self.out = self.out, []
        return out

    def next_wakeup(self):
        return None

    def restart(self, job_id, now, reason):
        if not self.requeue:
            raise ChaosUnsupported("no")
        self.restarted.append((job_id, now, reason))
        return [Event(now, job_id, Kind.EVICTED, 0, reason), Event(now, job_id, Kind.REQUEUED, 0, reason)]


def lifecycle(stub, rdv):
    lc = Lifecycle(stub, StartupSpec(rendezvous=rdv), Fleet(nodes=64, leaf_size=32), seed=1)
    lc.submit(Job(1, "t", "q", "large", 2, 8, 100.0, 0.0, 2), 0.0)
    stub.out = [Event(1.0, 1, Kind.ADMITTED, 2, nodes=(0, 32)), Event(3.0, 1, Kind.READY)]
    return lc, lc.advance(3.0)


def test_a_rendezvous_that_fits_the_timeout_ends_in_training():
    lc, _ = lifecycle(Stub(), RendezvousSpec(base_s=10, per_extra_leaf_s=5, timeout_s=60))
    assert lc.next_wakeup() == 18.0
    assert [(e.t, e.kind) for e in lc.advance(18.0)] == [(18.0, Kind.TRAINING)]


def test_a_timed_out_rendezvous_requeues_the_gang_under_a_requeue_policy():
    stub = Stub()
    lc, _ = lifecycle(stub, RendezvousSpec(base_s=10, misaligned_s=100, timeout_s=60, restart={"volcano": "requeue"}))
    out = lc.advance(63.0)
    assert [e.kind for e in out] == [Kind.START_FAILED, Kind.EVICTED, Kind.REQUEUED]
    assert out[0].reason == "rendezvous-timeout:requeue" and stub.restarted == [(1, 63.0, "rendezvous-timeout")]
    assert lc.next_wakeup() is None


def test_an_in_place_restart_tries_again_after_the_backoff():
    stub = Stub(requeue=False)      # the target cannot requeue: the containers restart in place
    lc, _ = lifecycle(stub, RendezvousSpec(base_s=10, misaligned_s=100, timeout_s=60, restart_backoff_s=10,
                                           restart={"volcano": "requeue"}))
    assert [e.kind for e in lc.advance(63.0)] == [Kind.START_FAILED]
    assert lc.next_wakeup() == 73.0
    assert lc.counts["restarts_in_place"] == 1 and lc.counts["requeue_unsupported"] == 1


def small(extra):
    return from_dict({"name": "b", "seed": 3, "duration_h": 0.5, "drain_h": 0.5, "warmup_h": 0,
                      "fleet": {"nodes": 64}, "workload": {"offered_load": 0.5}, **extra})


def test_a_simulated_run_reports_all_budgets_and_measured_activity(tmp_path):
    from loadgen.drive.comparative import RunOptions, run
    sc = small({"startup": {"image": {"image_gb": 10, "registry_gbps": 10, "container_start_s": 5},
                            "rendezvous": {"base_s": 20, "per_extra_leaf_s": 10}},
                "activity": {"sm_active": 0.8}})
    out = run(sc, RunOptions(schedulers=["kube", "slurm"], out_dir=tmp_path / "run", results_root=tmp_path,
                             report=False, jobs_csv=False))
    for s in out["schedulers"].values():
        b = s["budgets"]
        assert b["placement_to_ready"]["all"]["p50"] >= 5.0 and b["rendezvous"]["all"]["p50"] >= 20.0
        assert b["time_to_training"]["all"]["count"] == b["rendezvous"]["all"]["count"] > 0
        assert 0 < s["activity"]["active_util"] < 0.8
        assert s["placement"]["gangs_placed"] > 0


def test_without_startup_sections_training_starts_at_admission(tmp_path):
    from loadgen.drive.comparative import RunOptions, run
    out = run(small({}), RunOptions(schedulers=["ray"], out_dir=tmp_path / "run", results_root=tmp_path,
                                    report=False, jobs_csv=False))
    s = out["schedulers"]["ray"]
    assert s["budgets"]["placement_to_ready"]["all"]["max"] == 0.0
    assert s["budgets"]["rendezvous"]["all"]["max"] == 0.0
    assert s["activity"]["active_util"] == pytest.approx(0.7, abs=1e-6)
