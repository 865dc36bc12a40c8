"""`gangstorm cluster up|down|status coscheduling`: the KWOK cluster the real coscheduling backend
launches (sp-scheduler in kube-scheduler's place, sp-controller, the scheduler-plugins CRDs), left
running; a run drives it with --kubeconfig --schedulers coscheduling."""
from __future__ import annotations

from typing import Any

from fakes.coscheduling import controlplane as sp
from fakes.kube.launch import detached_state, down, start_cluster, status
from fakes.kube.target import scheduler_config
from loadgen.model.target import TargetContext

__all__ = ["down", "status", "up"]


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    bins = sp.require_binaries()
    conf = sp.with_coscheduling(scheduler_config(ctx.config), sp.permit_wait_s(ctx.config, ctx.time_scale))
    cluster = start_cluster(ctx, name, conf, scheduler_binary=bins[sp.BINARY])
    try:
        sp.install_crds(cluster.api_client())
        sp.start_controller(cluster, ctx.run_dir)
    except BaseException:
        cluster.stop()
        raise
    return detached_state(cluster, scheduler_metrics_url=None)
