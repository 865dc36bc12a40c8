"""Where the real kube-scheduler put each GPU slice: the twins' slice state (fakes/sim/slices.py,
one GpuLedger per GPU and the same allocation, fragmentation and stranded measures), filled from
the scheduler's decisions, never from a model of them.

With DRA the decision names the device (a claim's status.allocation: pool = node, device = GPU or
MIG instance), so `place_at` puts the slice on exactly that GPU (and MIG start). With the device
plugin the scheduler decides only the node; the instance is the kubelet's to pick and KWOK has no
kubelet, so `place_on_node` takes the first GPU of the node where the slice fits (the device
manager's in-order walk, as the kube twin does). A placement that does not fit its GPU is an
overrun of the GPU's capacity by the scheduler: it is counted in `overruns`, never dropped.
Holders are pod or claim uids.
"""
from __future__ import annotations

import numpy as np

from fakes.sim.slices import SliceState
from loadgen.model.gpushare import GpuShare


class SliceBook(SliceState):
    def __init__(self, fleet):
        super().__init__(fleet)
        self.overruns: list[str] = []

    # --- decisions in -----------------------------------------------------------------------------
    def place_at(self, holder: str, node: int, gpu: int, share: GpuShare, start: int = -1) -> bool:
        """The scheduler gave `holder` `share` on GPU `gpu` of `node` (MIG: the instance at `start`)."""
        led = self.ledgers[node][gpu] if gpu < len(self.ledgers[node]) else None
        slot = led.place(share, start=start if share.kind == "mig" and start >= 0 else None) if led else None
        if slot is None:
            at = f" start {start}" if start >= 0 else ""
            self.overruns.append(f"{holder}: {share} on node {node} GPU {gpu}{at}")
            return False
        self.holdings.setdefault(holder, []).append((node, gpu, slot))
        self._account(node, gpu, slot, +1)
        self._refresh(node, gpu)
        return True

    def place_on_node(self, holder: str, node: int, share: GpuShare, gpus: int = 1) -> bool:
        """The scheduler put `holder` on `node` only (device plugin): the first GPUs where it fits."""
        ok = True
        for _ in range(gpus if share.is_whole else 1):
            fits = np.flatnonzero(self.gpu_fits(share)[node])
            if not len(fits):
                self.overruns.append(f"{holder}: {share} on node {node}: no GPU has room")
                ok = False
                continue
            ok = self.place_at(holder, node, int(fits[0]), share) and ok
        return ok

    def release(self, holder: str) -> None:
        self.give_back(holder)

    def holds(self, holder: str) -> bool:
        return holder in self.holdings

    # --- figures out ------------------------------------------------------------------------------
    def whole_per_node(self) -> np.ndarray:
        out = np.zeros(len(self.ledgers), dtype=np.int32)
        for held in self.holdings.values():
            for node, _gpu, slot in held:
                out[node] += slot.share.is_whole
        return out

    def sample(self, shapes: dict, pending: set, up: np.ndarray) -> dict[str, float]:
        """What a snapshot carries (the twins' keys, in GPUs), with whole GPUs held beside."""
        out = self.figures(shapes, pending, up)
        out["allocated_whole_gpus"] = float(self.whole_per_node().sum())
        return out

    def placements(self) -> list[dict]:
        """Every slice held now: node, GPU, share, MIG start (what a test or report checks)."""
        names = [self.fleet.node_name(i) for i in range(self.fleet.nodes)]
        return [{"holder": h, "node": names[n], "gpu": g, "share": slot.share.text or "whole",
                 **({"start": slot.start} if slot.start >= 0 else {})}
                for h, held in self.holdings.items() for n, g, slot in held]
