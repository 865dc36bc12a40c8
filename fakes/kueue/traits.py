"""What gangstorm needs to know about Kueue without running it, declared once for the simulated
(fakes/kueue/sim.py) and the real (fakes/kueue/target.py) target."""
from __future__ import annotations

from typing import Any


class KueueTraits:
    shares_one_watch = False    # the Workload watch is per process; one fleet per Locust process

    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        mode = cfg.get("topology", "preferred")
        return {"topology_aware": mode != "none", "tas": mode,
                "note": "Kueue TAS over the spine/leaf/hostname labels: a multi-member gang "
                        + ("must fit in one leaf" if mode == "required" else
                           "prefers one leaf" if mode == "preferred" else "is placed by kube-scheduler alone")}
