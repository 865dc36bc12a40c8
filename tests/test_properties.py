"""Invariants every simulated scheduler keeps, checked after every step of a stressed run."""
import numpy as np
import pytest

from loadgen.input import chaos
from loadgen.input.scenario import from_dict
from loadgen.input.workload import generate
from loadgen.measure.recorder import Recorder
from loadgen.model.events import Kind
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext

SCHEDULERS = ["kube", "volcano", "ray", "slurm"]


def stressed(name, seed):
    sc = from_dict({"seed": seed, "duration_h": 1.5, "drain_h": 0.5, "fleet": {"nodes": 128, "leaf_size": 8},
                    "workload": {"offered_load": 1.2, "churn_multiplier": 3},
                    "chaos": [{"kind": "evictions", "at_s": 600, "rate_per_h": 120},
                              {"kind": "node_failure", "at_s": 1800, "nodes": 8, "recover_after_s": 900},
                              {"kind": "fragmentation_prefill", "at_s": 0, "fill_fraction": 0.3}]})
    jobs, _ = generate(sc)
    fleet = sc.fleet()
    plan = chaos.plan(sc.data["chaos"], fleet.nodes, 8, 5400, sc.seed)
    ctx = TargetContext(fleet=fleet, config=sc.scheduler_config(name), control_plane=sc.section("control_plane"),
                        seed=seed)
    return target_class(name, "sim")(ctx), jobs, plan


@pytest.mark.parametrize("name", SCHEDULERS)
@pytest.mark.parametrize("seed", [1, 2])
def test_invariants_under_overload_and_chaos(name, seed):
    target, jobs, plan = stressed(name, seed)
    by_id = {j.id: j for j in jobs}
    rec = Recorder(jobs)
    events = []
    i = k = 0
    t = 0.0
    end = 7200.0
    while t < end:
        wake = target.next_wakeup()
        t = min([x for x in (jobs[i].submit_s if i < len(jobs) else None, plan[k].t if k < len(plan) else None,
                             wake, end) if x is not None])
        evs = target.advance(t)
        if k < len(plan) and plan[k].t <= t:
            evs += target.chaos(plan[k], t)
            k += 1
        if i < len(jobs) and jobs[i].submit_s <= t:
            evs += target.submit(jobs[i], t)
            i += 1
        events += evs
        rec.record(evs)
        # No node ever holds more than it has, and the books balance.
        free = target.state.free_gpus
        assert (free >= 0).all() and (free <= 8).all()
        assert target.state.allocated == 8 * 128 - int(free.sum())
    for e in events:
        j = by_id[e.job_id]
        if e.kind is Kind.STARTED:
            assert e.members == j.members          # nothing starts with part of its gang
        if e.kind is Kind.BOUND and name in ("volcano", "slurm"):
            assert e.members == j.members          # gang schedulers bind all members at once
    # Every submitted job is admitted, failed, rejected or still pending; none is lost.
    admitted = ~np.isnan(rec.admit)
    pending = set(target.waiting)
    for idx, j in enumerate(jobs[:i]):
        assert admitted[idx] or rec.failed[idx] or rec.rejected[idx] or j.id in pending, j
    assert len(target.jobs) == i


def test_partial_gangs_exist_only_without_gang_semantics():
    held = {}
    for name in SCHEDULERS:
        target, jobs, plan = stressed(name, 1)
        rec = Recorder(jobs)
        from loadgen.drive.runner import run_virtual
        run_virtual(target, jobs, [a for a in plan if a.kind == "prefill"], 7200, 60, rec)
        held[name] = rec.partial_gpu_s
    assert held["kube"] > 0
    assert held["volcano"] == 0 and held["slurm"] == 0 and held["ray"] == 0
