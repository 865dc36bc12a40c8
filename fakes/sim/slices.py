"""Slice state of a simulated fleet whose node pools share GPUs: one GpuLedger per GPU (the
vocabulary's rules, loadgen.model.gpushare) plus numpy summaries per GPU, so a scheduler can ask
"where does this share fit" over 10,000 nodes in one vectorised step.

Arrays are (nodes, gpus_per_node); GPUs a node does not have (openb nodes hold 1, 2, 4 or 8) are
never free. `idle` GPUs hold nothing; a whole-GPU member may take an idle GPU of a whole, fraction
or shards pool, never of a MIG pool (loadgen.model.gpushare.fits_mode). Which GPU of a node a slice
takes is the scheduler's device-level choice, `pick`:
  "first"  the lowest-index GPU that fits (a device plugin's or DRA allocator's in-order walk)
  "best"   the fitting GPU with the least free left after it (best fit: Ray's raylet for a
           fractional demand, binpacking device policies)
  "worst"  the fitting GPU with the most free left (spread device policies)

A scheduler may also book more than is held: `stale_milli` per GPU, what it still counts beyond
the holdings until it rebuilds its books (Volcano v1.14.1's vGPU books, fakes/volcano/sim.py). The
scheduler's questions and choices (gpu_fits, node_fits, place, take_whole, idle_whole) count it;
the measures (fragmentation, stranded, figures) see only what is held, as a real run's read-back
does. Nothing is booked unless a scheduler asks, so every other twin is unchanged.
"""
from __future__ import annotations

import numpy as np

from loadgen.model.fleet import Fleet
from loadgen.model.gpushare import MILLI, GpuLedger, GpuShare, Slot, fits_mode, parse_share

PICKS = ("first", "best", "worst")


