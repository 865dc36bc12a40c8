"""Allocation state of a simulated fleet: free GPUs/CPUs per node plus who holds what.

`count_ge[g]` (nodes with at least g free GPUs) is kept incrementally so the schedulers can
reject an infeasible member in O(1) before doing any O(nodes) work.

A fleet with node pools (GPU sharing) also keeps `slices` (fakes/sim/slices.py): there `free_gpus`
counts the idle GPUs a whole-GPU member may take (none on MIG nodes), and a member with a share
(Job.share) takes one slice of one GPU: `take(..., share=, pick=)`. `allocated` counts whole GPUs
only; slices are counted at their share of a GPU in `slices.allocated_compute`. A fleet without
pools has no `slices` and behaves exactly as before.
"""
from __future__ import annotations

import numpy as np

from fakes.sim.slices import SliceState
from loadgen.model.fleet import Fleet
from loadgen.model.gpushare import GpuShare
from loadgen.model.job import Job


class ClusterState:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        self.gpn = fleet.gpus_per_node
        self.cpn = fleet.cpus_per_node
        self.free_gpus = np.full(fleet.nodes, self.gpn, dtype=np.int16)
        self.free_cpus = np.full(fleet.nodes, self.cpn, dtype=np.int32)
        self.up = np.ones(fleet.nodes, dtype=bool)
        self.nodes_down = 0            # nodes not up (set_up keeps it): 0 lets a filter skip `up`
        self.leaf_of = fleet.leaf_of
        # up nodes by free GPU count: a list, as summing a numpy slice of 9 costs more than the
        # Python sum (count_ge runs on every scheduling attempt)
        self._hist = [0] * (self.gpn + 1)
        self._hist[self.gpn] = fleet.nodes
        self.holdings: dict[int, list[tuple[int, int, int]]] = {}   # owner -> [(node, gpus, cpus)]
        self.allocated = 0
        self.slices = SliceState(fleet) if fleet.pools else None
        self.version = 0            # sliced fleets: bumped by every take and give_back (a cache key)
        if self.slices is not None:
            self.free_gpus = self.slices.idle_whole()
            self._hist = [0] * (self.gpn + 1)
            for g in self.free_gpus.tolist():
                self._hist[g] += 1

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

    def take(self, owner: int, node: int, gpus: int, cpus: int, share: GpuShare | None = None,
             pick: str = "first") -> None:
        """`owner` takes `gpus` whole GPUs (or, with a share, one slice on the GPU `pick` chooses)
        and `cpus` CPUs of `node`."""
        if self.slices is not None:
            self._take_sliced(owner, node, gpus, cpus, share, pick)
            return
        assert share is None or share.is_whole, "a GPU share needs a fleet with node pools"
        before = int(self.free_gpus[node])
        assert before >= gpus, f"node {node} has {before} free GPUs, {gpus} asked"
        self.free_gpus[node] = before - gpus
        self.free_cpus[node] -= cpus
        self._move(node, before, before - gpus)
        self.holdings.setdefault(owner, []).append((node, gpus, cpus))
        self.allocated += gpus

    def _take_sliced(self, owner: int, node: int, gpus: int, cpus: int, share: GpuShare | None, pick: str) -> None:
        self.version += 1
        before = int(self.free_gpus[node])
        if share is None or share.is_whole:
            self.slices.take_whole(owner, node, gpus)
            self.allocated += gpus
        else:
            self.slices.place(owner, node, share, pick)
            gpus = 1
        self._set_free(node, before)
        self.free_cpus[node] -= cpus
        self.holdings.setdefault(owner, []).append((node, gpus, cpus))

    def _set_free(self, node: int, before: int) -> None:
        after = self.slices.idle_whole_at(node)
        self.free_gpus[node] = after
        self._move(node, before, after)

    def give_back(self, owner: int, node: int | None = None) -> list[tuple[int, int, int]]:
        """Release everything `owner` holds (or only what it holds on `node`)."""
        if self.slices is not None:
            return self._give_back_sliced(owner, node)
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

    def _give_back_sliced(self, owner: int, node: int | None) -> list[tuple[int, int, int]]:
        self.version += 1
        held = self.holdings.get(owner, [])
        keep, gone = [], []
        for h in held:
            (gone if node is None or h[0] == node else keep).append(h)
        for n, _k, slot in self.slices.holdings.get(owner, []):
            if slot.share.is_whole and (node is None or n == node):
                self.allocated -= 1
        touched = {n for n, _, _ in gone}
        before = {n: int(self.free_gpus[n]) for n in touched}
        for n in touched:
            self.slices.give_back(owner, n)
        for n, _, c in gone:
            self.free_cpus[n] += c
        for n in touched:
            self._set_free(n, before[n])
        if keep:
            self.holdings[owner] = keep
        else:
            self.holdings.pop(owner, None)
        return gone

    def book_stale(self, node: int, k: int, milli: int) -> None:
        """The scheduler books `milli` on GPU k of `node` beyond what is held (SliceState.book_stale)."""
        self.version += 1
        before = int(self.free_gpus[node])
        self.slices.book_stale(node, k, milli)
        self._set_free(node, before)

    def clear_stale(self) -> None:
        """The scheduler rebuilt its books: only what is held counts again."""
        nodes = self.slices.clear_stale() if self.slices is not None else []
        if nodes:
            self.version += 1
        for n in nodes:
            self._set_free(n, int(self.free_gpus[n]))

    # --- what one member of a job can use -----------------------------------------------------
    def member_fits(self, job: Job) -> bool:
        """Necessary condition for one member of `job` right now (a share or a GPU model asked:
        some up node has room on one GPU; else the whole-GPU count test of `fits`)."""
        if self.slices is None or not (job.share or job.gpu_spec):
            return self.count_ge(job.gpus_per_member) >= 1
        return bool((self.member_nodes(job) & self.up).any())

    def member_nodes(self, job: Job) -> np.ndarray:
        """Nodes where the GPUs of one member of `job` fit now (down nodes and CPUs not checked)."""
        if self.slices is None or not (job.share or job.gpu_spec):
            return self.free_gpus >= job.gpus_per_member
        share = job.gpu_share
        if share.is_whole:
            ok = self.free_gpus >= job.gpus_per_member
            mask = self.slices.model_mask(job.gpu_models)
            return ok if mask is None else ok & mask
        return self.slices.node_fits(share, job.gpu_models)

    def member_capacity(self, job: Job) -> np.ndarray:
        """Per node, members of `job` that fit now by GPUs: whole GPUs // per member, or (a share)
        the GPUs one slice fits on (a lower bound where several slices share one GPU)."""
        if not self.sliced(job) or job.gpu_share.is_whole:
            cap = self.free_gpus // job.gpus_per_member
            mask = self.slices.model_mask(job.gpu_models) if self.slices is not None else None
            return cap if mask is None else np.where(mask, cap, 0)
        fit = self.slices.gpu_fits(job.gpu_share).sum(axis=1)
        mask = self.slices.model_mask(job.gpu_models)
        return fit if mask is None else np.where(mask, fit, 0)

    def feasible_for(self, job: Job) -> np.ndarray:
        """Up nodes where one member of `job` fits now, CPUs included."""
        return self.member_nodes(job) & (self.free_cpus >= job.cpus_per_member) & self.up

    def sliced(self, job: Job) -> bool:
        """Whether `job` needs the slice-aware path (a share, or GPU models it accepts)."""
        return self.slices is not None and bool(job.share or job.gpu_spec)

    def set_up(self, node: int, up: bool) -> None:
        if self.up[node] == up:
            return
        self.version += 1
        free = int(self.free_gpus[node])
        self._hist[free] += 1 if up else -1
        self.up[node] = up
        self.nodes_down += -1 if up else 1

    def owners_on(self, nodes: set[int]) -> list[int]:
        return [o for o, held in self.holdings.items() if any(n in nodes for n, _, _ in held)]

    # --- placement helpers ------------------------------------------------------------------
    def feasible(self, gpus: int, cpus: int) -> np.ndarray:
        return (self.free_gpus >= gpus) & (self.free_cpus >= cpus) & self.up

    def free_view(self) -> np.ndarray:
        """Free GPUs per node as schedulers see them (down nodes offer nothing)."""
        return np.where(self.up, self.free_gpus, 0)
