"""Real Slurm, placement-to-ready: a real Prolog (PrologFlags=Alloc) on every allocated slurmd asks
the run's ready service how long its node needs (the image model), sleeps that long and reports
done; READY is the last node's done. restart() requeues a running gang, launched or attached.

The image: 1 GB, each node pulls at 4 Gbit/s from a registry of 8 Gbit/s, so a cold pull takes
2 s while one or two nodes pull together and 4 s while four do; the container starts 0.5 s later.
Every test boots its own small fleet; the fixture stops it even when the test fails and checks
that no daemon, prolog or job script of the run is left and that the ready service is closed.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from fakes.slurm.fleet import SlurmFleet, marked_pids
from fakes.slurm.target import RealSlurm
from loadgen.drive.runner import run_wall
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.startup.spec import ImageSpec, StartupSpec
from loadgen.model.target import ChaosAction, Existing, TargetContext
from support.recording import Recording
from support.slurm import FAST, need_slurm, pids_of

pytestmark = pytest.mark.real

CONTAINER_S = 0.5
IMAGE = ImageSpec(image_gb=1, node_pull_gbps=4, registry_gbps=8, container_start_s=CONTAINER_S)
COLD_4, COLD_2, WARM = 4.0 + CONTAINER_S, 2.0 + CONTAINER_S, CONTAINER_S
# Slurm's allocation -> prolog start -> service answer -> sleep -> report, on this 2-core machine,
# plus the squeue poll (0.3 s) when READY is measured from the observed ADMITTED.
OVERHEAD_S = 1.5
EPOCH_SLACK_S = 0.05        # Slurm's StartTime (epoch) against the run clock (monotonic)


class SlurmView(threading.Thread):
    """Slurm's own view, next to the run: squeue's state and reason of every job every 0.1 s,
    stamped with the target's run clock."""

    def __init__(self, target: RealSlurm):
        super().__init__(name="slurm-view", daemon=True)
        self.target, self.seen = target, []          # (t, slurm id, state, reason)
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            out = self.target.cluster.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%r"], check=False).stdout
            t = self.target.clock.now()
            for line in out.splitlines():
                sid, state, reason = line.split("|")
                self.seen.append((t, int(sid), state, reason))
            self.halt.wait(0.1)

    def __enter__(self) -> SlurmView:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.halt.set()
        self.join(timeout=30)


def gang(job_id: int, members: int, duration_s: float, submit_s: float) -> Job:
    return Job(job_id, "t0", "default", "large", members, 8, duration_s, submit_s, members, cpus_per_member=4)


def of(events: list[Event], job_id: int, kind: Kind) -> list[Event]:
    return [e for e in events if e.job_id == job_id and e.kind is kind]


def first(events: list[Event], job_id: int, kind: Kind) -> Event:
    found = of(events, job_id, kind)
    assert found, f"no {kind.value} for job {job_id}: {[(e.job_id, e.kind.value, round(e.t, 2)) for e in events]}"
    return found[0]


def drive(target: RealSlurm, until, timeout_s: float, events: list[Event]) -> list[Event]:
    """advance() every 50 ms on the target's run clock until until(events) holds (or fail)."""
    deadline = time.monotonic() + timeout_s
    while not until(events):
        assert time.monotonic() < deadline, f"timed out: {[(e.job_id, e.kind.value, round(e.t, 2)) for e in events]}"
        events += target.advance(target.clock.now())
        time.sleep(0.05)
    return events


def closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def left_behind(cluster) -> list:
    """Daemons (by run dir), prologs and job scripts (their SLURM_CONF is under the run dir)."""
    return marked_pids(cluster.token, cluster.run_dir, jobs_by_folder=True) + pids_of(cluster.run_dir)


@pytest.fixture
def launch(tmp_path):
    """launch(startup, nodes) -> a started RealSlurm on a fleet of its own; all stopped at the end."""
    need_slurm()
    made: list[RealSlurm] = []
    ports: list[int] = []                       # each ready service's port, to check it is closed

    def make(startup: StartupSpec, nodes: int = 4) -> RealSlurm:
        name = f"run{len(made)}"
        ctx = TargetContext(fleet=Fleet(nodes=nodes), config=dict(FAST), control_plane={}, seed=1,
                            run_dir=tmp_path / name, run_id=name, startup=startup)
        target = RealSlurm(ctx, workers=2, poll_s=0.3)
        made.append(target)
        target.start()
        if target.ready is not None:
            ports.append(target.ready.port)
        return target

    try:
        yield make
    finally:
        for target in made:
            target.stop()
        for target in made:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and left_behind(target.cluster):
                time.sleep(0.5)
            assert left_behind(target.cluster) == [], "slurm processes, prologs or job scripts left behind"
        assert all(closed(port) for port in ports), "a ready service is still listening"