class SliceState:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        n, g = fleet.nodes, fleet.gpus_per_node
        self.exists = np.arange(g)[None, :] < fleet.gpus_of[:, None]
        self.ledgers: list[list[GpuLedger]] = []
        for i in range(n):
            pool = fleet.pool(i)
            model = pool.model()
            self.ledgers.append([GpuLedger(model, pool.sharing) for _ in range(int(fleet.gpus_of[i]))])
        mode_of = np.array([fleet.pools[int(p)].sharing.mode if fleet.pools else "whole" for p in
                            (fleet.pool_of if fleet.pools else np.zeros(n, dtype=int))], dtype=object)
        self.mig_node = mode_of == "mig"
        self.whole_ok = self.exists & ~self.mig_node[:, None]       # where a whole GPU may be handed out
        self.idle = self.exists.copy()
        self.free_compute = self.exists.astype(float)
        self.free_milli = np.where(self.exists & (mode_of == "fraction")[:, None], MILLI, 0).astype(np.int32)
        spg = np.array([fleet.pool(i).sharing.shards_per_gpu for i in range(n)], dtype=np.int32) \
            if fleet.pools else np.zeros(n, dtype=np.int32)
        self.free_shards = np.where(self.exists & (mode_of == "shards")[:, None], spg[:, None], 0).astype(np.int32)
        self.shards_per_gpu = spg
        self.profiles = sorted({p.name for i in {int(x) for x in np.unique(fleet.pool_of)} if fleet.pools
                                for p in fleet.pools[i].model().mig})
        self.mig_fit = {p: np.zeros((n, g), dtype=bool) for p in self.profiles}
        for i in np.flatnonzero(self.mig_node):
            for k in range(int(fleet.gpus_of[i])):
                self._refresh(int(i), k)
        models = fleet.model_names()
        self.model_of = fleet.model_of
        self._model_index = {m: models.index(m) for m in models}
        self.holdings: dict[int, list[tuple[int, int, Slot]]] = {}     # owner -> [(node, gpu, slot)]
        self.allocated_compute = 0.0       # GPUs, slices at their compute share, whole GPUs at 1
        self.allocated_memory = 0.0
        self.capacity = float(self.exists.sum())
        self._sizes: dict[GpuShare, float] = {}
        self.stale_milli = np.zeros((n, g), dtype=np.int32)
        self.any_stale = False

    # --- questions ---------------------------------------------------------------------------
    def gpu_fits(self, share: GpuShare, booked: bool = True) -> np.ndarray:
        """(nodes, gpus) where one member of `share` fits right now: by the scheduler's books
        (`booked`, stale bookings count), or by what is held only."""
        stale = booked and self.any_stale
        if share.kind == "whole":
            return self.idle & self.whole_ok & (self.stale_milli == 0) if stale else self.idle & self.whole_ok
        if share.kind == "milli":
            return self.free_milli - self.stale_milli >= share.amount if stale else self.free_milli >= share.amount
        if share.kind == "shards":
            return self.free_shards >= share.amount
        fit = self.mig_fit.get(share.profile)
        return fit if fit is not None else np.zeros_like(self.exists)

    def model_mask(self, models: tuple[str, ...]) -> np.ndarray | None:
        """Nodes whose GPU model is one of `models` (None: any)."""
        if not models:
            return None
        idx = [self._model_index[m] for m in models if m in self._model_index]
        return np.isin(self.model_of, idx)

    def node_fits(self, share: GpuShare, models: tuple[str, ...] = ()) -> np.ndarray:
        """Nodes where one member of `share` fits (whole: one idle GPU), on an accepted model."""
        ok = self.gpu_fits(share).any(axis=1)
        mask = self.model_mask(models)
        return ok if mask is None else ok & mask

    def idle_whole(self) -> np.ndarray:
        """Idle GPUs per node that a whole-GPU member may take (0 on MIG nodes), by the books."""
        return self.gpu_fits(GpuShare()).sum(axis=1).astype(np.int16)

    def idle_whole_at(self, node: int) -> int:
        free = self.idle[node] & self.whole_ok[node]
        return int((free & (self.stale_milli[node] == 0)).sum() if self.any_stale else free.sum())

    def size_of(self, share: GpuShare) -> float:
        """GPUs one slice of `share` takes by compute, on the first pool that can hold it (1 for a
        whole GPU): what a scheduler's queue books count it as."""
        if share.is_whole:
            return 1.0
        if share not in self._sizes:
            size = 1.0
            for pool in self.fleet.pools:
                if fits_mode(share, pool.sharing) and (share.kind != "mig" or pool.model().mig_profile(share.profile)):
                    size = share.compute_share(pool.model(), pool.sharing)
                    break
            self._sizes[share] = size
        return self._sizes[share]

    # --- mutation ----------------------------------------------------------------------------
    def place(self, owner: int, node: int, share: GpuShare, pick: str = "first") -> int:
        """Put one member of `share` on `node`, on the GPU `pick` chooses; returns the GPU index."""
        fits = np.flatnonzero(self.gpu_fits(share)[node])
        assert len(fits), f"node {node}: {share} does not fit"
        if pick == "first" or len(fits) == 1:
            k = int(fits[0])
        else:
            left = self.free_compute[node, fits]
            k = int(fits[np.argmin(left)] if pick == "best" else fits[np.argmax(left)])
        slot = self.place_at(owner, node, k, share)
        assert slot is not None
        return k

    def place_at(self, owner: int, node: int, k: int, share: GpuShare, start: int | None = None) -> Slot | None:
        """Put one member of `share` on GPU `k` of `node` (a MIG instance at memory slice `start`,
        if given), as a real scheduler reported it; None, and nothing held, if it does not fit there."""
        slot = self.ledgers[node][k].place(share, start=start)
        if slot is None:
            return None
        self.holdings.setdefault(owner, []).append((node, k, slot))
        self._account(node, k, slot, +1)
        self._refresh(node, k)
        return slot

    def take_whole(self, owner: int, node: int, gpus: int) -> list[int]:
        """`gpus` idle GPUs of `node` for a whole-GPU member, lowest index first."""
        free = np.flatnonzero(self.gpu_fits(GpuShare())[node])[:gpus]
        assert len(free) == gpus, f"node {node}: {gpus} idle GPUs asked, {len(free)} there"
        return [self.place(owner, node, GpuShare(), "first") for _ in range(gpus)]

    def give_back(self, owner: int, node: int | None = None, gpu: int | None = None) -> int:
        """Release what `owner` holds (on `node` only, and on its GPU `gpu` only, if given);
        returns the slots released."""
        held = self.holdings.get(owner, [])
        keep, gone = [], []
        for h in held:
            (gone if (node is None or h[0] == node) and (gpu is None or h[1] == gpu) else keep).append(h)
        for n, k, slot in gone:
            self.ledgers[n][k].release(slot)
            self._account(n, k, slot, -1)
            self._refresh(n, k)
        if keep:
            self.holdings[owner] = keep
        else:
            self.holdings.pop(owner, None)
        return len(gone)

    def book_stale(self, node: int, k: int, milli: int) -> None:
        """The scheduler books `milli` more on GPU k of `node` than is held there, until clear_stale."""
        self.stale_milli[node, k] += milli
        self.any_stale = True

    def clear_stale(self) -> list[int]:
        """The scheduler rebuilt its books from the holdings; returns the nodes whose books changed."""
        if not self.any_stale:
            return []
        nodes = np.flatnonzero(self.stale_milli.any(axis=1))
        self.stale_milli[nodes] = 0
        self.any_stale = False
        return [int(n) for n in nodes]

    def _account(self, node: int, k: int, slot: Slot, sign: int) -> None:
        led = self.ledgers[node][k]
        self.allocated_compute += sign * slot.share.compute_share(led.model, led.sharing)
        self.allocated_memory += sign * slot.share.memory_share(led.model, led.sharing)

    def _refresh(self, node: int, k: int) -> None:
        led = self.ledgers[node][k]
        self.idle[node, k] = led.idle
        self.free_compute[node, k] = led.free_compute()
        m = led.sharing.mode
        if m == "fraction":
            self.free_milli[node, k] = MILLI - led.used_milli
        elif m == "shards":
            self.free_shards[node, k] = led.sharing.shards_per_gpu - led.used_shards
        elif m == "mig":
            for p in led.model.mig:
                self.mig_fit[p.name][node, k] = led.fits(GpuShare("mig", 0, p.name))

    # --- measures ----------------------------------------------------------------------------
    def fragmentation(self, shapes: dict[tuple[str, int, str], float], up: np.ndarray) -> float:
        """"Beware of Fragmentation" (USENIX ATC '23): the expected free GPU capacity that a task
        drawn from the target workload cannot use. `shapes` maps (share text, GPUs per member,
        gpu_spec) to its weight (popularity); for each shape, a node's free capacity counts as
        fragmented where the member cannot use it: all of it if the member fits nowhere on the
        node (or the model is not accepted), else, for a whole-GPU member, the free part of GPUs
        that are not idle, and for a slice, the free part of GPUs the slice does not fit.
        Returns GPUs (down nodes count nothing)."""
        total_w = sum(shapes.values())
        if total_w <= 0:
            return 0.0
        free = np.where(up[:, None], self.free_compute, 0.0)
        free_node = free.sum(axis=1)
        out = 0.0
        for (text, gpus, spec), w in shapes.items():
            share = parse_share(text)
            mask = self.model_mask(tuple(m for m in spec.split("|") if m))
            if share.is_whole:
                whole_idle = (self.idle & self.whole_ok).sum(axis=1)
                usable = whole_idle >= gpus
                if mask is not None:
                    usable &= mask
                # usable node: only its idle GPUs serve the member; partial GPUs are fragments
                frag = np.where(usable, free_node - whole_idle, free_node)
            else:
                fit = self.gpu_fits(share, booked=False)
                if mask is not None:
                    fit = fit & mask[:, None]
                frag = np.where(fit, 0.0, free).sum(axis=1)
            out += w / total_w * float(frag.sum())
        return out

    def stranded(self, pending: set[tuple[str, int, str]], up: np.ndarray) -> float:
        """Free capacity (GPUs) on partly used GPUs that no pending member can use (0 when nothing
        is pending): slices stranded beside what is held."""
        if not pending:
            return 0.0
        usable = np.zeros_like(self.exists)
        for text, _gpus, spec in pending:
            share = parse_share(text)
            if share.is_whole:
                continue          # a whole-GPU member uses idle GPUs only, never a partly used one
            fit = self.gpu_fits(share, booked=False)
            mask = self.model_mask(tuple(m for m in spec.split("|") if m))
            usable |= fit if mask is None else fit & mask[:, None]
        partial = ~self.idle & self.exists & up[:, None]
        return float(np.where(partial & ~usable, self.free_compute, 0.0).sum())

    def figures(self, shapes: dict, pending: set, up: np.ndarray) -> dict:
        """What a snapshot carries for slice-granular metrics (GPUs)."""
        cap = float(np.where(up[:, None], self.exists, False).sum())
        return {"capacity_gpus": cap,
                "allocated_compute_gpus": round(self.allocated_compute, 6),
                "allocated_memory_gpus": round(self.allocated_memory, 6),
                "fragmented_gpus": round(self.fragmentation(shapes, up), 6),
                "stranded_gpus": round(self.stranded(pending, up), 6)}

    def whole_held_per_node(self) -> np.ndarray:
        """Whole GPUs booked per node, from the holdings (a slice counts in gpu_sharing instead):
        what a real target with slices reports as used, as the twins count it."""
        used = np.zeros(len(self.idle), dtype=np.int64)
        for held in self.holdings.values():
            for n, _k, slot in held:
                used[n] += slot.share.is_whole
        return used

    def real_sample(self, shapes: dict, pending: set, up: np.ndarray) -> dict:
        """A real target's Snapshot.gpu_sharing: figures() and the whole GPUs booked."""
        return {**self.figures(shapes, pending, up), "allocated_whole_gpus": int(self.whole_held_per_node().sum())}


def up_mask(nodes: int, down) -> np.ndarray:
    """True for every node of the fleet that is not in `down` (a real target's failed nodes)."""
    up = np.ones(nodes, dtype=bool)
    if down:
        up[sorted(down)] = False
    return up


def idle_whole_up(state: SliceState, down) -> np.ndarray:
    """Idle GPUs per node a whole-GPU member may take, 0 where the node is down: what a real
    target with slices reports as free, as the twins see it."""
    return np.where(up_mask(len(state.idle), down), state.idle_whole(), 0).astype(np.int64)
