"""The gang, chaos and clean-up checks every RealRay fleet passes, whatever runs its nodes: what holds
for real raylets must hold for fakelets. test_ray_real.py, test_ray_fakelets_real.py and
test_ray_fakelets_front_real.py each run them on their own module's fleet, in this order: the
state carries over (the gang of the raylet-kill check is the one evict finds running, and the
last check stops the fleet).
"""
from __future__ import annotations

import time

import numpy as np

from fakes.ray.fleet import ray_processes
from fakes.real.procs import session_pids
from loadgen.drive.runner import run_wall
from loadgen.measure.recorder import Recorder
from loadgen.model.events import Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction
from support.ray_fleet import NODES


def bimodal_jobs(n_small: int = 36, n_gangs: int = 8, span_s: float = 30.0, seed: int = 3) -> list[Job]:
    """Many 1-member jobs of 1/2/4/8 GPUs and a tail of 2..NODES-2 member x 8 GPU gangs."""
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n_small):
        g = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.25, 0.2, 0.15]))
        jobs.append(Job(i, "t0", "default", "small", 1, g, float(rng.uniform(1, 4)),
                        float(rng.uniform(0, span_s)), 1, cpus_per_member=g * 12))
    for k in range(n_gangs):
        m = int(rng.integers(2, NODES - 1))
        jobs.append(Job(1000 + k, "t1", "default", "large", m, 8, float(rng.uniform(2, 5)),
                        float(rng.uniform(0, span_s)), m, cpus_per_member=96))
    return sorted(jobs, key=lambda j: j.submit_s)


def bimodal_trace_all_gangs_admitted(target):
    jobs = bimodal_jobs()
    rec = Recorder(jobs)
    end = run_wall(target, jobs, [], end_s=90.0, sample_every_s=0.5, rec=rec)
    admitted = ~np.isnan(rec.admit)
    missing = [j.id for j, a in zip(jobs, admitted) if not a]
    assert not missing, f"never admitted: {missing} (control plane: {target.control_plane()})"
    assert (~np.isnan(rec.finish)).all(), "every group is held for its duration and then removed"
    assert end < 90.0
    lat = rec.admit - rec.submit
    assert (lat >= 0).all()
    for j in jobs:
        nodes = target.placed[j.id]
        assert len(nodes) == j.members
        if j.members > 1:
            assert len(set(nodes)) == j.members, f"STRICT_SPREAD gang {j.id} shares a node: {nodes}"
    cp = target.control_plane()
    assert cp["groups_ready"] >= len(jobs) and cp["raylets_alive"] == NODES
    assert cp["gcs_scheduling_ms_p50"] is not None
    assert max(s.pending_jobs for s in rec.samples) >= 1 or lat.max() < 0.5


def raylet_kill_reschedules_the_gangs_bundle(target):
    gang = Job(5000, "t1", "default", "large", 3, 8, 300.0, 0.0, 3, cpus_per_member=96)
    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0  # noqa: E731
    events = target.submit(gang, now())
    deadline = time.monotonic() + 30
    while 5000 not in target.placed and time.monotonic() < deadline:
        events += target.advance(now())
        time.sleep(0.05)
    assert 5000 in target.placed, "gang not admitted"
    victim = target.placed[5000][1]
    events += target.chaos(ChaosAction(now(), "node_fail", {"nodes": [victim]}), now())
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        events += target.advance(now())
        if any(e.kind is Kind.BOUND and e.reason == "rescheduled" for e in events):
            break
        time.sleep(0.1)
    kinds = [(e.kind, e.members) for e in events if e.job_id == 5000]
    assert (Kind.EVICTED, 2) in kinds and (Kind.REQUEUED, 2) in kinds, kinds
    assert (Kind.BOUND, 3) in kinds, f"the GCS did not reschedule the lost bundle: {kinds}"
    now_nodes = target.running[5000]
    assert victim not in now_nodes and len(set(now_nodes)) == 3
    log = target.control_plane()["node_failures"][-1]
    assert log["node"] == victim and 5000 in log["groups"]
    assert log["rescheduled_after_s"][5000] > 0
    snap = target.snapshot(now())
    assert snap.partial_gangs == 0 and snap.running_jobs >= 1


def prefill_pins_bundles_and_node_recover(target):
    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0  # noqa: E731
    dead = sorted(target.dead)
    target.chaos(ChaosAction(now(), "node_recover", {"nodes": dead}), now())
    free = [i for i in range(NODES) if i not in dead and i not in target.running.get(5000, [])][:2]
    target.chaos(ChaosAction(now(), "prefill", {"placements": [[n, 4] for n in free], "duration_s": 60}), now())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        target.advance(now())
        if len(target.prefill) == 2 and not target.dead and target.cp.get("raylets_alive") == NODES:
            break
        time.sleep(0.2)
    assert sorted(n for n, _ in target.prefill.values()) == sorted(free)
    assert target.control_plane()["prefill_misplaced"] == 0
    assert not target.dead, f"node_recover did not bring {dead} back: {target.errors}"
    assert target.cp["raylets_alive"] == NODES
    snap = target.snapshot(now())
    assert snap.gpus_allocated >= 8 + 24


def evict_restarts_the_whole_group(target):
    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0  # noqa: E731
    running = set(target.running) - set(target.partial)
    assert running, "the gang from the raylet-kill test should still be running"
    events = target.chaos(ChaosAction(now(), "evict", {"members": 1}), now())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        events += target.advance(now())
        if any(e.kind is Kind.ADMITTED for e in events):
            break
        time.sleep(0.05)
    kinds = [(e.job_id, e.kind) for e in events]
    victim = next(j for j, k in kinds if k is Kind.EVICTED)
    assert victim in running
    assert (victim, Kind.REQUEUED) in kinds and (victim, Kind.ADMITTED) in kinds, kinds
    assert target.control_plane()["evicted"] == 1


def stop_leaves_no_ray_process(target):
    sessions, marker = target.sessions, target.marker
    target.stop()
    assert not [p for s in sessions for p in session_pids(s)]
    assert not ray_processes(marker), "raylet/gcs_server still running"
