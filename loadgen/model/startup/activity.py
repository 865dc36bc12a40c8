"""SM activity of an allocated GPU (what DCGM_FI_PROF_SM_ACTIVE reports), from the job's phase. Pure.

Before its job trains (image pull, container start, rendezvous, a partial gang waiting for the
rest) a GPU is allocated and idle: 0. Training runs at sm_active x (1 - dataloader_stall), except
the last checkpoint_s of every checkpoint_every_s, counted from the training start, when the GPUs
wait on the checkpoint write: 0. The fake DCGM exporter publishes `at`; the recorder integrates
`seconds` exactly; the two agree up to how often Prometheus samples.
"""
from __future__ import annotations

import math

from loadgen.model.startup.spec import ActivitySpec


def _on_time(spec: ActivitySpec, x: float) -> float:
    """Seconds of [0, x) since the training start not spent checkpointing."""
    if x <= 0:
        return 0.0
    every, ckpt = spec.checkpoint_every_s, min(spec.checkpoint_s, spec.checkpoint_every_s)
    if every <= 0 or ckpt <= 0:
        return x
    k = math.floor(x / every)
    return k * (every - ckpt) + min(x - k * every, every - ckpt)


def step_activity(spec: ActivitySpec) -> float:
    return spec.sm_active * (1.0 - spec.dataloader_stall)


def at(spec: ActivitySpec, train_start: float | None, t: float) -> float:
    """One GPU's SM activity at t; train_start None (not training) gives 0."""
    if train_start is None or t < train_start:
        return 0.0
    x = t - train_start
    return step_activity(spec) if _on_time(spec, x + 1e-9) - _on_time(spec, x) > 0 else 0.0


def seconds(spec: ActivitySpec, train_start: float, a: float, b: float) -> float:
    """Active SM-seconds of one GPU over [a, b] while its job trains from train_start."""
    a, b = max(a, train_start), max(b, train_start)
    if b <= a:
        return 0.0
    return step_activity(spec) * (_on_time(spec, b - train_start) - _on_time(spec, a - train_start))
