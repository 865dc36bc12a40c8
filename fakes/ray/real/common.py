"""What RealRay's parts share: its counters, its error and small helpers."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import numpy as np

COUNTERS = ("submitted", "groups_ready", "finished", "evicted", "failed", "rescheduled", "prefill_groups",
            "prefill_misplaced", "restarted", "members_misplaced")

class RayTargetError(RuntimeError):
    pass

def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None

def _ray_version() -> str | None:
    try:
        return version("ray")
    except PackageNotFoundError:
        return None