def test_cold_nodes_pull_then_warm_nodes_only_start_the_container(launch):
    target = launch(StartupSpec(image=IMAGE))
    conf = target.cluster.conf.read_text()
    assert f"Prolog={target.prolog_path}" in conf and "PrologFlags=Alloc" in conf
    node_conf = next((target.cluster.run_dir / "etc" / "nodes").rglob("gpu-00000.conf")).read_text()
    assert "PrologFlags=Alloc" in node_conf, "slurmd runs the prolog: its own slurm.conf must name it"
    # Job 1 takes the four cold nodes (four pulls share the registry: 4 s); job 2 comes after it
    # ended and lands on two of them, now warm.
    jobs = [gang(1, 4, 7.0, 0.5), gang(2, 2, 3.0, 10.0)]
    rec = Recording(jobs)
    with SlurmView(target) as view:
        run_wall(target, jobs, [], 60.0, 1.0, rec)
    ev = rec.events
    assert {e.job_id for e in ev if e.kind is Kind.FINISHED} == {1, 2}, ev
    log = {r["job"]: r for r in target.ready_log}
    for job_id, model in ((1, COLD_4), (2, WARM)):
        admitted, ready = first(ev, job_id, Kind.ADMITTED), first(ev, job_id, Kind.READY)
        r = log[job_id]
        assert len(of(ev, job_id, Kind.READY)) == 1 and r["restart"] == 0
        assert r["model"] - r["placed"] == pytest.approx(model, abs=1e-9), r      # the model, exactly
        assert r["done"] >= r["model"], r                                          # no prolog ends early
        assert ready.t == r["t"] >= admitted.t
        # Slurm's StartTime is the allocation (whole seconds, rounded down): READY is no earlier
        # than the model's time after it, and within the overhead of the observed ADMITTED.
        assert ready.t - admitted.backend_t >= model - EPOCH_SLACK_S, (ready, admitted)
        assert ready.t - admitted.t <= model + OVERHEAD_S, (ready, admitted)
        assert ready.t - r["placed"] <= model + OVERHEAD_S, r
        print(f"job {job_id}: model {model:.3f} s; done - model {r['done'] - r['model']:.3f} s; "
              f"READY - ADMITTED {ready.t - admitted.t:.3f} s; READY - StartTime {ready.t - admitted.backend_t:.3f} s; "
              f"first prolog - StartTime {r['placed'] - admitted.backend_t:.3f} s")
    # The job holds its nodes for its duration from the allocation, pull included (as the sims do).
    fin1, adm1 = first(ev, 1, Kind.FINISHED), first(ev, 1, Kind.ADMITTED)
    assert fin1.backend_t - adm1.backend_t <= 7.0 + 1.0 + EPOCH_SLACK_S, (adm1, fin1)

    cp = target.control_plane()
    print("control_plane:", {k: v for k, v in cp.items() if k.startswith(("ready", "prolog", "image", "nodes_warm"))})
    assert cp["ready_source"] == "prolog" and cp["image_pulls"] == 4 and cp["nodes_warm"] == 4
    assert cp["prolog_starts"] == cp["prolog_dones"] == 6 and cp["ready_missing"] == 0
    assert cp["prolog_other_jobs"] == 0 and cp["ready_stale_dones"] == 0

    # Slurm's own view: while the prologs run the job is RUNNING with Reason=Prolog (PrologFlags=Alloc
    # does not make it CONFIGURING), and the reason clears once they are done.
    sid = target.jobs[1].slurm_id
    r = log[1]
    during = [(t, s, why) for t, i, s, why in view.seen if i == sid and r["placed"] + 0.3 < t < r["done"] - 0.3]
    after = [(t, s, why) for t, i, s, why in view.seen if i == sid and r["done"] + 1.0 < t]
    assert during and all((s, why) == ("RUNNING", "Prolog") for _, s, why in during), during
    assert after and after[0][1:] == ("RUNNING", "None"), after[:3]
    assert not [x for x in view.seen if x[2] == "CONFIGURING"]


def test_without_a_startup_spec_ready_is_the_admission_instant(launch):
    target = launch(StartupSpec.off(), nodes=2)
    assert target.ready is None and "Prolog=" not in target.cluster.conf.read_text()
    jobs = [gang(1, 2, 1.0, 0.3), gang(2, 1, 1.0, 0.3)]
    rec = Recording(jobs)
    run_wall(target, jobs, [], 60.0, 1.0, rec)
    for job_id in (1, 2):
        assert first(rec.events, job_id, Kind.READY).t == first(rec.events, job_id, Kind.ADMITTED).t
        assert len(of(rec.events, job_id, Kind.READY)) == 1
    cp = target.control_plane()
    assert cp["ready_source"] == "admission" and "image_pulls" not in cp and "prolog_starts" not in cp


