"""`gangstorm cluster up|down|status kube-gang`: the KWOK cluster the real kube-gang backend launches
(kube-scheduler v1.36.1 with the gang gates on, scheduling.k8s.io/v1alpha2 served), left running; a
run drives it with --kubeconfig --schedulers kube-gang."""
from __future__ import annotations

from typing import Any

from fakes.kube.launch import detached_state, down, start_cluster, status
from fakes.kube.target import scheduler_config
from fakes.kubegang.target import cluster_options
from loadgen.model.target import TargetContext

__all__ = ["down", "status", "up"]


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    cluster = start_cluster(ctx, name, scheduler_config(ctx.config), **cluster_options())
    return detached_state(cluster, scheduler_metrics_url=None)
