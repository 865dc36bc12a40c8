"""Real coscheduling: scheduler-plugins' Coscheduling plugin (v0.34.7) on KWOK.

kwokctl runs sp-scheduler in kube-scheduler's place (fakes/coscheduling/controlplane.py) against
the same v1.36.1 apiserver; the PodGroup CRD (scheduling.x-k8s.io/v1alpha1) is installed once the
apiserver is up, and sp-controller keeps the PodGroups' status, whose updates wake rejected gangs.
Per job the adapter creates a PodGroup (minMember = min_available, scheduleTimeoutSeconds =
permit_timeout_s, time-scaled) and pods labelled scheduling.x-k8s.io/pod-group=<its name>
(fakes/kubegang/gangobjects.py). The plugin keeps a pod out of scheduling until minMember pods of its
group exist (PreEnqueue), holds reserved pods in Permit until minMember are reserved and, when one
member cannot be placed, rejects the waiting ones (PostFilter), so they release their nodes.
"""
from __future__ import annotations

from typing import Any

from fakes.coscheduling import controlplane as sp
from fakes.kube.cluster import merge_cluster_options
from fakes.kube.target import scheduler_config
from fakes.kubegang.gangobjects import GangObjectsKube, group_name
from loadgen.model.job import Job

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class RealCoscheduling(GangObjectsKube):
    name = "coscheduling"
    group, version = "scheduling.x-k8s.io", "v1alpha1"
    plurals = ("podgroups",)
    mechanism = (f"scheduler-plugins {sp.SP_VERSION} Coscheduling (kube-scheduler v1.34 framework): PreEnqueue until "
                 "minMember pods exist, Permit wait, PostFilter rejects the group; sp-controller keeps PodGroup status")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.controller = None          # sp-controller (a cluster component)

    def start(self) -> None:
        if not self.existing:
            sp.require_binaries()      # before the cluster: a missing build fails in a second
        super().start()

    def permit_wait_s(self) -> int:
        return sp.permit_wait_s(self.cfg, self.ctx.time_scale)

    def scheduler_profile(self) -> dict:
        return sp.with_coscheduling(scheduler_config(self.cfg), self.permit_wait_s())

    def cluster_options(self) -> dict[str, Any]:
        return merge_cluster_options(super().cluster_options(),       # + DRA's, if any
                                     {"scheduler_binary": sp.require_binaries()[sp.BINARY]})

    def _start_scheduler(self, run_dir) -> None:
        sp.install_crds(self.api.api_client)
        self.controller = sp.start_controller(self.cluster, run_dir)
        super()._start_scheduler(run_dir)

    def _observe(self, now: float) -> None:
        if self.controller is not None and not self.controller.alive():
            raise RuntimeError(f"sp-controller exited; see {self.controller.log}")
        super()._observe(now)

    def api_hint(self) -> str:
        return "install scheduler-plugins (its PodGroup CRD and scheduler), or let gangstorm start the cluster"

    def gang_objects(self, job: Job) -> list[tuple[str, dict[str, Any]]]:
        return [("podgroups", {"apiVersion": f"{self.group}/{self.version}", "kind": "PodGroup",
                               "metadata": self.object_meta(job),
                               "spec": {"minMember": self.need(job), "scheduleTimeoutSeconds": self.permit_wait_s()}})]

    def gang_labels(self, job: Job) -> dict[str, str]:
        return {POD_GROUP_LABEL: group_name(job)}
