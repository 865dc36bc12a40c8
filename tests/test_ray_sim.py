"""Simulated Ray GCS: one placement group at a time, its cost, the rank-ordered pending queue with
retry backoff, the periodic Tick, RESCHEDULING ahead of everyone, infeasible groups."""
from collections import Counter

import pytest

from fakes.ray.sim import SimRay
from loadgen.input.scenario import from_dict
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction, TargetContext
from support.simkit import job, sim

# GCS work 1 ms + 0.5 ms per bundle + 100 us per bundle^2 on one node + 10 us per alive node; 2 ms round trips.
COSTS = {"observe_ms": 0, "gcs_base_ms": 1, "gcs_per_bundle_ms": 0.5, "gcs_per_bundle_sq_us": 100,
         "gcs_per_node_us": 10, "gcs_per_node_scored_ns": 0, "commit_rtt_ms": 2, "commit_per_node_ms": 0,
         "gcs_followup_ratio": 0}


def ray(jobs, nodes=16, end=2000.0, chaos=(), **over):
    cfg = {f"schedulers.ray.{k}": v for k, v in {**COSTS, **over}.items()}
    return sim("ray", jobs, nodes=nodes, end=end, chaos=chaos, overrides=cfg)


def test_a_group_costs_the_gcs_its_bundles_squared_per_node_and_the_alive_nodes_then_two_round_trips():
    # STRICT_SPREAD: 4 nodes with one bundle each, 4 x 1^2
    _, rec, _ = ray([job(0, 4, t=0)])
    assert rec.admit[0] == pytest.approx((1 + 4 * 0.5 + 4 * 0.1 + 16 * 0.01 + 2 * 2) / 1e3)
    down = [ChaosAction(0, "node_fail", {"nodes": list(range(10, 16))})]
    _, rec, _ = ray([job(0, 4, t=1)], chaos=down)
    assert rec.admit[0] == pytest.approx(1 + (1 + 4 * 0.5 + 4 * 0.1 + 10 * 0.01 + 2 * 2) / 1e3)


def test_spread_scores_every_alive_node_once_per_bundle():
    # 4 bundles x 16 nodes x 1 us scored, on top of the group's other costs
    for strategy in ("SPREAD", "STRICT_SPREAD"):
        _, rec, _ = ray([job(0, 4, gpus=2)], multi_node_strategy=strategy, gcs_per_node_scored_ns=1000)
        assert rec.admit[0] == pytest.approx((1 + 4 * 0.5 + 0.4 + 0.16 + 4 * 16 * 0.001 + 2 * 2) / 1e3)


def test_strict_pack_scores_the_nodes_once_and_pack_once_per_node_it_fills():
    one_pass = (1 + 4 * 0.5 + 1.6 + 0.16 + 16 * 0.001 + 2 * 2) / 1e3          # 4 bundles on one node: 4^2
    _, rec, _ = ray([job(0, 4, gpus=2)], multi_node_strategy="STRICT_PACK", gcs_per_node_scored_ns=1000)
    assert rec.admit[0] == pytest.approx(one_pass)
    _, rec, _ = ray([job(0, 4, gpus=2)], multi_node_strategy="PACK", gcs_per_node_scored_ns=1000)
    assert rec.admit[0] == pytest.approx(one_pass)                        # 4 x 2 GPUs fill one 8-GPU node
    t, rec, _ = ray([job(0, 4, gpus=4, dur=1000)], end=100, multi_node_strategy="PACK", gcs_per_node_scored_ns=1000)
    assert len({n for n, _, _ in t.state.holdings[0]}) == 2
    # 4 x 4 GPUs take two nodes: two passes, 2^2 + 2^2 bundle pairs
    assert rec.admit[0] == pytest.approx(one_pass + (16 * 0.001 - 1.6 + 0.8) / 1e3)


