"""What gangstorm needs to know about kube-scheduler without running it, declared once for the
simulated (fakes/kube/sim.py) and the real (fakes/kube/target.py) target."""
from __future__ import annotations

from typing import Any

SLI = "scheduler_pod_scheduling_sli_duration_seconds"
MIN_POD_CPUS = 1


def pod_cpus(cpus_per_member: int) -> int:
    """The cpu request of a member's pod: the real adapter asks at least MIN_POD_CPUS (a trace's
    GPU-only pod, openb's milli pods, asks 0), and NodeResourcesFit and BalancedAllocation score
    that request, so a node holding many such pods looks as full to the twin as to the scheduler."""
    return max(int(cpus_per_member), MIN_POD_CPUS)


class KubeTraits:
    shares_one_watch = True     # several Locust processes on one attached cluster: one pod watch

    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        return {"topology_aware": False, "scoring": cfg.get("scoring"),
                "percentage_of_nodes_to_score": cfg.get("percentage_of_nodes_to_score"),
                "note": "kube-scheduler has no switch topology; NodeResourcesFit scoring decides where members land"}

    @classmethod
    def placement_policies(cls, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """NodeResourcesFit's scoring strategy: LeastAllocated spreads, MostAllocated packs."""
        return {"least-allocated": {"scoring": "least_allocated"}, "most-allocated": {"scoring": "most_allocated"}}

    @classmethod
    def placement_policy(cls, cfg: dict[str, Any]) -> str:
        return str(cfg.get("scoring", "least_allocated")).replace("_", "-")

    @classmethod
    def prometheus_queries(cls, window: str) -> dict[str, str]:
        return {
            # the seed's harness query, over the run instead of the last five minutes
            "scheduler_sli_p99_s": f"histogram_quantile(0.99, sum(rate({SLI}_bucket[{window}])) by (le))",
            # kube-scheduler labels the SLI by `attempts`, so a pod that needed an attempt count no pod
            # needed before starts a new series, and rate() cannot see a series' first observation:
            # the slowest pods are the ones it loses. The scheduler's own counters since it started
            # (this run's, when gangstorm started it) count every pod.
            "scheduler_sli_p99_since_start_s": f"histogram_quantile(0.99, sum({SLI}_bucket) by (le))",
            "scheduler_sli_pods_since_start": f"sum({SLI}_count)",
            "scheduler_sli_pods_in_rate": f"sum(increase({SLI}_count[{window}]))",
        }
