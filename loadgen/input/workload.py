"""The seeded bimodal gang workload: Poisson arrivals, lognormal durations, faker-named tenants.

Rates follow Little's law: offered GPU demand = arrival rate x E[gpus x duration]. The churn
multiplier c multiplies the arrival rate and divides every duration by c, so offered demand
stays put while job starts and ends per second grow c-fold: the extra load lands on the
schedulers and their control planes, not on capacity.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from faker import Faker

from loadgen.input import limits
from loadgen.input.pools import holders
from loadgen.input.scenario import Scenario
from loadgen.model.gpushare import parse_share
from loadgen.model.job import Job


@dataclass(frozen=True)
class WorkloadInfo:
    jobs: int
    churn_multiplier: float
    target_allocation: float
    offered_load: float
    arrival_rate_per_s: float          # after the churn multiplier
    baseline_arrival_rate_per_s: float
    mean_gpus_per_job: float
    mean_members_per_job: float        # pods (members) per job, measured on the jobs generated
    mean_duration_s: float             # after the churn multiplier
    churn_per_s: float                 # job starts + ends per second at steady state
    tenants: list[str]
    source: str                        # "generator" or the trace path

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:24].rstrip("-") or "tenant"


def tenant_names(n: int, seed: int) -> list[str]:
    fake = Faker()
    fake.seed_instance(seed)
    names: list[str] = []
    while len(names) < n:
        name = _slug(fake.company())
        if name not in names:
            names.append(name)
    return names


def tenant_weights(n: int) -> np.ndarray:
    """Zipf-like shares: a few big tenants and a tail, so fair share has something to do."""
    w = 1.0 / np.arange(1, n + 1)
    return w / w.sum()


def slice_size(share_text: str, pools: tuple) -> float:
    """GPUs one member of this share takes, by compute (1 for a whole GPU), on the first pool that
    can hold it: what offered load counts."""
    share = parse_share(share_text)
    if share.is_whole:
        return 1.0
    pool = next(iter(holders(share, pools)), None)
    return share.compute_share(pool.model(), pool.sharing) if pool else 1.0


def _class_moments(cls: dict, pools: tuple = ()) -> tuple[float, float, float]:
    """E[gpus], E[duration], E[gpus x duration] of one class (duration truncated at max); a class
    asking for a slice counts each member by its slice's share of a GPU."""
    shapes = cls["shapes"]
    w = np.array([s["weight"] for s in shapes], dtype=float)
    w = w / w.sum()
    per = slice_size(cls.get("gpu_share", ""), pools)
    gpus = np.array([s["members"] * s["gpus"] * per for s in shapes], dtype=float)
    d = cls["duration_s"]
    mu, sigma = np.log(d["median"]), d["sigma"]
    mean_d = float(np.exp(mu + sigma**2 / 2))
    if d["max"] is not None:  # mean of min(X, max) for lognormal X, by quadrature on a fine grid
        xs = np.exp(mu + sigma * np.linspace(-8, 8, 4001))
        pdf = np.exp(-0.5 * np.linspace(-8, 8, 4001) ** 2)
        pdf /= pdf.sum()
        mean_d = float((np.minimum(xs, d["max"]) * pdf).sum())
    eg = float((w * gpus).sum())
    return eg, mean_d, eg * mean_d


def arrival_rate(scenario: Scenario) -> float:
    """Jobs per second the generator offers: Little's law at the offered load, times the churn."""
    wl = scenario.section("workload")
    classes = wl["classes"]
    shares = np.array([c["share"] for c in classes.values()], dtype=float)
    e_gpu_s = float(sum(s * _class_moments(c, scenario.pools)[2] for s, c in zip(shares, classes.values())))
    offered = wl["offered_load"] if wl["offered_load"] is not None else wl["target_allocation"]
    return offered * scenario.total_gpus / e_gpu_s * wl["churn_multiplier"]


def preflight(scenario: Scenario, expected_jobs: float | None = None, rate: float | None = None) -> None:
    """The generated workload's bounds, checked without generating it."""
    if rate is None:
        rate = arrival_rate(scenario)
        expected_jobs = rate * scenario.data["duration_h"] * 3600.0
    limits.check_generated_shapes(scenario)
    limits.check_jobs_expected(scenario, expected_jobs, rate)


