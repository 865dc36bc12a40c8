"""The fleet: N nodes x G GPUs on a rail-optimized leaf/spine fabric, numpy-backed.

Static description only (capacity, topology, labels). Allocation state lives in the scheduler
models (fakes/sim/state.py) and in real backends, so one Fleet can seed many of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    model_of: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.nodes < 1 or self.gpus_per_node < 1 or self.leaf_size < 1 or self.leaves_per_spine < 1:
            raise ValueError("fleet sizes must be positive")
        # GPU models are assigned per leaf (a scalable unit is bought as one), deterministically.
        names = [m for m, _ in self.gpu_models]
        weights = np.array([w for _, w in self.gpu_models], dtype=float)
        rng = np.random.default_rng(self.seed)
        per_leaf = rng.choice(len(names), size=self.leaves, p=weights / weights.sum())
        object.__setattr__(self, "model_of", per_leaf[self.leaf_of].astype(np.int8))

    @property
    def leaves(self) -> int:
        return -(-self.nodes // self.leaf_size)

    @property
    def spines(self) -> int:
        return -(-self.leaves // self.leaves_per_spine)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def leaf_of(self) -> np.ndarray:
        return np.arange(self.nodes, dtype=np.int32) // self.leaf_size

    @property
    def spine_of(self) -> np.ndarray:
        return self.leaf_of // self.leaves_per_spine

    def model_names(self) -> list[str]:
        return [m for m, _ in self.gpu_models]

    def node_name(self, i: int) -> str:
        return f"gpu-{i:05d}"

    def node_labels(self, i: int) -> dict[str, str]:
        return {
            "gangstorm.io/leaf": f"leaf-{i // self.leaf_size:04d}",
            "gangstorm.io/spine": f"spine-{i // self.leaf_size // self.leaves_per_spine:03d}",
            "nvidia.com/gpu.product": self.model_names()[int(self.model_of[i])],
        }


def stranded_gpus(free_per_node: np.ndarray, member_gpus: int | None) -> int:
    """Free GPUs that no member of the smallest pending gang can use (0 when nothing is pending).

    A node whose free GPUs are fewer than one member needs is stranded for that gang.
    """
    if member_gpus is None:
        return 0
    free = np.asarray(free_per_node)
    return int(free[free < member_gpus].sum())
