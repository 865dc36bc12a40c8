"""Allocation state of a simulated fleet: free GPUs/CPUs per node plus who holds what.

`count_ge[g]` (nodes with at least g free GPUs) is kept incrementally so the schedulers can
reject an infeasible member in O(1) before doing any O(nodes) work.
"""
from __future__ import annotations

import numpy as np

from loadgen.model.fleet import Fleet


class ClusterState:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        self.gpn = fleet.gpus_per_node
        self.cpn = fleet.cpus_per_node
        self.free_gpus = np.full(fleet.nodes, self.gpn, dtype=np.int16)
        self.free_cpus = np.full(fleet.nodes, self.cpn, dtype=np.int32)
        self.up = np.ones(fleet.nodes, dtype=bool)
        self.leaf_of = fleet.leaf_of
        # up nodes by free GPU count: a list, as summing a numpy slice of 9 costs more than the
        # Python sum (count_ge runs on every scheduling attempt)
        self._hist = [0] * (self.gpn + 1)
        self._hist[self.gpn] = fleet.nodes
        self.holdings: dict[int, list[tuple[int, int, int]]] = {}   # owner -> [(node, gpus, cpus)]
        self.allocated = 0

    # --- O(1) feasibility -------------------------------------------------------------------
    def count_ge(self, gpus: int) -> int:
        """Up nodes with at least `gpus` free GPUs."""
        return sum(self._hist[gpus:])

    def fits(self, members: int, gpus: int) -> bool:
        """Necessary condition for placing `members` members of `gpus` GPUs each right now."""
        if gpus >= self.gpn:
            return self.count_ge(self.gpn) >= members
        return self.count_ge(gpus) >= 1   # sub-node members may share one node

    def max_free(self) -> int:
        return max((g for g, n in enumerate(self._hist) if n), default=0)

    # --- mutation ---------------------------------------------------------------------------
    def _move(self, node: int, before: int, after: int) -> None:
        if self.up[node]:
            self._hist[before] -= 1
            self._hist[after] += 1

    def take(self, owner: int, node: int, gpus: int, cpus: int) -> None:
        before = int(self.free_gpus[node])
        assert before >= gpus, f"node {node} has {before} free GPUs, {gpus} asked"
        self.free_gpus[node] = before - gpus
        self.free_cpus[node] -= cpus
        self._move(node, before, before - gpus)
        self.holdings.setdefault(owner, []).append((node, gpus, cpus))
        self.allocated += gpus

    def give_back(self, owner: int, node: int | None = None) -> list[tuple[int, int, int]]:
        """Release everything `owner` holds (or only what it holds on `node`)."""
        held = self.holdings.get(owner, [])
        keep, gone = [], []
        for h in held:
            (gone if node is None or h[0] == node else keep).append(h)
        for n, g, c in gone:
            before = int(self.free_gpus[n])
            self.free_gpus[n] = before + g
            self.free_cpus[n] += c
            self._move(n, before, before + g)
            self.allocated -= g
        if keep:
            self.holdings[owner] = keep
        else:
            self.holdings.pop(owner, None)
        return gone

    def set_up(self, node: int, up: bool) -> None:
        if self.up[node] == up:
            return
        free = int(self.free_gpus[node])
        self._hist[free] += 1 if up else -1
        self.up[node] = up

    def owners_on(self, nodes: set[int]) -> list[int]:
        return [o for o, held in self.holdings.items() if any(n in nodes for n, _, _ in held)]

    # --- placement helpers ------------------------------------------------------------------
    def feasible(self, gpus: int, cpus: int) -> np.ndarray:
        return (self.free_gpus >= gpus) & (self.free_cpus >= cpus) & self.up

    def free_view(self) -> np.ndarray:
        """Free GPUs per node as schedulers see them (down nodes offer nothing)."""
        return np.where(self.up, self.free_gpus, 0)
