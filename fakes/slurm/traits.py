"""What gangstorm needs to know about Slurm without running it, declared once for the simulated
(fakes/slurm/sim.py) and the real (fakes/slurm/target.py) target."""
from __future__ import annotations

from typing import Any


class SlurmTraits:
    shares_one_watch = True     # several Locust processes on one attached cluster: one squeue poller
    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        return {"topology_aware": True, "TopologyPlugin": "topology/tree (leaf switches under spines)",
                "switches": cfg.get("switches"), "switches_min_members": cfg.get("switches_min_members"),
                "max_switch_wait_s": cfg.get("switches_max_wait_s")}

    @classmethod
    def placement_policies(cls, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """select/cons_tres places by best fit; there is no other policy to choose."""
        return {"best-fit": {}}

    @classmethod
    def placement_policy(cls, cfg: dict[str, Any]) -> str:
        return "best-fit"
