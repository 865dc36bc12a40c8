"""What happens between a gang's placement and its first training step, as scenario inputs.

Three budgets follow admission (docs/budgets.md): placement-to-ready (image pull and container
start on every member's node: loadgen/model/startup/imagecache.py), rendezvous (rank discovery and NCCL
set-up across the placement: loadgen/model/startup/rendezvous.py), and then training, whose GPU activity
loadgen/model/startup/activity.py describes. This module only holds their settings; `StartupSpec.off()`
is the identity (ready and training at the admission instant), which is what a scenario without
these sections runs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

RESTART_POLICIES = ("in-place", "requeue")


@dataclass(frozen=True)
class ImageSpec:
    image_gb: float = 0.0            # the training image; 0 = nothing to pull
    node_pull_gbps: float = 1.0      # one node's pull throughput (Gbit/s)
    registry_gbps: float = 100.0     # the registry's total egress, shared by every pull in flight
    warm_fraction: float = 0.0       # share of nodes holding the image at t=0 (seeded choice)
    prepull: bool = False            # a pre-pull DaemonSet starts a pull on every cold node at t=0
    container_start_s: float = 0.0   # process start once the image is on the node

    @property
    def pulls(self) -> bool:
        return self.image_gb > 0


@dataclass(frozen=True)
class RendezvousSpec:
    base_s: float = 0.0              # rank discovery + NCCL init of a gang inside one leaf
    per_member_s: float = 0.0        # ... growing with the ranks to bootstrap
    per_extra_leaf_s: float = 0.0    # each further leaf the gang spans
    misaligned_s: float = 0.0        # members off their rails: NCCL rings cross the spine
    jitter_sigma: float = 0.0        # lognormal spread of one attempt
    timeout_s: float = 600.0         # an attempt slower than this fails the start
    restart_backoff_s: float = 10.0  # in-place restart: container restart back-off
    restart: dict[str, str] = field(default_factory=dict)   # scheduler -> "in-place" | "requeue"

    @property
    def active(self) -> bool:
        return any(v > 0 for v in (self.base_s, self.per_member_s, self.per_extra_leaf_s, self.misaligned_s))

    def policy(self, scheduler: str) -> str:
        return self.restart.get(scheduler, "in-place")


@dataclass(frozen=True)
class ActivitySpec:
    sm_active: float = 0.7           # SM activity of a GPU during a training step
    dataloader_stall: float = 0.0    # share of training time waiting on input
    checkpoint_every_s: float = 0.0  # 0 = no checkpoints
    checkpoint_s: float = 0.0        # each checkpoint stalls the GPUs this long

    @property
    def training_mean(self) -> float:
        """Mean SM activity over a long training run (checkpoint windows included)."""
        ckpt = self.checkpoint_s / self.checkpoint_every_s if self.checkpoint_every_s > 0 else 0.0
        return self.sm_active * (1.0 - self.dataloader_stall) * (1.0 - min(ckpt, 1.0))


@dataclass(frozen=True)
class StartupSpec:
    image: ImageSpec = ImageSpec()
    rendezvous: RendezvousSpec = RendezvousSpec()
    activity: ActivitySpec = ActivitySpec()

    @classmethod
    def off(cls) -> StartupSpec:
        return cls()

    @classmethod
    def from_sections(cls, image: dict[str, Any] | None, rendezvous: dict[str, Any] | None,
                      activity: dict[str, Any] | None) -> StartupSpec:
        return cls(ImageSpec(**(image or {})), RendezvousSpec(**(rendezvous or {})),
                   ActivitySpec(**(activity or {})))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled(self, scale: float) -> StartupSpec:
        """The same startup on a wall clock running `scale` virtual seconds per second (real
        backends): every duration divided by scale, every bandwidth multiplied by it."""
        if scale == 1.0:
            return self
        i, r, a = self.image, self.rendezvous, self.activity
        return StartupSpec(
            replace(i, node_pull_gbps=i.node_pull_gbps * scale, registry_gbps=i.registry_gbps * scale,
                    container_start_s=i.container_start_s / scale),
            replace(r, base_s=r.base_s / scale, per_member_s=r.per_member_s / scale,
                    per_extra_leaf_s=r.per_extra_leaf_s / scale, misaligned_s=r.misaligned_s / scale,
                    timeout_s=r.timeout_s / scale, restart_backoff_s=r.restart_backoff_s / scale),
            replace(a, checkpoint_every_s=a.checkpoint_every_s / scale, checkpoint_s=a.checkpoint_s / scale))
