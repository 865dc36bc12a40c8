"""One-target Locust on an attached Slurm or Ray cluster, without a cluster: what the observing
process makes of what its poller lists (the real two-worker runs are in test_existing_slurm_real.py
and test_existing_ray_real.py)."""
from __future__ import annotations

from fakes.ray.target import RealRay
from fakes.slurm.client import Row
from fakes.slurm.target import RealSlurm
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import Existing, TargetContext


def job(i: int, members: int = 1, duration_s: float = 10.0) -> Job:
    return Job(id=i, tenant="t", queue="q", cls="small", members=members, gpus_per_member=8,
               duration_s=duration_s, submit_s=0.0, min_available=members)


def kinds(events) -> list[tuple[int, str]]:
    return [(e.job_id, e.kind.value) for e in events]


def test_slurm_observer_adopts_only_the_runs_expected_jobs_by_name(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmctldHost=x(127.0.0.1)\n")
    t = RealSlurm(TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1, role="observe",
                                existing=Existing(slurm_conf=str(conf)), run_id="run-a"))
    t.names, t.index = ["n1", "n2"], {"n1": 0, "n2": 1}          # what start() reads off sinfo
    t.expect({1: job(1), 2: job(2, members=2)})
    t.clock.sync(0.0)
    rows = {
        11: Row("RUNNING", 100, 101, None, "n1", "gs-run-a-1"),
        12: Row("PENDING", 100, None, None, "", "gs-run-a-2"),
        13: Row("RUNNING", 100, 101, None, "n2", "gs-run-a-prefill"),     # the observer's own chaos fill
        14: Row("RUNNING", 100, 101, None, "n2", "gs-run-b-1"),           # another run's
        15: Row("RUNNING", 100, 101, None, "n2", "gs-run-a-9"),           # not a job of this run's plan
        16: Row("RUNNING", 100, 101, None, "n2", "user|gs-run-a-1"),      # a foreign name
    }
    t._on_rows(1.0, rows)
    assert kinds(t._take()) == [(1, "admitted"), (1, "started"), (1, "ready")]    # SUBMITTED is the submitter's
    assert sorted(t.by_slurm) == [11, 12] and t.jobs[2].slurm_id == 12
    t._rows = {**rows, 12: Row("RUNNING", 100, 102, None, "n[1-2]", "gs-run-a-2")}
    t._on_rows(2.0, t._rows)
    assert kinds(t._take()) == [(2, "admitted"), (2, "started"), (2, "ready")]
    assert t.used_per_node().tolist() == [16, 8]          # foreign jobs' GPUs are not the run's
    t._on_rows(3.0, {12: rows[12]._replace(state="COMPLETED", end=103)})           # 11 aged out: it ended
    assert kinds(t._take()) == [(1, "finished"), (2, "finished")]


def test_slurm_submitter_says_submitted_and_rejected_and_polls_nothing(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmctldHost=x(127.0.0.1)\n")
    t = RealSlurm(TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1, role="submit",
                                existing=Existing(slurm_conf=str(conf)), run_id="run-a"))
    from fakes.slurm.real.tracked import Tracked
    t.jobs = {1: Tracked(job(1)), 2: Tracked(job(2))}
    t._inflight = 2
    t._sbatched.put((t.jobs[1], 11, 0.5, "", 0))
    t._sbatched.put((t.jobs[2], None, 0.6, "sbatch: error: Invalid account", 0))
    t._observe(1.0)
    assert [(e.job_id, e.kind, e.t) for e in t._take()] == [(1, Kind.SUBMITTED, 0.5), (2, Kind.REJECTED, 0.6)]
    assert t.active == {} and t._watcher is None and t.control_plane() == {}


def ray_observer() -> RealRay:
    t = RealRay(TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1, role="observe",
                              existing=Existing(ray_address="127.0.0.1:6379"), run_id="run-a"))
    t.node_index = {"node-a": 0, "node-b": 1}
    t.clock.sync(0.0)
    return t


def seen(t: RealRay, gid: int, state: str, at: float, pg: str = "pg1", nodes=()) -> list[tuple[int, str]]:
    t._on_seen({"ev": "seen", "id": gid, "t": t.clock.origin + at, "pg": pg, "state": state, "nodes": list(nodes)})
    return kinds(t._take())


def test_ray_observer_admits_on_created_and_finishes_only_after_the_hold():
    t = ray_observer()
    t.expect({1: job(1, members=2, duration_s=10.0), 2: job(2, duration_s=10.0)})
    assert seen(t, 1, "PENDING", 0.5) == [] and t.pending.keys() == {1}
    assert seen(t, 1, "CREATED", 1.0, nodes=["node-a", "node-b"]) == [(1, "admitted"), (1, "started"), (1, "ready")]
    assert t.used_per_node().tolist() == [8, 8] and t.counters["groups_ready"] == 1
    assert seen(t, 1, "CREATED", 1.2, nodes=["node-a", "node-b"]) == []         # no change: no event
    assert seen(t, 1, "REMOVED", 10.5) == [(1, "finished")]        # its owner's hold ended (less a poll)
    assert seen(t, 1, "GONE", 12.0) == []                           # dropped from the table later: once
    assert seen(t, 2, "CREATED", 2.0, pg="pg2", nodes=["node-a"]) == [(2, "admitted"), (2, "started"), (2, "ready")]
    assert seen(t, 2, "REMOVED", 5.0, pg="pg2") == []               # removed early: its owner stopped first
    assert t.removed_unfinished == 1 and t.jobs == {} and t.used_per_node().tolist() == [0, 0]
    assert seen(t, 7, "CREATED", 2.0, pg="pg7", nodes=["node-a"]) == []    # not a job of this run's plan


def test_ray_observer_counts_a_group_created_again_as_an_eviction():
    t = ray_observer()
    t.expect({1: job(1)})
    seen(t, 1, "CREATED", 1.0, nodes=["node-a"])
    assert seen(t, 1, "PENDING", 2.0, pg="pg1b") == [(1, "evicted"), (1, "requeued")]
    assert seen(t, 1, "CREATED", 3.0, pg="pg1b", nodes=["node-b"]) == [(1, "admitted"), (1, "started"), (1, "ready")]
    assert t.running == {1: [1]}


def test_ray_submitter_reports_only_submission_outcomes():
    t = RealRay(TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1, role="submit",
                              existing=Existing(ray_address="127.0.0.1:6379"), run_id="run-a"))
    t.clock.sync(0.0)
    t.jobs = {1: job(1), 2: job(2)}
    t.pending = dict(t.jobs)

    class Driver:       # what the driver process wrote on its pipe, as JsonPipe.drain() returns it
        def drain(self):
            return [{"ev": "ready", "id": 1, "t": t.clock.origin + 1, "nodes": ["x"], "placement": 1},
                    {"ev": "finished", "id": 1, "t": t.clock.origin + 2},
                    {"ev": "failed", "id": 2, "t": t.clock.origin + 3, "reason": "ready: removed"}]
    t.driver = Driver()
    t._observe(4.0)
    assert kinds(t._take()) == [(2, "failed")] and t.jobs == {} and t.pending == {}
    assert t.control_plane() == {}
