"""Simulated slurmctld: the batch-job path (submit RPC, background pass, scheduling agent), cycles
that hold the locks, backfill, priority without SlurmDBD, --switches, --requeue."""
import os
import subprocess
import sys

import numpy as np
import pytest

from fakes.slurm.sim import earliest
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction
from support.simkit import job, sim

# 1 ms per RPC; a main cycle costs 10 ms + 1 ms per job tested; backfill is free unless a test says;
# a finished job's nodes come back at once. Every cost is set here, none taken from a profile.
COSTS = {"observe_ms": 0, "release_ms": 0, "rpc_ms": 1, "rpc_per_node_us": 0, "main_cycle_base_ms": 10,
         "main_cycle_per_pending_us": 0, "main_cycle_per_job_us": 1000, "main_cycle_per_job_node_ns": 0,
         "main_cycle_per_fail_us": 1000, "main_cycle_per_fail_node_ns": 0, "main_cycle_per_skip_us": 0,
         "bf_cycle_base_ms": 0, "bf_cycle_per_job_us": 0, "bf_cycle_per_job_node_ns": 0,
         "bf_cycle_per_start_us": 0, "bf_cycle_per_start_node_ns": 0, "agent_ms": 0}


def slurm(jobs, nodes=16, end=3000.0, chaos=(), leaf_size=4, **over):
    cfg = {f"schedulers.slurm.{k}": v for k, v in {**COSTS, **over}.items()}
    return sim("slurm", jobs, nodes=nodes, end=end, chaos=chaos, leaf_size=leaf_size, overrides=cfg)


def at(events, job_id, kind):
    return [e.t for e in events if e.job_id == job_id and e.kind is kind]


def test_a_batch_job_waits_for_the_background_pass_not_the_submit():
    # The submit RPC only queues the job; the background thread's tick at t=11 (1 s ticks, more
    # than batch_sched_delay after the last pass at 0) runs the cycle: 10 ms + 1 job tested.
    _, rec, events = slurm([job(0, 1, gpus=1, t=10.2)])
    assert at(events, 0, Kind.SUBMITTED) == [pytest.approx(10.201)]
    assert rec.admit[0] == pytest.approx(11.011)


def test_background_passes_are_batch_sched_delay_apart():
    jobs = [job(0, 1, gpus=1, t=0.5, dur=1000), job(1, 1, gpus=1, t=3.5, dur=1000), job(2, 1, gpus=1, t=7.2, dur=1000)]
    _, rec, _ = slurm(jobs)
    assert list(rec.admit) == pytest.approx([3.011, 6.011, 9.011])


def test_a_job_end_starts_a_cycle_at_once():
    # Job 1 waits for the whole cluster. Job 0 ends at 103.012; its completion RPC (1 ms) and the
    # epilog's schedule() start a cycle right away, with no batch_sched_delay.
    jobs = [job(0, 4, t=0, dur=100), job(1, 4, t=1, dur=100)]
    _, rec, _ = slurm(jobs, nodes=4)
    assert rec.admit[0] == pytest.approx(3.012)           # one cycle tested both, job 1 blocked
    assert rec.admit[1] == pytest.approx(103.012 + 0.001 + 0.011)


def test_a_cycle_holds_the_locks_and_a_submission_waits_for_it():
    # The pass at t=3 costs 0.5 s + 1 ms; job 1's submit RPC waits for it.
    jobs = [job(0, 1, gpus=1, t=0.5, dur=1000), job(1, 1, gpus=1, t=3.2, dur=1000)]
    _, rec, events = slurm(jobs, main_cycle_base_ms=500)
    assert rec.admit[0] == pytest.approx(3.501)
    assert at(events, 1, Kind.SUBMITTED) == [pytest.approx(3.502)]


def test_the_jobs_of_one_cycle_start_together_when_it_lets_go_of_the_locks():
    jobs = [job(i, 1, gpus=1, t=0.1 * (i + 1), dur=1000) for i in range(5)]
    t, rec, _ = slurm(jobs)
    assert list(rec.admit) == pytest.approx([3.015] * 5)
    assert t.control_plane()["main_mean_depth"] > 0


def test_max_sched_time_ends_a_long_cycle():
    # 0.6 s per job tested: the pass at t=3 stops once time(NULL) has moved 2 s, after 4 jobs;
    # backfill (t=30) starts the other two.
    jobs = [job(i, 1, gpus=1, t=0.1 * (i + 1), dur=1000) for i in range(6)]
    _, rec, _ = slurm(jobs, main_cycle_base_ms=0, main_cycle_per_job_us=600_000)
    assert sorted(rec.admit) == pytest.approx([5.4] * 4 + [30.0] * 2)


