"""Rendezvous: from every member's process running to the first all-reduce. Pure.

One attempt takes (base + per_member x members + per_extra_leaf x (leaves - 1) + misaligned) x a
lognormal jitter, drawn from (seed, job, attempt) so it does not depend on the order jobs reach it.
A gang is rail-misaligned when its members span several nodes and either several leaves (rings
cross the spine) or share nodes with others (members of fewer than all a node's GPUs cannot count
on meeting their peers on the same rail). An attempt longer than timeout_s fails the start: the
job restarts per its scheduler's policy (loadgen/drive/lifecycle.py) and the failure is counted.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from loadgen.model.fleet import Fleet
from loadgen.model.startup.spec import RendezvousSpec


class Attempt(NamedTuple):
    # a tuple, not a frozen dataclass: one per start, and a frozen dataclass's __init__ sets each
    # field through object.__setattr__
    seconds: float          # how long this attempt takes (or would, had it not timed out)
    timed_out: bool
    leaves: int
    misaligned: bool


class Rendezvous:
    def __init__(self, spec: RendezvousSpec, fleet: Fleet, seed: int):
        self.spec, self.fleet, self.seed = spec, fleet, int(seed)
        self._leaf = fleet.leaf_of.tolist()

    def misaligned(self, nodes: tuple[int, ...], gpus_per_member: int) -> tuple[int, bool]:
        if len(nodes) <= 1:         # one node (most jobs) or none: one leaf, nothing to misalign
            return 1, False
        uniq = set(nodes)
        leaf = self._leaf
        leaves = len({leaf[n] for n in uniq}) if uniq else 1
        multi_node = len(uniq) > 1
        return leaves, multi_node and (leaves > 1 or gpus_per_member < self.fleet.gpus_per_node)

    def attempt(self, job_id: int, attempt: int, members: int, gpus_per_member: int,
                nodes: tuple[int, ...]) -> Attempt:
        s = self.spec
        leaves, mis = self.misaligned(nodes, gpus_per_member)
        base = (s.base_s + s.per_member_s * members + s.per_extra_leaf_s * (leaves - 1)
                + (s.misaligned_s if mis else 0.0))
        if s.jitter_sigma > 0 and base > 0:
            base *= jitter(self.seed, job_id & 0xFFFFFFFF, attempt, s.jitter_sigma)
        return Attempt(base, base > s.timeout_s, leaves, mis)


@functools.lru_cache(maxsize=1 << 16)
def jitter(seed: int, job_key: int, attempt: int, sigma: float) -> float:
    """One attempt's lognormal factor, from its own seeded Generator. A pure function of its
    arguments, remembered: the schedulers of one run (each with its own Rendezvous, the same seed
    and jobs) then build the Generator, about 50 us, once per attempt instead of once each."""
    rng = np.random.default_rng([seed, job_key, attempt, 0x4E43])
    return float(rng.lognormal(0.0, sigma))
