"""Real kube-gang: kube-scheduler v1.36.1's native gang scheduling (KEP-4671, alpha) on KWOK.

The cluster runs with the feature gates GenericWorkload, GangScheduling and
TopologyAwareWorkloadScheduling on (apiserver, scheduler and controller-manager) and serves the alpha
group scheduling.k8s.io/v1alpha2. Per job the adapter creates a Workload with one podGroupTemplate
(schedulingPolicy.gang.minCount = min_available), a PodGroup made from it, and pods that name the
PodGroup in spec.schedulingGroup.podGroupName (fakes/kubegang/gangobjects.py). kube-scheduler then
keeps the pods out of its queue until minCount of them exist (GangScheduling PreEnqueue), places the
group in one pod-group cycle that reverts every assumed pod when the group does not fit
(pkg/scheduler/schedule_one_podgroup.go), and holds pods scheduled one by one in Permit until
minCount are reserved, for at most 5 minutes (permitTimeoutDuration, fixed; gangscheduling.go).
With `topology: leaf` (or spine) each multi-node gang that fits in one leaf gets a PodGroup
schedulingConstraints.topology on the node label gangstorm.io/leaf, and the scheduler tries one
placement per leaf (TopologyAwareWorkloadScheduling).
"""
from __future__ import annotations

from typing import Any

from fakes.kube.cluster import merge_cluster_options
from fakes.kubegang.gangobjects import GangObjectsKube, group_name
from loadgen.model.job import Job

FEATURE_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
TEMPLATE = "workers"
TOPOLOGY_LABELS = {"leaf": "gangstorm.io/leaf", "spine": "gangstorm.io/spine"}     # Fleet.node_labels
# kwokctl runs kube-controller-manager with a short --controllers list; the PodGroup protection
# controller (on by default once GenericWorkload is, cmd/kube-controller-manager/app/scheduling.go)
# removes the finalizer the apiserver puts on every PodGroup once no pod uses it. Without it a
# deleted PodGroup stays, and so does its namespace. A repeated --controllers adds to the list.
CONTROLLERS = "podgroup-protection-controller"


def cluster_options() -> dict[str, Any]:
    """ClusterSpec fields of a kube-gang cluster (the run's own, and `cluster up kube-gang`)."""
    return {"feature_gates": FEATURE_GATES, "runtime_config": RUNTIME_CONFIG,
            "controller_manager_args": {"controllers": CONTROLLERS}}


class RealKubeGang(GangObjectsKube):
    name = "kube-gang"
    group, version = "scheduling.k8s.io", "v1alpha2"
    plurals = ("workloads", "podgroups")
    mechanism = ("kube-scheduler v1.36.1 GangScheduling (gates " + FEATURE_GATES + "): PreEnqueue until minCount "
                 "pods exist, one pod-group cycle, Permit wait <= 5 min")

    def cluster_options(self) -> dict[str, Any]:
        return merge_cluster_options(super().cluster_options(), cluster_options())     # + DRA's, if any

    def api_hint(self) -> str:
        return (f"start kube-apiserver with --runtime-config={RUNTIME_CONFIG} and --feature-gates={FEATURE_GATES} "
                "(and kube-scheduler with the same gates), or let gangstorm start the cluster")

    def constraints(self, job: Job) -> dict[str, Any]:
        """schedulingConstraints keeping the gang in one leaf or spine (the `topology` setting, node
        labels gangstorm.io/leaf|spine), for a multi-node gang that fits in one; else none."""
        level = self.cfg.get("topology", "none")
        if level == "none" or job.members < 2:
            return {}
        domain = self.fleet.leaf_size * (self.fleet.leaves_per_spine if level == "spine" else 1)
        if job.members > domain:
            return {}
        return {"schedulingConstraints": {"topology": [{"key": TOPOLOGY_LABELS[level]}]}}

    def gang_objects(self, job: Job) -> list[tuple[str, dict[str, Any]]]:
        gang = {"gang": {"minCount": self.need(job)}}
        api = f"{self.group}/{self.version}"
        within = self.constraints(job)
        workload = {"apiVersion": api, "kind": "Workload", "metadata": self.object_meta(job),
                    "spec": {"podGroupTemplates": [{"name": TEMPLATE, "schedulingPolicy": gang, **within}]}}
        podgroup = {"apiVersion": api, "kind": "PodGroup", "metadata": self.object_meta(job),
                    "spec": {"podGroupTemplateRef": {"workload": {"workloadName": group_name(job),
                                                                  "podGroupTemplateName": TEMPLATE}},
                             "schedulingPolicy": gang, **within}}
        return [("workloads", workload), ("podgroups", podgroup)]

    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        level = cfg.get("topology", "none")
        if level == "none":
            return super().topology(cfg)
        return {"topology_aware": True, "constraint": TOPOLOGY_LABELS[level],
                "note": f"TopologyAwareWorkloadScheduling: each multi-node gang that fits in one {level} is kept there"}

    def gang_fields(self, job: Job) -> dict[str, Any]:
        return {"schedulingGroup": {"podGroupName": group_name(job)}}
