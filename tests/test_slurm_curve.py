"""Slurm's cost curve turned into the twin's costs: which cycle did what (the sdiag probe), the
non-negative fits, and the twin's value beside each measured figure. Exact numbers on hand-made
curve files; the real curve is a benchmark (`make fidelity-scale-slurm`)."""
import json

import numpy as np
import pytest

from fakes.slurm.probe import cycles
from fakes.slurm.sim import SimSlurm
from loadgen.calibration import slurm_curve as sc
from loadgen.calibration.anchors import _replayed


def poll(t, main=0, bf=0, started=0, backfilled=0, **kw):
    return {"t": t, "main_cycles": main, "bf_cycles": bf, "jobs_started": started, "bf_backfilled_jobs": backfilled,
            "load1": 0.1, **kw}


def test_each_cycle_counts_the_jobs_started_since_the_previous_cycle_of_its_kind():
    # A main cycle spans two polls (its first 50 starts are seen before it ends); a backfill pass
    # starts 99 jobs while no main cycle runs.
    polls = [poll(0), poll(1, started=50),
             poll(2, main=1, started=101, main_last_cycle_us=900, main_last_queue_length=300),
             poll(3, main=1, started=150, backfilled=49),
             poll(4, main=1, bf=1, started=200, backfilled=99, bf_last_cycle_us=700, bf_last_depth=99,
                  bf_last_depth_try=99, bf_last_queue_length=199, bf_last_table_size=1)]
    main, bf = cycles(polls)
    assert [(c["cycle_us"], c["queue"], c["started"]) for c in main] == [(900, 300, 101)]
    assert [(c["cycle_us"], c["depth_try"], c["started"]) for c in bf] == [(700, 99, 99)]


def test_two_cycles_between_polls_are_not_read_as_one():
    main, _ = cycles([poll(0), poll(1, main=2, started=10, main_last_cycle_us=5, main_last_queue_length=1)])
    assert main == []


def test_nnls_fixes_a_negative_coefficient_at_zero_and_refits_the_rest():
    x = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    y = np.array([3.0, 2.0, 1.0])                     # slope -1: no negative cost, so only the mean remains
    assert list(sc.nnls(x, y)) == pytest.approx([2.0, 0.0])


def curve(nodes, rpc_us, blocked, start):
    """A curve file: blocked = [(window, queue, main cycle us, bf cycle us, tested)], start = [(queue, us, started)]."""
    return {"nodes": nodes, "metrics": {
        "submit_rpc": {"rpc": {"REQUEST_SUBMIT_BATCH_JOB": {"count": 60, "ave_time_us": rpc_us}}},
        "blocked": [{"window": w, "main_each": [{"cycle_us": m, "queue": q}],
                     "bf_each": [{"cycle_us": b, "depth_try": t, "started": 0}]} for w, q, m, b, t in blocked],
        "start": {"main_each": [{"cycle_us": u, "queue": q, "started": s} for q, u, s in start]}}}


def model_curves():
    # Costs (us): RPC 100 + 2/node; main: 10 fixed, 1 per pending, 50 + 4/node per start, 2/node for
    # the failing test, 3 per job popped past it; backfill: 20 + 3/node per job tested.
    def main_us(n, q, started, failed):
        skipped = min(q, 100) - 1 if failed else 0
        return 10 + q + started * (50 + 4 * n) + failed * 2 * n + 3 * skipped
    out = []
    for n in (500, 2000, 10000):
        blocked = [(f"blocked-{q}", q, main_us(n, q, 0, 1), 100 + q * (20 + 3 * n), q) for q in (20, 100, 400)]
        start = [(q, main_us(n, q, s, 0), s) for q, s in ((400, 100), (150, 50))]
        out.append(curve(n, 100 + 2 * n, blocked, start))
    return out


