"""What gangstorm needs to know about Ray without running it, declared once for the simulated
(fakes/ray/sim.py) and the real (fakes/ray/target.py) target."""
from __future__ import annotations

from typing import Any


class RayTraits:
    shares_one_watch = True     # several Locust processes on one attached cluster: one GCS table poller
    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        return {"topology_aware": False, "multi_node_strategy": cfg.get("multi_node_strategy"),
                "single_node_strategy": cfg.get("single_node_strategy"),
                "note": "placement groups know nodes, not switches"}

    @classmethod
    def placement_policies(cls, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Placement-group strategies, for groups of one bundle and of several alike."""
        return {s.lower(): {"single_node_strategy": s, "multi_node_strategy": s} for s in ("PACK", "SPREAD")}

    @classmethod
    def placement_policy(cls, cfg: dict[str, Any]) -> str:
        return f"{cfg.get('single_node_strategy')}/{cfg.get('multi_node_strategy')}"

    @classmethod
    def fleet_kind(cls, cfg: dict[str, Any]) -> str:
        return "fakelets" if cfg.get("nodes") == "fakelet" else ""
