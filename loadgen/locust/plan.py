"""What one Locust process runs: the seeded workload, its tenant shard, and per-scheduler lanes.

The run plan is the one `gangstorm run` replays (loadgen.input.plan.plan_run), so a Locust run and
`gangstorm run` offer the same jobs and chaos over the same window. With several
Locust processes each one owns a shard: a set of tenants, balanced by GPU-seconds of demand,
and the same share of the fleet (its own target instance), so offered load per GPU is kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from loadgen.input.plan import RunPlan, plan_run
from loadgen.locust.options import Settings
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction


@dataclass
class Plan(RunPlan):
    settings: Settings | None = None
    tenants: list[str] = field(default_factory=list)

    @property
    def wall_duration_s(self) -> float:
        return self.end_s / self.settings.time_scale


def build(settings: Settings) -> Plan:
    run = plan_run(settings.scenario)
    tenants = list(run.workload_info.get("tenants") or sorted({j.tenant for j in run.jobs}))
    return Plan(**vars(run), settings=settings, tenants=tenants)


def assign_tenants(jobs: list[Job], tenants: list[str], shards: int) -> dict[str, int]:
    """Tenant -> shard, greedy by GPU-seconds (largest tenant first to the lightest shard)."""
    demand = {t: 0.0 for t in tenants}
    for j in jobs:
        demand[j.tenant] = demand.get(j.tenant, 0.0) + j.gpus * j.duration_s
    load = [0.0] * shards
    out: dict[str, int] = {}
    for t in sorted(demand, key=lambda t: (-demand[t], t)):
        s = min(range(shards), key=lambda i: (load[i], i))
        out[t] = s
        load[s] += demand[t]
    return out


@dataclass
class Shard:
    index: int
    count: int
    tenants: list[str]
    jobs: list[Job]                 # this shard's jobs (virtual seconds)
    fleet: Fleet
    chaos: list[ChaosAction]


def shard(plan: Plan, index: int, count: int) -> Shard:
    if count <= 1:
        return Shard(0, 1, list(plan.tenants), plan.jobs, plan.fleet, plan.chaos)
    owner = assign_tenants(plan.jobs, plan.tenants, count)
    tenants = [t for t in plan.tenants if owner.get(t) == index]
    jobs = [j for j in plan.jobs if owner.get(j.tenant) == index]
    total = sum(j.gpus * j.duration_s for j in plan.jobs) or 1.0
    share = sum(j.gpus * j.duration_s for j in jobs) / total
    widest = max((j.members for j in jobs), default=1)
    nodes = max(int(round(plan.fleet.nodes * share)), widest, 1)
    fleet = replace(plan.fleet, nodes=nodes)
    return Shard(index, count, tenants, jobs, fleet, _shard_chaos(plan.chaos, index, count, nodes))


def _shard_chaos(actions: list[ChaosAction], index: int, count: int, nodes: int) -> list[ChaosAction]:
    """Evictions dealt round-robin; node actions folded onto the shard's nodes; etcd actions everywhere."""
    out = []
    evicts = 0
    for a in actions:
        if a.kind == "evict":
            if evicts % count == index:
                out.append(a)
            evicts += 1
        elif a.kind in ("node_fail", "node_recover"):
            picked = sorted({int(n) % nodes for n in a.params.get("nodes", [])})
            out.append(replace(a, params={**a.params, "nodes": picked}))
        elif a.kind == "prefill":
            keep = [p for p in a.params.get("placements", []) if int(p[0]) < nodes]
            out.append(replace(a, params={**a.params, "placements": keep}))
        else:
            out.append(a)
    return out