def test_the_fits_recover_the_costs_the_cycles_were_made_with():
    v = sc.values(sc.fit_all(model_curves(), [], set()))
    assert v["rpc_ms"] == pytest.approx(0.1) and v["rpc_per_node_us"] == pytest.approx(2.0)
    assert v["main_cycle_base_ms"] == pytest.approx(0.010)
    assert v["main_cycle_per_pending_us"] == pytest.approx(1.0)
    assert v["main_cycle_per_job_us"] == pytest.approx(50.0)
    assert v["main_cycle_per_job_node_ns"] == pytest.approx(4000.0)
    assert v["main_cycle_per_fail_node_ns"] == pytest.approx(2000.0)
    assert v["main_cycle_per_skip_us"] == pytest.approx(3.0)
    assert v["bf_cycle_base_ms"] == pytest.approx(0.1)
    assert v["bf_cycle_per_job_us"] == pytest.approx(20.0)
    assert v["bf_cycle_per_job_node_ns"] == pytest.approx(3000.0)
    assert v["main_cycle_per_fail_us"] == 0.0


def test_the_twin_prices_a_held_out_size_with_the_costs_fitted_on_the_others():
    curves = model_curves()
    fits = sc.fit_all(curves, [], {2000})
    assert fits["main"].sizes == [500, 10000]
    cfg = {**sc.twin_config(sc.load_profile("local")), **sc.values(fits)}
    rows = sc.compare(curves, cfg, {2000})
    held = [r for r in rows if r["nodes"] == 2000]
    assert len(held) == 8 and all(r["held_out"] for r in held)
    assert all(r["ratio"] == pytest.approx(1.0) for r in rows)
    # a blocked main cycle at 2,000 nodes with 400 pending: 10 + 400 + 2 x 2,000 + 3 x 99 us
    row = next(r for r in held if r["figure"] == "main cycle, 400 pending, blocked")
    assert row["sim_ms"] == pytest.approx(4.707)


def test_the_twin_cost_model_is_the_simulators_own():
    cfg = sc.twin_config(sc.load_profile("local"))
    assert SimSlurm.main_costs(cfg, 1000).cycle(10, 2, 1, 5) == pytest.approx(
        cfg["main_cycle_base_ms"] / 1e3 + 10 * cfg["main_cycle_per_pending_us"] / 1e6
        + 2 * (cfg["main_cycle_per_job_us"] / 1e6 + cfg["main_cycle_per_job_node_ns"] * 1000 / 1e9)
        + (cfg["main_cycle_per_fail_us"] / 1e6 + cfg["main_cycle_per_fail_node_ns"] * 1000 / 1e9)
        + 5 * cfg["main_cycle_per_skip_us"] / 1e6)


def test_a_burst_anchor_offers_the_twin_the_benchmarks_own_submissions(tmp_path, monkeypatch):
    import loadgen.calibration.anchors as anchors
    monkeypatch.setattr(anchors, "ROOT", tmp_path)
    (tmp_path / "b.json").write_text(json.dumps({"offsets_s": [0.0, 0.25, 0.5], "aligned": {"since_full_pass_s": 1.5}}))
    jobs = _replayed("b.json", dur=120.0)()
    assert [j.submit_s for j in jobs] == [1.5, 1.75, 2.0]
    assert {(j.members, j.gpus_per_member, j.duration_s) for j in jobs} == {(1, 1, 120.0)}
    assert len(_replayed("missing.json", dur=0.0, fallback_rate=100.0, fallback_n=5)()) == 5


def test_an_agent_lives_as_long_as_littles_law_says_over_the_polls_while_jobs_ran():
    # counters: (t, submitted, started, completed, agent count); the idle polls before the first
    # start and after the last completion are left out. 10 s, 40 started + 40 completed = 8 agents/s,
    # 4 alive on average: 0.5 s each.
    counters = [(0.0, 0, 0, 0, 0), (1.0, 80, 10, 0, 2), (6.0, 80, 30, 20, 6), (11.0, 80, 50, 40, 4),
                (12.0, 80, 80, 80, 0)]
    assert sc.agent_lifetime_s({"jobs": 80, "counters": counters}) == pytest.approx(4 / 8)
    assert sc.agent_lifetime_s({"jobs": 80, "counters": counters[:2]}) is None