def generate(scenario: Scenario, seed: int | None = None, duration_h: float | None = None,
             churn_multiplier: float | None = None) -> tuple[list[Job], WorkloadInfo]:
    """The job list a scenario describes, identical for the same scenario and seed."""
    seed = scenario.seed if seed is None else seed
    wl = scenario.section("workload")
    fleet = scenario.section("fleet")
    churn = float(churn_multiplier if churn_multiplier is not None else wl["churn_multiplier"])
    horizon = 3600.0 * (duration_h if duration_h is not None else scenario.data["duration_h"])
    classes = wl["classes"]
    names = list(classes)
    shares = np.array([classes[c]["share"] for c in names], dtype=float)
    moments = [_class_moments(classes[c], scenario.pools) for c in names]
    e_gpu_s = float(sum(s * m[2] for s, m in zip(shares, moments)))
    e_gpus = float(sum(s * m[0] for s, m in zip(shares, moments)))
    e_dur = float(sum(s * m[1] for s, m in zip(shares, moments)))
    offered = wl["offered_load"] if wl["offered_load"] is not None else wl["target_allocation"]
    base_rate = offered * scenario.total_gpus / e_gpu_s
    rate = base_rate * churn
    preflight(scenario, rate * horizon, rate)

    rng = np.random.default_rng(seed)
    # Poisson process: exponential gaps, drawn in one go with headroom, cut at the horizon.
    n_guess = int(rate * horizon + 10 * np.sqrt(rate * horizon + 1) + 16)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n_guess))
    while arrivals[-1] < horizon:
        more = arrivals[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n_guess))
        arrivals = np.concatenate([arrivals, more])
    arrivals = arrivals[arrivals < horizon]
    n = len(arrivals)

    cls_idx = rng.choice(len(names), size=n, p=shares / shares.sum())
    members = np.empty(n, dtype=np.int64)
    gpus = np.empty(n, dtype=np.int64)
    durations = np.empty(n, dtype=float)
    priorities = np.empty(n, dtype=np.int64)
    for ci, cname in enumerate(names):
        sel = np.flatnonzero(cls_idx == ci)
        c = classes[cname]
        sw = np.array([s["weight"] for s in c["shapes"]], dtype=float)
        pick = rng.choice(len(sw), size=len(sel), p=sw / sw.sum())
        members[sel] = np.array([s["members"] for s in c["shapes"]])[pick]
        gpus[sel] = np.array([s["gpus"] for s in c["shapes"]])[pick]
        d = c["duration_s"]
        dur = rng.lognormal(np.log(d["median"]), d["sigma"], size=len(sel))
        if d["max"] is not None:
            dur = np.minimum(dur, d["max"])
        durations[sel] = np.maximum(dur / churn, 1.0)
        priorities[sel] = c["priority"]

    tenants = tenant_names(wl["tenants"], seed)
    tenant_idx = rng.choice(len(tenants), size=n, p=tenant_weights(len(tenants)))
    cpus_per_gpu = fleet["cpus_per_node"] // fleet["gpus_per_node"]
    gpu_share = [parse_share(classes[c].get("gpu_share", "")).text for c in names]
    jobs = [
        Job(id=i, tenant=tenants[t], queue=f"q-{tenants[t]}", cls=names[c], members=int(m),
            gpus_per_member=int(g), duration_s=round(float(dur), 3), submit_s=round(float(a), 6),
            min_available=int(m), cpus_per_member=0 if gpu_share[c] else int(g) * cpus_per_gpu, priority=int(p),
            name=f"{tenants[t][:12]}-{names[c]}-{i}", share=gpu_share[c])
        for i, (a, c, m, g, dur, t, p) in enumerate(
            zip(arrivals, cls_idx, members, gpus, durations, tenant_idx, priorities))
    ]
    info = WorkloadInfo(
        jobs=n, churn_multiplier=churn, target_allocation=wl["target_allocation"], offered_load=offered,
        arrival_rate_per_s=rate, baseline_arrival_rate_per_s=base_rate, mean_gpus_per_job=e_gpus,
        mean_members_per_job=float(members.mean()) if n else 0.0, mean_duration_s=e_dur / churn, churn_per_s=2 * rate,
                        tenants=tenants, source="generator")
    return jobs, info


def describe(jobs: list[Job], churn: float, target_allocation: float, offered: float, total_gpus: int,
             source: str) -> WorkloadInfo:
    """WorkloadInfo measured from a given job list (trace replays)."""
    if not jobs:
        return WorkloadInfo(0, churn, target_allocation, offered, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [], source)
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs) or 1.0
    rate = len(jobs) / span
    gpu_s = sum(j.gpus * j.duration_s for j in jobs)
    return WorkloadInfo(
        jobs=len(jobs), churn_multiplier=churn, target_allocation=target_allocation,
        offered_load=gpu_s / span / total_gpus, arrival_rate_per_s=rate, baseline_arrival_rate_per_s=rate / churn,
        mean_gpus_per_job=float(np.mean([j.gpus for j in jobs])),
        mean_members_per_job=float(np.mean([j.members for j in jobs])),
        mean_duration_s=float(np.mean([j.duration_s for j in jobs])), churn_per_s=2 * rate,
        tenants=sorted({j.tenant for j in jobs}), source=source)