def test_restart_requeues_a_running_gang_and_old_prologs_never_make_a_later_attempt_ready(launch):
    target = launch(StartupSpec(image=IMAGE), nodes=2)
    target.advance(0.0)
    target.submit(gang(1, 2, 14.0, 0.0), 0.0)
    ev = drive(target, lambda ev: of(ev, 1, Kind.ADMITTED), 60, [])
    # Restart while the cold pull (2.5 s) still runs: the first attempt's prologs finish after the
    # requeue (slurmd lets them end; the job shows COMPLETING meanwhile) and must not count.
    assert not of(ev, 1, Kind.READY)
    now = target.clock.now()
    out = target.restart(1, now, "rendezvous-timeout")
    assert [(e.kind, e.t, e.reason) for e in out] == [(Kind.EVICTED, now, "rendezvous-timeout"),
                                                      (Kind.REQUEUED, now, "rendezvous-timeout")]
    ev += out
    assert target.restart(1, target.clock.now(), "again") == []        # already on its way back
    ev = drive(target, lambda ev: of(ev, 1, Kind.READY), 60, ev)
    assert target.stale_dones == 2, "the first attempt's two prologs reported after the requeue"
    # Then Slurm requeues it on its own account (chaos evict: drain + scontrol requeue): the next
    # attempt is Slurm's restart 2 and is READY again.
    now = target.clock.now()
    ev += target.chaos(ChaosAction(now, "evict", {"members": 2, "drain_s": 1.0}), now)
    ev = drive(target, lambda ev: of(ev, 1, Kind.FINISHED), 90, ev)
    kinds = [e.kind for e in ev if e.kind is not Kind.SUBMITTED]
    attempt = [Kind.ADMITTED, Kind.STARTED]
    assert kinds == [*attempt, Kind.EVICTED, Kind.REQUEUED, *attempt, Kind.READY, Kind.EVICTED, Kind.REQUEUED,
                     *attempt, Kind.READY, Kind.FINISHED], kinds
    assert [r["restart"] for r in target.ready_log] == [1, 2]
    # The first attempt's pull landed during the requeue hold (cred_expire 5 s): both nodes are warm.
    for r, admitted, ready in zip(target.ready_log, of(ev, 1, Kind.ADMITTED)[1:], of(ev, 1, Kind.READY)):
        assert r["model"] - r["placed"] == pytest.approx(WARM, abs=1e-9), r
        assert ready.t == r["t"] and 0 <= ready.t - admitted.t <= WARM + OVERHEAD_S, (admitted, ready)
    assert target.restart(1, target.clock.now(), "too late") == []      # it finished
    cp = target.control_plane()
    assert cp["restarts_requested"] == 1 and cp["image_pulls"] == 2 and cp["ready_stale_dones"] == 2


def test_restart_on_an_attached_cluster_requeues_only_the_runs_own_job(tmp_path):
    need_slurm()
    fleet = SlurmFleet(Fleet(nodes=2), tmp_path / "cluster", config=dict(FAST))
    target = None
    try:
        fleet.start(timeout_s=120)
        foreign = int(fleet.run(["sbatch", "--parsable", "--nodes=1", "--gres=gpu:8", "--exclusive",
                                 "--output=/dev/null", f"--chdir={fleet.jobs_dir}", "--wrap", "sleep 120"]).stdout)
        ctx = TargetContext(fleet=Fleet(nodes=2), config=dict(FAST), control_plane={}, seed=1, run_dir=tmp_path / "run",
                            run_id="attached", startup=StartupSpec(image=IMAGE),
                            existing=Existing(slurm_conf=str(fleet.conf), allow_foreign=True))
        target = RealSlurm(ctx, workers=1, poll_s=0.3)
        target.start()
        assert target.ready is None, "an attached run writes no slurm.conf: no prolog"
        target.advance(0.0)
        target.submit(gang(1, 1, 20.0, 0.0), 0.0)
        ev = drive(target, lambda ev: of(ev, 1, Kind.ADMITTED), 60, [])
        # Attached, READY is the admission instant even with an image: nothing runs the pull.
        assert first(ev, 1, Kind.READY).t == first(ev, 1, Kind.ADMITTED).t
        now = target.clock.now()
        assert [e.kind for e in target.restart(1, now, "rendezvous-timeout")] == [Kind.EVICTED, Kind.REQUEUED]
        ev = drive(target, lambda ev: len(of(ev, 1, Kind.ADMITTED)) == 2, 60, ev)
        assert len(of(ev, 1, Kind.READY)) == 2
        assert target.control_plane()["ready_source"] == "admission (attached: no gangstorm prolog)"
        # The foreign job was never touched: still running, never requeued.
        show = fleet.run(["scontrol", "show", "job", str(foreign)]).stdout
        assert "JobState=RUNNING" in show and "Restarts=0" in show, show
    finally:
        if target is not None:
            target.stop()
        fleet.stop()
    assert left_behind(fleet) == []
