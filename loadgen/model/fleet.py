"""The fleet: N nodes x G GPUs on a rail-optimized leaf/spine fabric, numpy-backed.

Static description only (capacity, topology, labels). Allocation state lives in the scheduler
models (fakes/sim/state.py) and in real backends, so one Fleet can seed many of them.

Node pools (optional) give runs of nodes a GPU model, a GPU count and a sharing mode
(loadgen.model.gpushare.Sharing): `pools` fill the fleet in order, node 0 first, and must add up to
`nodes`. Without pools the fleet is one pool of whole GPUs whose models are drawn per leaf from
`gpu_models`, exactly as before pools existed. A backend asks, per node, `pool(i)`, `gpus_of[i]`,
`gpu_model_of(i)` and `sharing_of(i)` to know what to advertise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loadgen.model.gpushare import WHOLE_GPUS, GpuModel, Sharing, gpu_model


@dataclass(frozen=True)
class NodePool:
    """`nodes` nodes of `gpus_per_node` GPUs (0: the fleet's) of one `gpu_model`, shared by `sharing`."""
    name: str
    nodes: int
    gpu_model: str = "h100-80gb"
    sharing: Sharing = WHOLE_GPUS
    gpus_per_node: int = 0

    def model(self) -> GpuModel:
        return gpu_model(self.gpu_model, f"pool {self.name}: gpu_model")

    def to_dict(self) -> dict:
        """Plain JSON-able fields (what `from_dict` rebuilds the pool from)."""
        s = self.sharing
        return {"name": self.name, "nodes": self.nodes, "gpu_model": self.gpu_model,
                "gpus_per_node": self.gpus_per_node,
                "sharing": {"mode": s.mode, "layout": list(s.layout), "shards_per_gpu": s.shards_per_gpu}}

    @classmethod
    def from_dict(cls, d: dict) -> NodePool:
        s = d.get("sharing") or {}
        return cls(d["name"], int(d["nodes"]), d.get("gpu_model", "h100-80gb"),
                   Sharing(s.get("mode", "whole"), tuple(s.get("layout", ())), int(s.get("shards_per_gpu", 0))),
                   int(d.get("gpus_per_node", 0)))


@dataclass(frozen=True)
class Fleet:
    nodes: int = 10_000
    gpus_per_node: int = 8
    cpus_per_node: int = 96
    memory_gib_per_node: int = 1024
    leaf_size: int = 32             # nodes per leaf switch (one rail-optimized scalable unit)
    leaves_per_spine: int = 16
    gpu_models: tuple[tuple[str, float], ...] = (("h100", 1.0),)
    seed: int = 0
    pools: tuple[NodePool, ...] = ()
    model_of: np.ndarray = field(init=False, repr=False, compare=False)
    pool_of: np.ndarray = field(init=False, repr=False, compare=False)
    gpus_of: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.nodes < 1 or self.gpus_per_node < 1 or self.leaf_size < 1 or self.leaves_per_spine < 1:
            raise ValueError("fleet sizes must be positive")
        if self.pools:
            self._lay_out_pools()
            return
        object.__setattr__(self, "pool_of", np.zeros(self.nodes, dtype=np.int16))
        object.__setattr__(self, "gpus_of", np.full(self.nodes, self.gpus_per_node, dtype=np.int16))
        # GPU models are assigned per leaf (a scalable unit is bought as one), deterministically.
        names = [m for m, _ in self.gpu_models]
        weights = np.array([w for _, w in self.gpu_models], dtype=float)
        rng = np.random.default_rng(self.seed)
        per_leaf = rng.choice(len(names), size=self.leaves, p=weights / weights.sum())
        object.__setattr__(self, "model_of", per_leaf[self.leaf_of].astype(np.int8))

    def _lay_out_pools(self) -> None:
        if sum(p.nodes for p in self.pools) != self.nodes:
            raise ValueError(f"node pools hold {sum(p.nodes for p in self.pools)} nodes, the fleet {self.nodes}")
        if any(p.nodes < 1 or not 0 <= p.gpus_per_node <= self.gpus_per_node for p in self.pools):
            raise ValueError("a node pool needs >= 1 node and at most the fleet's gpus_per_node")
        names = self.model_names()
        sizes = [p.nodes for p in self.pools]
        object.__setattr__(self, "pool_of", np.repeat(np.arange(len(self.pools), dtype=np.int16), sizes))
        object.__setattr__(self, "model_of", np.repeat(np.array(
            [names.index(p.model().name) for p in self.pools], dtype=np.int8), sizes))
        object.__setattr__(self, "gpus_of", np.repeat(np.array(
            [p.gpus_per_node or self.gpus_per_node for p in self.pools], dtype=np.int16), sizes))

    def pool(self, i: int) -> NodePool:
        """The pool node `i` belongs to (without pools: one whole-GPU pool holding every node)."""
        if not self.pools:
            return NodePool("default", self.nodes, self.model_names()[int(self.model_of[i])], WHOLE_GPUS,
                            self.gpus_per_node)
        return self.pools[int(self.pool_of[i])]

    def sharing_of(self, i: int) -> Sharing:
        return self.pools[int(self.pool_of[i])].sharing if self.pools else WHOLE_GPUS

    def gpu_model_of(self, i: int) -> GpuModel:
        """Node `i`'s GPU model from the catalogue (ValueError-free only for catalogue names)."""
        return gpu_model(self.model_names()[int(self.model_of[i])])

    @property
    def shared(self) -> bool:
        """Whether any pool shares its GPUs (False: every GPU is handed out whole, as before pools)."""
        return any(p.sharing.mode != "whole" for p in self.pools)

    @property
    def leaves(self) -> int:
        return -(-self.nodes // self.leaf_size)

    @property
    def spines(self) -> int:
        return -(-self.leaves // self.leaves_per_spine)

    @property
    def total_gpus(self) -> int:
        if self.pools:
            return int(self.gpus_of.sum(dtype=np.int64))
        return self.nodes * self.gpus_per_node

    @property
    def leaf_of(self) -> np.ndarray:
        return np.arange(self.nodes, dtype=np.int32) // self.leaf_size

    @property
    def spine_of(self) -> np.ndarray:
        return self.leaf_of // self.leaves_per_spine

    def model_names(self) -> list[str]:
        if self.pools:
            return list(dict.fromkeys(p.model().name for p in self.pools))
        return [m for m, _ in self.gpu_models]

    def node_name(self, i: int) -> str:
        return f"gpu-{i:05d}"

    def node_labels(self, i: int) -> dict[str, str]:
        labels = {
            "gangstorm.io/leaf": f"leaf-{i // self.leaf_size:04d}",
            "gangstorm.io/spine": f"spine-{i // self.leaf_size // self.leaves_per_spine:03d}",
            "nvidia.com/gpu.product": self.model_names()[int(self.model_of[i])],
        }
        if self.pools:
            pool = self.pool(i)
            labels["gangstorm.io/pool"] = pool.name
            labels["gangstorm.io/gpu-sharing"] = pool.sharing.mode
        return labels


def stranded_gpus(free_per_node: np.ndarray, member_gpus: int | None) -> int:
    """Free GPUs that no member of the smallest pending gang can use (0 when nothing is pending).

    A node whose free GPUs are fewer than one member needs is stranded for that gang.
    """
    if member_gpus is None:
        return 0
    free = np.asarray(free_per_node)
    return int(free[free < member_gpus].sum())
