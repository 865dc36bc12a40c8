"""The nodes one pod fits on, and their scores, kept through the pods of one scheduling attempt.

kube's twin (fakes/kube/sim.py) schedules a gang pod by pod: each cycle walks the fleet from the
rotating start index for the first numFeasibleNodesToFind nodes that pass Filter, then scores
them. Within one attempt of one job every pod has the same request and the only change between
two cycles is the pod just placed, on one node. So the feasible nodes are found once per attempt,
over the whole fleet, and scored once (a node's score depends on its own free resources only);
after each placement only that node is checked and scored again. Each cycle then takes its first
nodes from the start index with a binary search and their scores as a slice, instead of a pass
over the fleet and a score per candidate.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fakes.sim.state import ClusterState

Scorer = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class FeasibleNodes:
    """Sorted indices of the up nodes with `gpus` free GPUs, `cpus` free CPUs and `mem` free
    memory (what Filter checks for a pod of that request), kept by `placed`; and, once asked for,
    their scores."""

    def __init__(self, state: ClusterState, free_mem: np.ndarray, gpus: int, cpus: int, mem: int):
        self.state, self.free_mem = state, free_mem
        self.gpus, self.cpus, self.mem = gpus, cpus, mem
        s = state
        ok = (s.free_gpus >= gpus) & (s.free_cpus >= cpus) & (free_mem >= mem)
        if s.nodes_down:
            ok &= s.up
        self.idx = ok.nonzero()[0]
        self.scorer: Scorer | None = None
        self.score: np.ndarray | None = None     # scorer's value of each node in idx
        self._pos, self._wrap = 0, 0             # the last `first`: idx[pos:pos+count], then idx[:wrap]
        self._count = 0

    def first(self, start: int, count: int) -> np.ndarray:
        """The first `count` of them in the rotated order from `start` (start, start+1, ..., the
        last node, then node 0 on)."""
        idx = self.idx
        pos = int(idx.searchsorted(start))
        self._pos, self._count = pos, count
        if pos == 0 or len(idx) - pos >= count:
            self._wrap = 0
            return idx[pos:pos + count]
        self._wrap = min(pos, count - (len(idx) - pos))
        return np.concatenate((idx[pos:], idx[:self._wrap]))

    def scores(self, scorer: Scorer) -> np.ndarray:
        """The scores of the nodes the last `first` returned, in its order."""
        if self.score is None:
            s, idx = self.state, self.idx
            self.scorer = scorer
            self.score = scorer(s.free_gpus[idx], s.free_cpus[idx], self.free_mem[idx])
        pos, score = self._pos, self.score
        if not self._wrap:
            return score[pos:pos + self._count]
        return np.concatenate((score[pos:], score[:self._wrap]))

    def placed(self, node: int) -> None:
        """A pod went to `node`: it stays in the set, scored anew, only if another still fits there."""
        s = self.state
        pos = int(self.idx.searchsorted(node))
        if pos == len(self.idx) or self.idx[pos] != node:
            return
        if (s.free_gpus[node] >= self.gpus and s.free_cpus[node] >= self.cpus and self.free_mem[node] >= self.mem
                and s.up[node]):
            if self.score is not None:
                at = slice(node, node + 1)
                self.score[pos] = self.scorer(s.free_gpus[at], s.free_cpus[at], self.free_mem[at])[0]
            return
        self.idx = np.concatenate((self.idx[:pos], self.idx[pos + 1:]))
        if self.score is not None:
            self.score = np.concatenate((self.score[:pos], self.score[pos + 1:]))