def test_each_round_waits_for_the_nodes_it_calls_in_turn():
    # STRICT_SPREAD over 4 nodes: two rounds of 4 calls at 0.25 ms each
    _, rec, _ = ray([job(0, 4, t=0)], commit_per_node_ms=0.25)
    assert rec.admit[0] == pytest.approx((1 + 4 * 0.5 + 4 * 0.1 + 16 * 0.01 + 2 * (2 + 4 * 0.25)) / 1e3)
    _, rec, _ = ray([job(0, 4, gpus=2)], multi_node_strategy="STRICT_PACK", commit_per_node_ms=0.25)
    assert rec.admit[0] == pytest.approx((1 + 4 * 0.5 + 1.6 + 0.16 + 2 * (2 + 0.25)) / 1e3)


def test_no_attempt_starts_while_the_gcs_follows_up_a_created_group():
    # job 0's attempt takes 5.76 ms; its follow-up keeps the GCS half that again; job 1, waiting
    # since 1 ms, starts at 8.64 ms
    one = (1 + 0.5 + 0.1 + 0.16 + 4) / 1e3
    jobs = [job(0, 1, t=0, dur=100), job(1, 1, t=0.001, dur=100)]
    _, rec, _ = ray(jobs, gcs_followup_ratio=0.5)
    assert list(rec.admit) == pytest.approx([one, one * 1.5 + one])
    _, rec, _ = ray(jobs, gcs_followup_ratio=0)
    assert list(rec.admit) == pytest.approx([one, 2 * one])


def test_the_gcs_schedules_one_group_at_a_time():
    _, rec, _ = ray([job(i, 1) for i in range(3)])
    one = (1 + 0.5 + 0.1 + 0.16 + 4) / 1e3
    assert list(rec.admit) == pytest.approx([one, 2 * one, 3 * one])


def test_a_group_that_does_not_fit_is_retried_at_the_next_tick_after_its_backoff():
    # Job 0 holds both nodes until ~5.006. Job 1 fails at 0.5 and is retried only when the GCS's
    # 1 s Tick finds its rank due (1, 2, ..., 5): freed resources wake nothing. Created at 6.
    jobs = [job(0, 2, t=0, dur=5), job(1, 1, t=0.5, dur=100)]
    t, rec, _ = ray(jobs, nodes=2)
    fail = (1 + 0.5 + 0.1 + 0.02) / 1e3
    assert rec.admit[1] == pytest.approx(6 + fail + 4e-3)
    assert t.counters["schedule_failures"] == 6


def test_a_failed_group_goes_back_at_now_plus_a_backoff_that_grows_1_5x_to_1_s():
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 1, "schedulers.ray.gcs_tick_s": 0.001,
                                         **{f"schedulers.ray.{k}": v for k, v in COSTS.items()}})
    target = SimRay(TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("ray"),
                                  control_plane=sc.section("control_plane"), seed=1))
    target.submit(job(0, 1, dur=1000), 0.0)
    target.submit(job(1, 1, dur=100), 0.0)
    delays, failures, t = [], 0, 0.0
    while len(delays) < 8:
        t = target.next_wakeup()
        target.advance(t)
        if target.counters.get("schedule_failures", 0) > failures:
            failures += 1
            delays.append(target.pending[0][0] - t)
    assert delays == pytest.approx([0.1, 0.15, 0.225, 0.3375, 0.50625, 0.759375, 1.0, 1.0])


def test_younger_groups_overtake_a_backed_off_one():
    jobs = [job(0, 3, dur=500), job(1, 4, t=1, dur=100), job(2, 1, t=2, dur=100)]
    _, rec, _ = ray(jobs, nodes=4)
    assert rec.admit[2] < rec.admit[1]         # no reservation for the waiting gang


def test_strict_spread_uses_distinct_nodes():
    t, _, _ = ray([job(0, 4, gpus=2, dur=1000)], nodes=8, end=100)
    nodes = [n for n, _, _ in t.state.holdings[0]]
    assert len(set(nodes)) == 4


