"""Real Slurm (Debian 22.05 slurmctld + one slurmd per emulated node) driven through RealSlurm."""
from __future__ import annotations

import time

import numpy as np
import pytest

from fakes.slurm.conf import read_sched_config, scheduler_lines
from fakes.slurm.hostlist import compress, expand
from fakes.slurm.sdiag import parse_sdiag
from fakes.slurm.target import RealSlurm
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, TargetContext
from support.slurm import FAST, need_slurm, pids_of

NODES = 64


def bimodal_trace(seed: int = 7, n: int = 70, span_s: float = 20.0) -> list[Job]:
    """1-GPU, 8-GPU, 2-node and 8-16-node gangs, Poisson arrivals over span_s, a few seconds each."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 1, 0.45), (1, 2, 0.10), (1, 8, 0.15), (2, 8, 0.15), (8, 8, 0.09), (16, 8, 0.06)]
    p = np.array([s[2] for s in shapes])
    picks = rng.choice(len(shapes), size=n, p=p / p.sum())
    picks[:2] = [4, 5]                 # at least one 8-node and one 16-node gang early on
    submit = np.sort(rng.uniform(0, span_s, size=n))
    jobs = []
    for i, (k, t) in enumerate(zip(picks, submit)):
        members, gpus, _ = shapes[k]
        cls = "large" if members >= 8 else "small"
        dur = float(rng.uniform(8, 14) if cls == "large" else rng.uniform(2, 8))
        jobs.append(Job(id=i, tenant=f"tenant-{i % 3}", queue="default", cls=cls, members=members,
                        gpus_per_member=gpus, duration_s=dur, submit_s=float(t), min_available=members,
                        cpus_per_member=4 * gpus))
    return jobs


@pytest.fixture
def slurm(tmp_path):
    need_slurm()
    ctx = TargetContext(fleet=Fleet(nodes=NODES), config=dict(FAST), control_plane={}, seed=1, run_dir=tmp_path)
    target = RealSlurm(ctx, workers=4, poll_s=0.3)
    try:
        target.start()
        yield target
    finally:
        target.stop()
        # Nothing of this run may survive: daemons (by run dir), steps and job scripts (by marker).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (target.cluster.marked_pids() or pids_of(tmp_path)):
            time.sleep(0.5)
        assert target.cluster.marked_pids() == [], "slurm processes left behind"
        assert pids_of(tmp_path) == [], "slurmctld/slurmd left behind"


def drive(target: RealSlurm, jobs: list[Job], chaos=None, deadline_s: float = 240.0):
    """Wall-clock open loop: submit each job at submit_s, poll, apply chaos, sample snapshots."""
    events, snaps = [], []
    pending = sorted(jobs, key=lambda j: j.submit_s)
    chaos = sorted(chaos or [], key=lambda c: c[0])
    t0 = time.monotonic()
    done: set[int] = set()
    last_snap = -1.0
    while True:
        now = time.monotonic() - t0
        while pending and pending[0].submit_s <= now:
            events += target.submit(pending.pop(0), now)
        while chaos and chaos[0][0] <= now:
            _, fn = chaos.pop(0)
            events += fn(now)
        new = target.advance(now)
        events += new
        done |= {e.job_id for e in new if e.kind in (Kind.FINISHED, Kind.FAILED, Kind.REJECTED)}
        if now - last_snap >= 1.0:
            snaps.append(target.snapshot(now))
            last_snap = now
        if not pending and len(done) == len(jobs):
            return events, snaps
        assert now < deadline_s, f"only {len(done)}/{len(jobs)} jobs ended within {deadline_s} s"
        time.sleep(0.1)


@pytest.mark.real
def test_bimodal_trace_gangs_chaos_and_cleanup(slurm):
    jobs = bimodal_trace()
    by_id = {j.id: j for j in jobs}
    failed_node: list[int] = []

    # Nodes carry the GPUs as GRES (the daemons run under their plain names, not *-wlm).
    nodes_out = slurm.cluster.run(["scontrol", "show", "node", "-o"]).stdout.splitlines()
    assert len(nodes_out) == NODES
    assert all("Gres=gpu:h100:8" in line for line in nodes_out), nodes_out[0]

    def node_fail(now):
        # Kill the slurmd under a running gang's first node: the gang must be evicted and requeued.
        gangs = [tr for tr in slurm.jobs.values() if tr.started and not tr.done and tr.job.members >= 2]
        assert gangs, "no running gang to hit at chaos time"
        name = gangs[0].nodes[0]
        idx = int(name.split("-")[1])
        failed_node.append(idx)
        return slurm.chaos(ChaosAction(now, "node_fail", {"nodes": [idx]}), now)

    def node_recover(now):
        return slurm.chaos(ChaosAction(now, "node_recover", {"nodes": failed_node}), now)

    events, snaps = drive(slurm, jobs, chaos=[(9.0, node_fail), (14.0, node_recover)])
    kinds: dict[Kind, list] = {}
    for e in events:
        kinds.setdefault(e.kind, []).append(e)

    # Every job admitted, every job finished; none rejected or failed.
    assert not kinds.get(Kind.REJECTED) and not kinds.get(Kind.FAILED), (kinds.get(Kind.REJECTED)
                                                                         or kinds.get(Kind.FAILED))
    admitted = {e.job_id for e in kinds[Kind.ADMITTED]}
    assert admitted == set(by_id)
    assert {e.job_id for e in kinds[Kind.FINISHED]} == set(by_id)

    # Each gang started on all its nodes at once: one StartTime, NodeList of `members` distinct nodes.
    for tr in slurm.jobs.values():
        assert tr.starts, tr.job
        for _obs, start_epoch, nodes in tr.starts:
            assert start_epoch is not None
            assert len(nodes) == len(set(nodes)) == tr.job.members, (tr.job, nodes)

    # Latencies recorded on both clocks: client observation and Slurm's StartTime.
    first_admit = {}
    for e in kinds[Kind.ADMITTED]:
        first_admit.setdefault(e.job_id, e)
    lat = np.array([first_admit[j].t - by_id[j].submit_s for j in by_id])
    backend = np.array([first_admit[j].backend_t - by_id[j].submit_s for j in by_id])
    assert (lat > 0).all() and (backend > -1.5).all()     # Slurm timestamps are whole seconds
    assert np.median(lat) < 30, np.median(lat)
    assert all(e.backend_t is not None for e in kinds[Kind.SUBMITTED])

    # node_fail: the gang on the killed node was evicted, requeued by Slurm and admitted again.
    evicted = [e for e in kinds.get(Kind.EVICTED, []) if e.reason == "node_fail"]
    assert evicted, "node_fail evicted nothing"
    victim = evicted[0].job_id
    assert any(e.job_id == victim for e in kinds.get(Kind.REQUEUED, []))
    assert sum(1 for e in kinds[Kind.ADMITTED] if e.job_id == victim) >= 2

    # Snapshots saw GPUs allocated, never a partial gang.
    assert max(s.gpus_allocated for s in snaps) >= 16 * 8
    assert all(s.partial_gangs == 0 and s.gpus_partial == 0 for s in snaps)

    # Control plane from sdiag.
    cp = slurm.control_plane()
    assert cp["jobs_submitted"] >= len(jobs)
    assert cp["rpc"]["REQUEST_SUBMIT_BATCH_JOB"]["count"] >= len(jobs)
    assert "main_mean_cycle_us" in cp and "bf_cycles" in cp
    assert cp["client"]["sbatch_calls"] >= len(jobs)


@pytest.mark.real
def test_evict_prefill_and_unsupported(slurm):
    # The running slurm.conf carries the scenario's scheduler keys, readable back for the sim.
    got = read_sched_config(slurm.cluster.conf, effective=False)
    assert {k: got[k] for k in ("sched_interval_s", "bf_interval_s", "bf_resolution_s")} == \
        {k: FAST[k] for k in ("sched_interval_s", "bf_interval_s", "bf_resolution_s")}
    slurm.advance(0.0)
    # prefill pins small jobs to chosen nodes
    slurm.chaos(ChaosAction(0.0, "prefill", {"placements": [[0, 3], [1, 5]], "duration_s": 60}), 0.0)
    t0 = time.monotonic()
    events = []

    def wait_for(gpus: int):
        while time.monotonic() - t0 < 60:
            now = time.monotonic() - t0
            events.extend(slurm.advance(now))
            if slurm.snapshot(now).gpus_allocated == gpus:
                return
            time.sleep(0.2)

    wait_for(3 + 5)
    gang = Job(id=1, tenant="t", queue="default", cls="small", members=2, gpus_per_member=8,
               duration_s=60, submit_s=0.0, min_available=2)
    slurm.submit(gang, time.monotonic() - t0)
    wait_for(3 + 5 + 16)
    snap = slurm.snapshot(time.monotonic() - t0)
    assert snap.gpus_allocated == 3 + 5 + 16, snap
    used = slurm._node_usage()
    assert used["gpu-00000"] == 3 and used["gpu-00001"] == 5
    # the gang cannot share the prefilled nodes (exclusive)
    assert not {"gpu-00000", "gpu-00001"} & set(slurm.jobs[1].nodes)

    now = time.monotonic() - t0
    ev = slurm.chaos(ChaosAction(now, "evict", {"members": 1, "drain_s": 2}), now)
    assert [e.kind for e in ev] == [Kind.EVICTED]
    drained = set(slurm.jobs[1].nodes)
    states = slurm.cluster.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout
    assert all(("drain" in line) for line in states.splitlines() if line.split()[0] in drained), states
    requeued = False
    while time.monotonic() - t0 < 90 and not requeued:
        events = slurm.advance(time.monotonic() - t0)
        requeued = any(e.kind == Kind.REQUEUED for e in events)
        time.sleep(0.2)
    assert requeued
    with pytest.raises(ChaosUnsupported):
        slurm.chaos(ChaosAction(0, "etcd_fill", {}), 0)


def test_sched_config_round_trip(tmp_path):
    cfg = {"sched_interval_s": 7, "bf_interval_s": 3, "bf_window_min": 60, "bf_resolution_s": 10,
           "bf_max_job_test": 50, "default_queue_depth": 20, "priority_weight_jobsize": 123,
           "priority_decay_half_life_h": 2, "priority_max_age_h": 4, "switches_max_wait_s": 120,
           "sched_min_interval_s": 1.5}
    conf = tmp_path / "slurm.conf"
    conf.write_text("\n".join(scheduler_lines(cfg)) + "\nAccountingStorageType=accounting_storage/none\n")
    got = read_sched_config(conf, effective=False)
    assert {k: got[k] for k in cfg} == cfg
    eff = read_sched_config(conf)
    assert eff["priority_weight_age"] == 0 and eff["priority_weight_fairshare"] == 0


def test_hostlists_and_sdiag_parse():
    assert expand("gpu-[00000-00002,00007],gpu-00010") == ["gpu-00000", "gpu-00001", "gpu-00002",
                                                          "gpu-00007", "gpu-00010"]
    assert compress("gpu-", [0, 1, 2, 7], 5) == "gpu-[00000-00002,00007]"
    text = """Jobs submitted: 12