def test_queue_depth_limits_a_triggered_pass_and_the_full_pass_tests_everything():
    jobs = [job(i, 1, gpus=1, t=0.1 * (i + 1), dur=1000) for i in range(5)]
    _, rec, _ = slurm(jobs, default_queue_depth=2, bf_interval_s=3600)
    assert sorted(rec.admit) == pytest.approx([3.012] * 2 + [60.013] * 3)   # sched_interval 60 s


def blocked_queue(t0=4.0, n=5):
    # Job 0 takes all 4 nodes; jobs 1..n (4 nodes each) wait behind it, submitted from t0.
    return [job(0, 4, t=0, dur=1000)] + [job(1 + i, 4, t=t0 + 0.1 * i, dur=100) for i in range(n)]


def test_a_blocked_cycle_still_pops_the_jobs_below_and_sdiag_counts_them_in_its_depth():
    # The pass at t=3 starts job 0: 10 ms + 2 ms for its one pending job + 1 ms test. The pass at 6
    # builds a queue of five (10 + 5 x 2 ms), tests job 1 (1 ms), which cannot start, then pops
    # jobs 2-5 at 100 ms each (schedule() skips them, its depth counts them): 0.421 s in all.
    # A submission at 6.2 waits for it.
    over = {"main_cycle_per_pending_us": 2000, "main_cycle_per_skip_us": 100_000, "bf_interval_s": 3600}
    t, rec, events = slurm(blocked_queue() + [job(9, 1, gpus=1, t=6.2, dur=100)], nodes=4, **over)
    assert rec.admit[0] == pytest.approx(3.013)
    assert at(events, 9, Kind.SUBMITTED) == [pytest.approx(6.422)]
    assert t.main_cycles[:2] == [(pytest.approx(0.013), 1, 1), (pytest.approx(0.421), 1, 5)]


def test_max_sched_time_also_ends_the_walk_past_a_blocked_partition():
    # 1 s per job popped: the walk starts at 6.021 and may begin steps until time(NULL) reads 8
    # (max_sched_time 2 s), so it pops two jobs; depth 3.
    over = {"main_cycle_per_pending_us": 2000, "main_cycle_per_skip_us": 1_000_000, "bf_interval_s": 3600}
    t, _, _ = slurm(blocked_queue(), nodes=4, **over)
    assert t.main_cycles[1] == (pytest.approx(2.021), 1, 3)


def test_the_submit_rpc_tests_every_node_and_the_completion_rpc_does_not():
    # 1 ms + 16 nodes x 1 ms for sbatch; a job's completion RPC keeps rpc_ms (1 ms).
    t, rec, events = slurm([job(0, 1, gpus=1, t=10.2, dur=5)], rpc_per_node_us=1000)
    assert at(events, 0, Kind.SUBMITTED) == [pytest.approx(10.217)]
    assert t.rpcs["REQUEST_COMPLETE_BATCH_SCRIPT"] == [pytest.approx(0.001)]


def test_with_more_than_50_agents_alive_a_job_end_waits_for_the_background_pass():
    # 64 one-GPU jobs start at 3.074 (64 batch launches); job 0 ends at 13.074 and job 100 waits
    # for its GPU. Its epilog asks for a cycle at once (13.075 + 11 ms) unless more than 50 agents
    # are alive (agent_ms 100 s here): then the background tick at 14 runs it.
    jobs = [job(i, 1, gpus=1, t=0.5, dur=10 if i == 0 else 1000) for i in range(64)] + [job(100, 1, gpus=1, t=5.0)]
    _, rec, _ = slurm(jobs, nodes=8)
    assert rec.admit[0] == pytest.approx(3.074) and rec.admit[64] == pytest.approx(13.086)
    _, rec, _ = slurm(jobs, nodes=8, agent_ms=100_000)
    assert rec.admit[64] == pytest.approx(14.011)


def blocked_small_jobs():
    # Job 0 holds half of 8 nodes; the 8-node job 1 heads the queue and blocks the main scheduler;
    # five 1-GPU jobs can only start by backfill (they end long before job 1's reservation).
    return ([job(0, 4, t=0, dur=1000), job(1, 8, t=4, dur=100)]
            + [job(2 + i, 1, gpus=1, t=5 + 0.1 * i, dur=100) for i in range(5)])


