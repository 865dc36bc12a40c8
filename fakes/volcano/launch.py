"""`gangstorm cluster up|down|status volcano`: a KWOK cluster with Volcano that outlives the command.

The cluster the real Volcano backend launches for a run (no kube-scheduler; vc-scheduler and
vc-controller-manager with the scenario's settings, Volcano's CRDs installed), left running; a run
drives it with --kubeconfig --schedulers volcano.
"""
from __future__ import annotations

from typing import Any

from fakes.kube.cluster import cluster_down, cluster_status
from fakes.kube.launch import detached_state, start_cluster
from fakes.volcano.controlplane import VolcanoControlPlane, require_binaries
from loadgen.model.target import TargetContext


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    require_binaries()
    cluster = start_cluster(ctx, name, None)
    try:
        vc = VolcanoControlPlane(cluster, ctx.run_dir, dict(ctx.config))
        vc.start(cluster.api_client())
    except BaseException:
        cluster.stop()
        raise
    return detached_state(cluster, volcano_metrics_url=vc.metrics_url,
                          volcano_controller_metrics_url=vc.controller_metrics_url)


def down(state: dict[str, Any]) -> list[str]:
    return cluster_down(state["kube"])


def status(state: dict[str, Any]) -> dict[str, Any]:
    return cluster_status(state["kube"])
