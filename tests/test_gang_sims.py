"""Volcano, Ray and Slurm simulated mechanisms."""
import numpy as np
import pytest

from fakes.volcano.sim import water_fill
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction
from simkit import job, sim


def test_volcano_gang_is_atomic():
    jobs = [job(0, 3, dur=100), job(1, 3, dur=100)]
    _, rec, events = sim("volcano", jobs, nodes=4, end=1000)
    assert all(e.members == 3 for e in events if e.kind is Kind.BOUND)
    assert rec.partial_gpu_s == 0 and not np.isnan(rec.admit).any()
    assert rec.admit[1] >= rec.finish[0]


def test_volcano_session_period_sets_latency():
    _, rec, _ = sim("volcano", [job(0, 1, gpus=1, t=0.2)], end=100,
                    overrides={"schedulers.volcano.schedule_period_s": 5.0})
    assert rec.admit[0] >= 5.0                 # waits for the first session boundary


def test_volcano_queue_capability_is_respected():
    jobs = [job(i, 2, dur=100, tenant="a") for i in range(3)] + [job(9, 2, dur=100, tenant="b")]
    t, rec, events = sim("volcano", jobs, nodes=16, end=50,
                         overrides={"schedulers.volcano.queues": {"weights": {}, "capability_gpus": {"a": 32}}})
    admitted_a = [i for i in range(3) if not np.isnan(rec.admit[i])]
    assert len(admitted_a) == 2 and not np.isnan(rec.admit[3])
    assert t.counters["enqueue_rejected_capability"] > 0


def test_proportion_water_filling():
    d = water_fill(100, {"a": 1, "b": 1, "c": 2}, {"a": 10, "b": 100, "c": 100})
    assert d == pytest.approx({"a": 10, "b": 30, "c": 60})


def test_ray_strict_spread_uses_distinct_nodes():
    t, _, _ = sim("ray", [job(0, 4, gpus=2, dur=1000)], nodes=8, end=100)
    nodes = [n for n, _, _ in t.state.holdings[0]]
    assert len(set(nodes)) == 4


def test_ray_small_groups_overtake_a_blocked_large_one():
    jobs = [job(0, 3, dur=500), job(1, 4, t=1, dur=100), job(2, 1, t=2, dur=100)]
    _, rec, _ = sim("ray", jobs, nodes=4, end=2000)
    assert rec.admit[2] < rec.admit[1]         # no reservation for the waiting gang


def test_ray_node_death_reschedules_only_lost_bundles():
    t, rec, events = sim("ray", [job(0, 2, dur=1000)], nodes=4, end=100,
                         chaos=[ChaosAction(10, "node_fail", {"nodes": [0]})])
    ev = [e for e in events if e.kind is Kind.EVICTED]
    assert ev[0].members == 1
    assert rec.readmission and len(t.state.holdings[0]) == 2


def test_slurm_backfill_reservation_protects_the_big_gang():
    # 8 nodes busy 4 until t=1000; a 6-node gang waits; 1-node jobs with long limits must not
    # take the nodes reserved for it, short ones may.
    jobs = [job(0, 4, dur=1000), job(1, 6, t=1, dur=100)] + \
           [job(10 + i, 1, t=40 + i, dur=5000) for i in range(4)]
    _, rec, _ = sim("slurm", jobs, nodes=8, end=20_000, leaf_size=8,
                    overrides={"schedulers.slurm.priority_weight_age": 0, "schedulers.slurm.priority_weight_fairshare": 0})
    assert rec.admit[1] <= 1000 + 60 + 30      # right after the first gang ends (+ resolution/interval)


def test_slurm_places_gangs_on_fewest_leaves():
    t, _, _ = sim("slurm", [job(0, 1, dur=1000), job(1, 4, t=1, dur=1000)], nodes=16, end=100, leaf_size=4)
    leaves = {int(t.state.leaf_of[n]) for n, _, _ in t.state.holdings[1]}
    assert len(leaves) == 1


def test_slurm_switches_wait_then_relax():
    # Every leaf has 1 busy node, so a 4-node gang needs 2 leaves; with switches=1 it waits
    # switches_max_wait_s, then takes two leaves.
    pin = ChaosAction(0, "prefill", {"placements": [[0, 1], [4, 1], [8, 1], [12, 1]], "duration_s": None})
    jobs = [job(9, 4, t=10, dur=100, cls="large")]
    _, rec, _ = sim("slurm", jobs, nodes=16, end=2000, leaf_size=4, chaos=[pin],
                    overrides={"schedulers.slurm.switches": 1, "schedulers.slurm.switches_max_wait_s": 300})
    assert 300 <= rec.admit[0] - 10 <= 300 + 60


def test_slurm_requeue_restarts_the_whole_gang_after_cred_expire():
    _, rec, events = sim("slurm", [job(0, 4, dur=1000)], nodes=8, end=400,
                         chaos=[ChaosAction(20, "evict", {"members": 1})])
    ev = [e for e in events if e.kind is Kind.EVICTED]
    assert ev[0].members == 0
    assert rec.readmission == [120.0]          # held for cred_expire_s, then started at once