Main schedule statistics (microseconds):
\tLast cycle:   120
\tMean cycle:   99
Backfilling stats
\tTotal cycles: 4
\tMean cycle:   300
Remote Procedure Call statistics by message type
\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:12     ave_time:900    total_time:10800
Remote Procedure Call statistics by user
\troot            (       0) count:40     ave_time:500    total_time:20000
"""
    d = parse_sdiag(text)
    assert d["jobs_submitted"] == 12 and d["main_mean_cycle_us"] == 99 and d["bf_mean_cycle_us"] == 300
    assert d["rpc"]["REQUEST_SUBMIT_BATCH_JOB"] == {"count": 12, "ave_time": 900, "total_time": 10800}


@pytest.mark.real
def test_a_deep_run_directory_still_launches_jobs(tmp_path):
    # slurmstepd's socket lives in the spool dir; under a deep run dir (results/calibration/...) its
    # path once passed the 108-byte Unix socket limit and every batch step failed and requeued.
    deep = tmp_path / ("results-" + "d" * 60) / ("calibration-" + "e" * 60)
    ctx = TargetContext(fleet=Fleet(nodes=2), config=dict(FAST), control_plane={}, seed=1, run_dir=deep)
    target = RealSlurm(ctx, workers=1, poll_s=0.2)
    try:
        target.start()
        start = time.monotonic()
        target.submit(Job(id=1, tenant="a", queue="q", cls="small", members=2, gpus_per_member=8, duration_s=1.0,
                          submit_s=0.0, min_available=2, cpus_per_member=4), 0.0)
        kinds = []
        while time.monotonic() - start < 60 and Kind.FINISHED not in kinds:
            kinds += [e.kind for e in target.advance(time.monotonic() - start)]
            time.sleep(0.2)
        assert Kind.ADMITTED in kinds and Kind.FINISHED in kinds and Kind.REQUEUED not in kinds, kinds
    finally:
        target.stop()
    assert target.cluster.marked_pids() == []
    assert not target.cluster.spool_dir.exists(), "the short spool directory outlived the run"
