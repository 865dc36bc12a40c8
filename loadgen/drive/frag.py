"""`gangstorm frag`: GPU allocation and fragmentation against arrived load, the "Beware of
Fragmentation" (USENIX ATC '23) experiment, on every simulated scheduler and each of its placement
policies.

As the paper does, tasks are drawn from the trace (with replacement, seeded) and arrive one after
another without leaving, until the GPU they ask for reaches `max_load` (1.3) of the fleet's
capacity; a task's ask is its GPUs, a fraction counting as its share (openb gpu_milli / 1000).
Arrivals are `gap_s` (1) virtual second apart: every twin places (or parks) a task within
milliseconds to a session or two, so at most a task or two is in flight at a sample (each ~0.01% of
capacity); a longer gap only adds the retries of the parked tasks (Ray retries every pending group
each second). At every `step` of arrived load the scheduler's state is sampled:
allocation ratio (GPU capacity held, slices at their compute share, over capacity) and the ATC '23
fragmentation ratio (free capacity a task of the trace's shape mix cannot use, over capacity;
fakes/sim/slices.py). Only simulated schedulers: the real ones take the trace slice in their own
tests (docs/gpu-sharing.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from loadgen.input.plan import workload_for
from loadgen.input.scenario import Scenario
from loadgen.model.errors import UserError
from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.startup.spec import StartupSpec
from loadgen.model.target import TargetContext

FOREVER_S = 300 * 86400.0     # a task never leaves during the experiment



def policies(scenario: Scenario, name: str) -> dict[str, dict]:
    """The scheduler's placement policies (its target declares them) as scenario overrides."""
    offered = target_class(name, "sim").placement_policies(scenario.scheduler_config(name))
    return {p: {f"schedulers.{name}.{k}": v for k, v in keys.items()} for p, keys in offered.items()}


@dataclass(frozen=True)
class FragSettings:
    max_load: float = 1.3
    step: float = 0.05
    gap_s: float = 1.0


def ask(job: Job) -> float:
    """GPUs a task asks for: a fraction at its share, else its whole GPUs."""
    share = job.gpu_share
    return job.members * (share.amount / 1000 if share.kind == "milli" else job.gpus_per_member)


def arrivals(scenario: Scenario, capacity: float, settings: FragSettings) -> list[Job]:
    """Tasks drawn from the scenario's trace with replacement until their ask reaches max_load x
    capacity, `gap_s` apart, never leaving."""
    pool, _ = workload_for(scenario)
    if not pool:
        raise UserError(f"{scenario.path}: workload.trace: expected a trace with at least one GPU task")
    rng = np.random.default_rng(scenario.seed)
    asks = np.array([ask(j) for j in pool])
    need = settings.max_load * capacity
    n = int(math.ceil(need / asks.mean() * 1.2)) + 16
    picks = rng.integers(len(pool), size=n)
    total = np.cumsum(asks[picks])
    n = int(np.searchsorted(total, need) + 1)
    return [replace(pool[int(k)], id=i, submit_s=i * settings.gap_s, duration_s=FOREVER_S)
            for i, k in enumerate(picks[:n])]


def run_policy(scenario: Scenario, name: str, policy: str, jobs: list[Job], settings: FragSettings,
               capacity: float) -> dict:
    """One scheduler under one policy: the curve of allocation and fragmentation against arrived load."""
    keys = policies(scenario, name)[policy]
    sc = scenario.with_overrides(**keys) if keys else scenario
    fleet = sc.fleet()
    ctx = TargetContext(fleet=fleet, config=sc.scheduler_config(name), control_plane=sc.section("control_plane"),
                        seed=sc.seed, startup=StartupSpec.off())
    target = target_class(name, "sim")(ctx)
    target.start()
    points, arrived, next_step = [], 0.0, settings.step
    admitted: set[int] = set()
    try:
        for i, job in enumerate(jobs):
            for e in target.submit(job, job.submit_s):
                if e.kind.name == "ADMITTED":
                    admitted.add(e.job_id)
            arrived += ask(job)
            until = job.submit_s + settings.gap_s * 0.999
            while (w := target.next_wakeup()) is not None and w <= until:
                for e in target.advance(w):
                    if e.kind.name == "ADMITTED":
                        admitted.add(e.job_id)
            load = arrived / capacity
            if load + 1e-12 >= next_step or i == len(jobs) - 1:
                snap = target.snapshot(until)
                g = snap.gpu_sharing or {}
                cap = g.get("capacity_gpus") or capacity
                points.append({"arrived_load": round(load, 4), "tasks": i + 1,
                               "allocation_ratio": round(g.get("allocated_compute_gpus", snap.gpus_allocated) / cap, 6),
                               "fragmentation_ratio": round(g.get("fragmented_gpus", 0.0) / cap, 6),
                               "stranded_ratio": round(g.get("stranded_gpus", 0.0) / cap, 6),
                               "pending_tasks": snap.pending_jobs})
                while next_step <= load + 1e-12:
                    next_step += settings.step
    finally:
        target.stop()
    return {"scheduler": name, "policy": policy, "points": points, "admitted": len(admitted)}


def experiment(scenario: Scenario, names: list[str], settings: FragSettings, progress=None) -> dict:
    """Every scheduler in `names` under each of its policies, on the same arrivals."""
    if not scenario.pools:
        raise UserError(f"{scenario.path}: fleet: expected node pools (fleet.pools or fleet.nodes_from) for a "
                        "GPU-sharing experiment")
    capacity = float(scenario.total_gpus)
    jobs = arrivals(scenario, capacity, settings)
    runs = []
    for name in names:
        for policy in policies(scenario, name):
            if progress:
                progress(name, policy)
            runs.append(run_policy(scenario, name, policy, jobs, settings, capacity))
    shares = sum(1 for j in jobs if j.share)
    return {"scenario": scenario.name, "seed": scenario.seed, "capacity_gpus": capacity,
            "nodes": scenario.fleet().nodes, "tasks": len(jobs), "fractional_tasks": shares,
            "settings": {"max_load": settings.max_load, "step": settings.step, "gap_s": settings.gap_s},
            "trace": scenario.section("workload")["trace"], "runs": runs}
