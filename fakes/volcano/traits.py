"""What gangstorm needs to know about Volcano without running it, declared once for the simulated
(fakes/volcano/sim.py) and the real (fakes/volcano/target.py) target."""
from __future__ import annotations

from typing import Any


class VolcanoTraits:
    shares_one_watch = True     # several Locust processes on one attached cluster: one pod watch

    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        return {"topology_aware": False, "plugins": ",".join(cfg.get("plugins") or []),
                "note": "no HyperNode network topology configured: the binpack/nodeorder plugins place members"}

    @classmethod
    def placement_policies(cls, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The binpack plugin on (the fullest node that fits first) or off (nodeorder: the emptiest)."""
        plugins = [p for p in cfg.get("plugins") or [] if p != "binpack"]
        return {"binpack": {"plugins": [*plugins, "binpack"]}, "nodeorder": {"plugins": plugins}}

    @classmethod
    def placement_policy(cls, cfg: dict[str, Any]) -> str:
        return "binpack" if "binpack" in (cfg.get("plugins") or []) else "nodeorder"
