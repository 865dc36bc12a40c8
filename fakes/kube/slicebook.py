"""Where the real kube-scheduler put each GPU slice: one GpuLedger per GPU of every node, filled
from the scheduler's decisions, never from a model of them.

With DRA the decision names the device (a claim's status.allocation: pool = node, device = GPU or
MIG instance), so `place` puts the slice on exactly that GPU (and MIG start). With the device
plugin the scheduler decides only the node; the instance is the kubelet's to pick and KWOK has no
kubelet, so `place_on_node` takes the first GPU of the node where the slice fits (the device
manager's in-order walk). A placement that does not fit its GPU is an overrun of the GPU's
capacity by the scheduler: it is counted in `overruns`, never silently dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loadgen.model.gpushare import GpuLedger, GpuShare, Slot


@dataclass
class Placement:
    """One slice the scheduler placed: holder (pod or claim uid), node index, GPU index, the slot."""
    holder: str
    node: int
    gpu: int
    slot: Slot


@dataclass
class SliceBook:
    fleet: object
    ledgers: list[list[GpuLedger]] = field(init=False)
    held: dict[str, list[Placement]] = field(default_factory=dict)
    overruns: list[str] = field(default_factory=list)
    placed_total: int = 0

    def __post_init__(self):
        f = self.fleet
        self.ledgers = []
        for i in range(f.nodes):
            pool = f.pool(i)
            self.ledgers.append([GpuLedger(pool.model(), pool.sharing) for _ in range(int(f.gpus_of[i]))])

    # --- decisions in -----------------------------------------------------------------------------
    def place(self, holder: str, node: int, gpu: int, share: GpuShare, start: int = -1) -> bool:
        """The scheduler gave `holder` `share` on GPU `gpu` of `node` (MIG: the instance at `start`)."""
        ledger = self.ledgers[node][gpu]
        slot = ledger.place(share, start=start if share.kind == "mig" and start >= 0 else None)
        if slot is None:
            self.overruns.append(f"{holder}: {share} on node {node} GPU {gpu}"
                                 + (f" start {start}" if start >= 0 else ""))
            return False
        self.held.setdefault(holder, []).append(Placement(holder, node, gpu, slot))
        self.placed_total += 1
        return True

    def place_on_node(self, holder: str, node: int, share: GpuShare, gpus: int = 1) -> bool:
        """The scheduler put `holder` on `node` only (device plugin): first GPUs where it fits."""
        ok = True
        for _ in range(gpus if share.is_whole else 1):
            gpu = next((g for g, led in enumerate(self.ledgers[node]) if led.fits(share)), None)
            if gpu is None:
                self.overruns.append(f"{holder}: {share} on node {node}: no GPU has room")
                ok = False
                continue
            ok = self.place(holder, node, gpu, share) and ok
        return ok

    def release(self, holder: str) -> None:
        for p in self.held.pop(holder, []):
            self.ledgers[p.node][p.gpu].release(p.slot)

    def holds(self, holder: str) -> bool:
        return holder in self.held

    # --- figures out ------------------------------------------------------------------------------
    def whole_per_node(self) -> np.ndarray:
        out = np.zeros(len(self.ledgers), dtype=np.int32)
        for ps in self.held.values():
            for p in ps:
                if p.slot.share.is_whole:
                    out[p.node] += 1
        return out

    def figures(self) -> dict[str, float]:
        """Now, in GPUs: capacity, allocated at compute and at memory share, whole GPUs held, slices held."""
        comp = mem = whole = 0.0
        slices = 0
        for ps in self.held.values():
            for p in ps:
                led = self.ledgers[p.node][p.gpu]
                comp += p.slot.share.compute_share(led.model, led.sharing)
                mem += p.slot.share.memory_share(led.model, led.sharing)
                whole += p.slot.share.is_whole
                slices += 1
        return {"capacity_gpus": float(self.fleet.total_gpus), "allocated_compute_gpus": round(comp, 6),
                "allocated_memory_gpus": round(mem, 6), "allocated_whole_gpus": whole, "slices_held": slices}

    def placements(self) -> list[dict]:
        """Every slice held now: node, GPU, share, MIG start (what a test or report checks)."""
        names = [self.fleet.node_name(i) for i in range(self.fleet.nodes)]
        return [{"holder": p.holder, "node": names[p.node], "gpu": p.gpu, "share": p.slot.share.text or "whole",
                 **({"start": p.slot.start} if p.slot.start >= 0 else {})}
                for ps in self.held.values() for p in ps]
