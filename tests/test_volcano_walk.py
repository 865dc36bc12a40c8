"""The simulated Volcano's session cost at scale: allocate's predicate walk (issue 32).

A session opens for 100 ms here (nothing per node or task), an apiserver write takes 10 ms and a
create 20 ms, so every number can be worked by hand; the walk's per-node costs are set per test.
session_log holds (start s, length ms, walk ms) per session.
"""
import pytest

from fakes.kube.sim import num_feasible_nodes_to_find
from support.simkit import job, sim

TIMED = {"schedulers.volcano.observe_ms": 0, "schedulers.volcano.session_base_ms": 100,
         "schedulers.volcano.session_per_node_us": 0, "schedulers.volcano.session_per_task_us": 0,
         "schedulers.volcano.reject_per_node_us": 0, "schedulers.volcano.feasible_per_node_us": 0,
         "control_plane.write_ms": 10, "control_plane.create_ms": 20}


def log(target):
    return [(round(t, 3), round(ms, 3), round(walk, 3)) for t, ms, walk in target.session_log]


def test_a_placed_task_walks_until_num_nodes_to_find_feasible_nodes_and_binds_when_its_walk_ends():
    # 200 empty nodes: Volcano looks for max(200 x 49%, 100) = 100 feasible nodes and scores them,
    # 10 us each: the allocating session (2.21, as in test_volcano_sim) walks 1 ms, so the binds go
    # out at 2.311 and land at 2.321; the session ends with the PodGroup's Running status (10 ms).
    over = {**TIMED, "schedulers.volcano.feasible_per_node_us": 10, "schedulers.volcano.reject_per_node_us": 1}
    t, rec, _ = sim("volcano", [job(0, 1, gpus=1, t=0.2)], nodes=200, end=12, overrides=over)
    assert t.to_find == num_feasible_nodes_to_find(200, None) == 100
    assert rec.admit[0] == pytest.approx(2.321)
    assert log(t) == [(1.1, 110.0, 0.0), (2.21, 111.0, 1.0)]


def test_with_fewer_feasible_nodes_than_it_looks_for_the_walk_examines_every_node():
    # 150 of 200 nodes full: 50 feasible (10 us each, scored) and 150 passed over (1 us each): 0.65 ms.
    over = {**TIMED, "schedulers.volcano.feasible_per_node_us": 10, "schedulers.volcano.reject_per_node_us": 1}
    jobs = [job(0, 150, tenant="fill", dur=1000), job(1, 1, gpus=1, t=5.0)]
    t, rec, _ = sim("volcano", jobs, nodes=200, end=12, overrides=over)
    assert log(t)[-1] == (6.78, 110.65, 0.65)
    assert rec.admit[1] == pytest.approx(6.78 + 0.1 + 0.00065 + 0.01)


def test_a_task_that_fits_nowhere_walks_every_node_in_every_session():
    # 4 full nodes (another queue's job) and one pending one-GPU task: 4 nodes x 1 ms rejected in the
    # session that first tries it (plus 10 ms to write its PodGroup Unschedulable), and again in
    # every later session although nothing changed.
    over = {**TIMED, "schedulers.volcano.reject_per_node_us": 1000}
    jobs = [job(0, 4, tenant="fill", dur=1000), job(1, 1, gpus=1, t=5.0)]
    t, rec, _ = sim("volcano", jobs, nodes=4, end=12, overrides=over)
    assert log(t)[3:] == [(6.63, 114.0, 4.0), (7.744, 104.0, 4.0), (8.848, 104.0, 4.0), (9.952, 104.0, 4.0),
                          (11.056, 104.0, 4.0)]
    assert t.control_plane()["walks_failed"] == 1


def test_a_gang_walks_its_tasks_until_its_queue_share_runs_out_and_repeats_the_walk_while_discarded():
    # 2 of 4 nodes held by queue "fill"; a 4 x 8-GPU gang in queue "a" whose deserved share is 16 GPUs:
    # two tasks are allocatable, each placed after a walk of the 4 nodes (2 feasible at 1 ms, 2 passed
    # over at 0.1 ms: 2.2 ms), the other two are not (no walk); the gang is discarded and walks the
    # same 4.4 ms again in every session.
    over = {**TIMED, "schedulers.volcano.feasible_per_node_us": 1000, "schedulers.volcano.reject_per_node_us": 100}
    jobs = [job(0, 2, tenant="fill", dur=1000), job(1, 4, t=5.0)]
    t, rec, _ = sim("volcano", jobs, nodes=4, end=9.5, overrides=over)
    assert log(t)[1] == (2.21, 118.0, 8.0)        # the fill job's two tasks: 4 feasible nodes at 1 ms each
    assert log(t)[3:] == [(6.638, 114.4, 4.4), (7.752, 104.4, 4.4), (8.857, 104.4, 4.4)]
    assert rec.admit[1] != rec.admit[1]           # never admitted


def test_without_walk_costs_the_session_is_what_it_was():
    t, rec, _ = sim("volcano", [job(0, 2, t=0.2)], nodes=4, end=100, overrides=TIMED)
    assert rec.admit[0] == pytest.approx(2.32)
    assert [w for _, _, w in t.session_log] == [0.0, 0.0]