def test_bundles_go_to_the_nodes_with_the_most_left_as_rays_scorer_rates_them():
    # node 0 holds 6 of its 8 GPUs: a 2-GPU job goes to an empty node, not into node 0's last two
    t, _, _ = ray([job(0, 1, gpus=6, dur=1000), job(1, 1, gpus=2, t=1, dur=1000)], nodes=2, end=100)
    assert [n for n, _, _ in t.state.holdings[1]] == [1]
    # SPREAD with more bundles than nodes: once on every node, then over them again, evenly
    t, _, _ = ray([job(0, 12, gpus=1, dur=1000)], nodes=4, end=100, multi_node_strategy="SPREAD")
    assert sorted(Counter(n for n, _, _ in t.state.holdings[0]).values()) == [3, 3, 3, 3]


def test_node_death_reschedules_only_lost_bundles():
    t, rec, events = ray([job(0, 2, dur=1000)], nodes=4, end=100,
                         chaos=[ChaosAction(10, "node_fail", {"nodes": [0]})])
    ev = [e for e in events if e.kind is Kind.EVICTED]
    assert ev[0].members == 1
    assert rec.readmission and len(t.state.holdings[0]) == 2


def test_a_rescheduling_group_is_retried_back_to_back_ahead_of_every_other_group():
    # Nodes 0-1: job 0 (2 x 8 GPUs); node 2: job 1 (4 GPUs, ends ~50); node 3: job 3 (8 GPUs).
    # Node 0 dies at 10: job 0's lost bundle needs a whole node and none is free, so the GCS retries
    # it at rank 0 without pause. Job 2 (2 GPUs) would fit on node 2 but waits behind it; at ~50
    # job 0 takes node 2 whole and job 2 waits for the next release (~1000).
    jobs = [job(0, 2, dur=1000), job(1, 1, gpus=4, t=1, dur=49), job(3, 1, t=2, dur=1000),
            job(2, 1, gpus=2, t=20, dur=100)]
    t, rec, _ = ray(jobs, nodes=4, chaos=[ChaosAction(10, "node_fail", {"nodes": [0]})])
    assert rec.readmission == [pytest.approx(40, abs=0.1)]
    assert rec.admit[3] > 1000
    assert t.counters["schedule_failures"] > 1000          # ~40 s of back-to-back attempts


def test_an_infeasible_group_waits_for_a_node_to_be_added():
    down = ChaosAction(0, "node_fail", {"nodes": [3, 4]})
    up = ChaosAction(100, "node_recover", {"nodes": [3, 4]})
    t, rec, _ = ray([job(0, 4, t=1)], nodes=5, chaos=[down, up])
    assert rec.admit[0] == pytest.approx(100 + (1 + 2 + 0.4 + 0.05 + 4) / 1e3)
    assert t.counters["schedule_failures"] == 1            # no retries while infeasible


def test_an_evicted_group_is_removed_and_created_again_whole_as_the_real_adapter_does():
    # Ray cannot take one bundle away from a group: eviction removes it; it comes back as a new
    # group (new rank, whole placement), unlike a dead node's bundles, which are rescheduled in place.
    evict = [ChaosAction(10.0, "evict", {"members": 1})]
    _, rec, events = ray([job(0, 4, t=0, dur=100)], chaos=evict)
    kinds = [(e.kind, e.members) for e in events if e.job_id == 0 and 9 < e.t < 11]
    assert (Kind.EVICTED, 0) in kinds and (Kind.REQUEUED, 0) in kinds
    readmitted = [e.t for e in events if e.job_id == 0 and e.kind is Kind.ADMITTED and e.t > 10]
    one = (1 + 4 * 0.5 + 4 * 0.1 + 16 * 0.01 + 2 * 2) / 1e3
    assert readmitted == [pytest.approx(10.0 + one)]