def test_bf_max_job_start_caps_the_jobs_one_backfill_pass_starts():
    _, rec, _ = slurm(blocked_small_jobs(), nodes=8, leaf_size=8)
    assert list(rec.admit[2:]) == pytest.approx([30.0] * 5)
    _, rec, _ = slurm(blocked_small_jobs(), nodes=8, leaf_size=8, bf_max_job_start=2)
    # Passes run bf_interval after the previous one ended; at 60 the full main pass (11 ms) has the
    # locks first.
    assert list(rec.admit[2:]) == pytest.approx([30.0, 30.0, 60.011, 60.011, 90.011])


def test_backfill_yields_its_locks_and_a_change_meanwhile_ends_the_pass():
    # 0.8 s per job tested: the pass at 30 tests job 1 and two small jobs (2.4 s), lets go of the
    # locks for 0.5 s, then tests the other three.
    over = {"bf_cycle_per_job_us": 800_000}
    _, rec, _ = slurm(blocked_small_jobs(), nodes=8, leaf_size=8, **over)
    assert list(rec.admit[2:]) == pytest.approx([32.4, 32.4, 35.3, 35.3, 35.3])
    # A submission during the yield is a job change: the pass ends there, the rest wait.
    jobs = blocked_small_jobs() + [job(9, 1, gpus=1, t=32.6, dur=100)]
    _, rec, _ = slurm(jobs, nodes=8, leaf_size=8, **over)
    assert list(rec.admit[2:4]) == pytest.approx([32.4, 32.4])
    assert (rec.admit[4:7] > 60).all()


def test_a_requeued_job_is_eligible_after_cred_expire_and_starts_with_the_next_pass():
    evict = [ChaosAction(20, "evict", {"members": 1})]
    _, rec, events = slurm([job(0, 4, dur=1000)], nodes=8, end=400, chaos=evict)
    assert [e.members for e in events if e.kind is Kind.EVICTED] == [0]
    assert rec.readmission == pytest.approx([120.0])     # eligible at 140: the idle backfill agent takes it
    _, rec, _ = slurm([job(0, 4, dur=1000)], nodes=8, end=400, chaos=evict, bf_interval_s=3600)
    assert rec.readmission == pytest.approx([160.011])   # no pass at 140; the full pass at 180 starts it


def fair_share_jobs():
    # Tenant a ran the whole cluster for 500 s; then a's job 1 (older) and b's job 2 both wait.
    return [job(0, 4, t=0, dur=500, tenant="a"), job(1, 4, t=10, dur=100, tenant="a"),
            job(2, 4, t=20, dur=100, tenant="b")]


def test_without_slurmdbd_fair_share_and_age_are_ignored():
    _, rec, _ = slurm(fair_share_jobs(), nodes=4)
    assert rec.admit[1] < rec.admit[2]                   # submit order
    _, rec, _ = slurm(fair_share_jobs(), nodes=4, accounting_storage="slurmdbd")
    assert rec.admit[2] < rec.admit[1]                   # b has no usage: fair share puts it first


def test_job_size_priority_is_an_integer_so_close_sizes_keep_submit_order():
    # After the 16-node job, 8 + 9 nodes do not fit together. Weight 1000: 9 nodes = 562 > 500.
    # Weight 1: both round down to priority 1 and the older job goes first.
    jobs = [job(0, 16, dur=100), job(1, 8, t=10, dur=100), job(2, 9, t=20, dur=100)]
    _, rec, _ = slurm(jobs)
    assert rec.admit[2] < rec.admit[1]
    _, rec, _ = slurm(jobs, priority_weight_jobsize=1)
    assert rec.admit[1] < rec.admit[2]


def test_backfill_reservation_protects_the_big_gang():
    # 8 nodes, 4 busy until ~1003; a 6-node gang waits; 1-node jobs with long limits must not take
    # the nodes reserved for it, short ones may.
    jobs = [job(0, 4, dur=1000), job(1, 6, t=5, dur=100)] + \
           [job(10 + i, 1, t=40 + i, dur=5000) for i in range(4)]
    _, rec, _ = slurm(jobs, nodes=8, end=20_000, leaf_size=8)
    assert rec.admit[0] == pytest.approx(3.011)
    assert rec.admit[1] <= 1003.011 + 60 + 30          # right after the first gang ends (+ resolution/interval)


def test_gangs_go_on_the_fewest_leaves():
    t, _, _ = slurm([job(0, 1, dur=1000), job(1, 4, t=5, dur=1000)], end=100)
    leaves = {int(t.state.leaf_of[n]) for n, _, _ in t.state.holdings[1]}
    assert len(leaves) == 1


