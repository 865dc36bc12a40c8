"""GPU slices as the real Ray GCS placed them: the node of every bundle (the GCS's placement group
table, which the driver reports when a group is ready) booked in a slice ledger of the fleet
(fakes/sim/slices.SliceState), so summary.json's `gpu_sharing` (allocation by compute and memory
share, ATC '23 fragmentation, stranded capacity) has the definitions the other real backends and
the twins use.

The GCS names the node, not the GPU: which GPU instance a bundle holds is the raylet's choice,
and Ray does not report it (a task run inside the bundle could ask ray.get_gpu_ids(); that costs a
worker per bundle). The ledger takes it by the raylet's own rule (fakes/ray/fakelets/book.py, with
sources): a fraction on the best-fitting GPU, the lowest index on a tie; whole GPUs the lowest idle
ones. The raylet applies that rule to the bundles in the order it prepares them, which is the order
the GCS creates groups and the driver reports them, and releases before what the GCS places after;
tests/test_ray_gpushare_real.py checks the raylets' GPU ids against the same rule. A bundle the
ledger cannot hold on its node (the two orders differed) is counted in `conflicts`, never forced.

Owners are job ids (prefill groups: their negative ids). Only a fleet with node pools keeps slices.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from fakes.sim.slices import SliceState, idle_whole_up, up_mask
from loadgen.model.gpushare import WHOLE
from loadgen.model.job import Job
from loadgen.model.target import Snapshot

SLICES_FILE = "gpu-slices.jsonl"        # one line per bundle booked, as the real kube target writes


class RaySlices:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

    def _init_slices(self) -> None:
        f = self.ctx.fleet
        self.slices: SliceState | None = SliceState(f) if f.pools else None
        self.shapes: dict[tuple[str, int, str], int] = {}      # the arrived shape mix (ATC '23 target workload)
        self.slice_counts = {"bundles": 0, "conflicts": 0}
        self.slice_log = None

    def _count_shape(self, job: Job) -> None:
        if self.slices is not None:
            key = (job.share, job.gpus_per_member, job.gpu_spec)
            self.shapes[key] = self.shapes.get(key, 0) + 1

    def _book(self, owner: int, job: Job | None, nodes: list[int], only: set[int] | None = None,
              gpus: int = 0) -> None:
        """Hold what bundle i of `owner` takes on nodes[i] (the bundles in `only`, if given): one
        slice of the job's share, or its whole GPUs (`gpus` of them for a prefill group)."""
        if self.slices is None:
            return
        share = job.gpu_share if job is not None else WHOLE
        whole = gpus or (job.gpus_per_member if job is not None else 1)
        for i, n in enumerate(nodes):
            if n < 0 or (only is not None and i not in only):
                continue
            self.slice_counts["bundles"] += 1
            if share.is_whole:
                if int((self.slices.idle[n] & self.slices.whole_ok[n]).sum()) < whole:   # this node's row only
                    self._slice_conflict(owner, n, share.text)
                    continue
                ks = self.slices.take_whole(owner, n, whole)
            else:
                if not self.slices.gpu_fits(share)[n].any():
                    self._slice_conflict(owner, n, share.text)
                    continue
                ks = [self.slices.place(owner, n, share, pick="best")]
            self._log_slice(owner, i, n, ks, share.text)

    def _unbook(self, owner: int, nodes: set[int] | None = None) -> None:
        """Give back what `owner` holds (on `nodes` only, if given: a dead raylet's bundles)."""
        if self.slices is None:
            return
        if nodes is None:
            self.slices.give_back(owner)
        else:
            for n in nodes:
                self.slices.give_back(owner, n)

    def _slice_conflict(self, owner: int, node: int, share: str) -> None:
        self.slice_counts["conflicts"] += 1
        if self.slice_counts["conflicts"] <= 20:
            self.errors.append(f"slices: group {owner} on node {node}: {share or 'whole'} fits no GPU in the ledger")

    def _log_slice(self, owner: int, bundle: int, node: int, gpus: list[int], share: str) -> None:
        if self.run_dir is None:
            return
        if self.slice_log is None:
            self.slice_log = open(Path(self.run_dir) / SLICES_FILE, "a")
        self.slice_log.write(json.dumps({"t": round(self.clock.at(time.monotonic()), 3), "id": owner,
                                         "bundle": bundle, "node": node, "gpus": gpus,
                                         "share": share or "whole"}) + "\n")

    def _close_slices(self) -> None:
        if self.slice_log is not None:
            self.slice_log.close()
            self.slice_log = None

    # -- what the run reports --------------------------------------------------------------------
    def used_per_node(self) -> np.ndarray:
        """With slices: whole GPUs held only, a slice counted in gpu_sharing (as the twins count)."""
        if self.slices is None:
            return super().used_per_node()
        used = self.slices.whole_held_per_node()
        used[sorted(self.dead)] = 0
        return used

    def free_per_node(self) -> np.ndarray:
        """With slices: idle GPUs a whole-GPU member may take, as the twins see them."""
        if self.slices is None:
            return super().free_per_node()
        return idle_whole_up(self.slices, self.dead)

    def snapshot(self, now: float) -> Snapshot:
        snap = super().snapshot(now)
        if self.slices is None:
            return snap
        up = up_mask(self.n, self.dead)
        pending = {(job.share, job.gpus_per_member, job.gpu_spec) for job in self.pending.values()}
        return dataclasses.replace(snap, gpu_sharing=self.slices.real_sample(self.shapes, pending, up))

    def slice_figures(self) -> dict:
        """Bundles booked and bundles the ledger could not hold where the GCS put them."""
        return dict(self.slice_counts) if self.slices is not None else {}
