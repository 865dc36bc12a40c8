"""`gangstorm cluster up|down|status kueue`: a KWOK cluster with Kueue that outlives the command.

The cluster the real Kueue backend launches for a run (kube-scheduler with the scenario's scoring,
Kueue's CRDs and kueue-manager with the scenario's settings), left running; a run drives it with
--kubeconfig --schedulers kueue and creates its own queues, labelled and named after the run.
"""
from __future__ import annotations

from typing import Any

from fakes.kube.cluster import cluster_down, cluster_status
from fakes.kube.launch import detached_state, start_cluster
from fakes.kueue.controlplane import KueueControlPlane, require_binaries
from fakes.kueue.target import kube_scheduler_config
from loadgen.model.target import TargetContext


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    require_binaries()
    cluster = start_cluster(ctx, name, kube_scheduler_config(dict(ctx.config)))
    try:
        kueue = KueueControlPlane(cluster, ctx.run_dir, dict(ctx.config))
        kueue.start(cluster.api_client())
    except BaseException:
        cluster.stop()
        raise
    return detached_state(cluster, kueue_metrics_url=kueue.metrics_url)


def down(state: dict[str, Any]) -> list[str]:
    return cluster_down(state["kube"])


def status(state: dict[str, Any]) -> dict[str, Any]:
    return cluster_status(state["kube"])