def switches_run(**over):
    # Every leaf has 1 busy node, so a 4-node gang needs 2 leaves.
    pin = ChaosAction(0, "prefill", {"placements": [[0, 1], [4, 1], [8, 1], [12, 1]], "duration_s": None})
    return slurm([job(9, 4, t=10, dur=100)], end=2000, chaos=[pin], switches=1, switches_max_wait_s=300, **over)


def test_a_gang_of_switches_min_members_waits_for_its_switch_count_then_relaxes():
    _, rec, _ = switches_run(switches_min_members=4)
    assert 300 <= rec.admit[0] - 10 <= 300 + 60


def test_a_gang_below_switches_min_members_does_not_ask_for_switches():
    t, rec, _ = switches_run()                           # default threshold: 8 members
    assert rec.admit[0] == pytest.approx(11.011)
    assert "switches_waits" not in t.counters


def test_requeue_restarts_the_whole_gang():
    _, rec, events = slurm([job(0, 4, dur=1000)], nodes=8, end=400, chaos=[ChaosAction(20, "evict", {"members": 1})])
    bound = [e.members for e in events if e.kind is Kind.BOUND]
    assert bound == [4, 4] and not np.isnan(rec.admit[0])


def test_a_reservation_takes_the_earliest_nodes_and_the_lowest_index_among_equal_times():
    times = np.array([3.0, 1.0, 1.0, np.inf, 1.0, 0.0, 2.0])
    assert sorted(earliest(times, 2)) == [1, 5]
    assert sorted(earliest(times, 3)) == [1, 2, 5]
    assert sorted(earliest(times, 5)) == [1, 2, 4, 5, 6]
    assert sorted(earliest(times, 7)) == [0, 1, 2, 3, 4, 5, 6]
    assert sorted(earliest(np.full(10_000, 7.0), 4)) == [0, 1, 2, 3]


def _earliest_long_way(times, m):
    return sorted(range(len(times)), key=lambda i: (times[i], i))[:m]


def test_among_equal_times_a_reservation_takes_the_lowest_node_indices():
    # two gangs end at 5.0 (nodes 2, 7, 9, 12 and 0, 4, 30), one at 3.0; 9 free nodes (now = 1.0)
    times = np.full(40, 8.0)
    times[[2, 7, 9, 12, 0, 4, 30]] = 5.0
    times[[3, 25]] = 3.0
    times[[1, 5, 6, 8, 10, 11, 13, 14, 15]] = 1.0
    times[[16, 20]] = np.inf
    for m in range(1, 39):
        assert earliest(times, m).tolist() == _earliest_long_way(times, m)
    assert earliest(times, 14).tolist() == [1, 5, 6, 8, 10, 11, 13, 14, 15, 3, 25, 0, 2, 4]


@pytest.mark.parametrize("nodes", [3, 50, 10_000])
def test_earliest_is_the_long_way_on_random_times_with_many_ties(nodes):
    rng = np.random.default_rng(nodes)
    for _ in range(60):
        times = rng.integers(0, rng.integers(1, 40), nodes).astype(float)   # few distinct times
        times[rng.random(nodes) < rng.random() * 0.5] = np.inf                # down or reserved
        times[rng.permutation(nodes)[: rng.integers(0, nodes)]] = float(rng.integers(0, 5))   # free now
        m = min(nodes, int(rng.integers(1, 65 if rng.random() < 0.5 else nodes + 1)))   # gangs are small
        assert earliest(times, m).tolist() == _earliest_long_way(times.tolist(), m)


_RESERVE_ON_TIED_TIMES = """
import hashlib, numpy as np
from fakes.slurm.sim import earliest
rng, h = np.random.default_rng(3), hashlib.sha256()
for m in range(1, 65):
    times = rng.integers(0, 30, 10_000).astype(float)      # gangs: many nodes free up at one instant
    h.update(earliest(times, m).tobytes())
print(h.hexdigest())
"""


def test_reserved_nodes_are_the_same_on_every_numpy_dispatch_path():
    # numpy picks AVX-512, AVX2 or baseline routines at start-up; np.argpartition's choice among
    # equal times differs between them (on a CPU without AVX-512 some of these runs coincide)
    def run(disabled: str) -> str:
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
        return subprocess.run([sys.executable, "-c", _RESERVE_ON_TIED_TIMES], env=env, check=True,
                              capture_output=True, text=True).stdout
    assert run("") == run("X86_V4 AVX512_ICL") == run("X86_V3 X86_V4 AVX512_ICL")
