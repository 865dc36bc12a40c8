"""`gangstorm cluster up|down|status kube`: a KWOK cluster with kube-scheduler that outlives the command.

The same cluster the real kube backend launches for a run (the scenario's kube-scheduler profile,
apiserver flags and etcd quota), with the fleet registered as KWOK nodes (labelled type=kwok,
annotated for the cluster's own kwok), left running; a run drives it with --kubeconfig.
"""
from __future__ import annotations

import time
from typing import Any

from fakes.kube.cluster import ClusterSpec, KubeCluster, cluster_down, cluster_status, ready_nodes
from fakes.kube.family import apiserver_args
from loadgen.model.target import TargetContext

NODE_SELECTOR = "type=kwok"      # what `cluster up` nodes carry: --node-selector picks them


def start_cluster(ctx: TargetContext, name: str, scheduler_config: dict | None, **options: Any) -> KubeCluster:
    """Cluster + Ready fleet nodes; stopped again if anything fails. `options`: more ClusterSpec
    fields (the gang variants' feature gates, runtime config and scheduler binary)."""
    from kubernetes import client as k8s
    spec = ClusterSpec(name=f"gs-{name}", workdir=ctx.run_dir / "kube", scheduler=scheduler_config is not None,
                       scheduler_config=scheduler_config,
                       etcd_quota_bytes=int(ctx.control_plane.get("etcd_quota_bytes", 2 * 1024**3)),
                       apiserver_args=apiserver_args(ctx.control_plane), **options)
    cluster = KubeCluster(spec).start()
    try:
        cluster.create_nodes(ctx.fleet)
        api = k8s.CoreV1Api(cluster.api_client())
        deadline = time.monotonic() + 300
        while ready_nodes(api) < ctx.fleet.nodes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {ready_nodes(api)}/{ctx.fleet.nodes} KWOK nodes Ready after 300 s")
            cluster.revive()
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def detached_state(cluster: KubeCluster, **extra: Any) -> dict[str, Any]:
    kube = cluster.detach()
    return {"connect": {"--kubeconfig": kube["kubeconfig"]}, "node_selector": NODE_SELECTOR,
            "pids": sorted(kube["pids"].values()), "kube": kube, **extra}


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    from fakes.kube.target import scheduler_config
    return detached_state(start_cluster(ctx, name, scheduler_config(ctx.config)),
                          scheduler_metrics_url=None)


def down(state: dict[str, Any]) -> list[str]:
    return cluster_down(state["kube"])


def status(state: dict[str, Any]) -> dict[str, Any]:
    return cluster_status(state["kube"])
