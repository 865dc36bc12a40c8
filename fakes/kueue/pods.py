"""A gang as a Kueue pod group: the labels and annotations of Kueue's pod integration (v0.19.2,
pkg/controller/jobs/pod/constants/constants.go), plus what Kueue's pod webhook would add.

kueue-manager runs without webhooks (tools/kueue/manager/main.go), so the client writes the
webhook's mutation itself, as PodWebhook.Default does (pkg/controller/jobs/pod/pod_webhook.go): the
kueue.x-k8s.io/managed label, the kueue.x-k8s.io/managed finalizer, the admission scheduling gate
and, with topology-aware scheduling on (the default), the topology gate; and the role-hash
annotation, which names the group's pod set and must not change when the TAS ungater adds its
node selector (without it Kueue hashes the spec again, finds no matching Workload and deletes
it, pkg/controller/jobs/pod/pod_controller.go getRoleHash). Kueue creates one
Workload per group, named after the group, once pod-group-total-count pods exist; when it admits
the Workload it removes the admission gate, and the TAS ungater removes the topology gate with a
node selector for the domain it chose. kube-scheduler then binds each pod.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

QUEUE_NAME = "kueue.x-k8s.io/queue-name"                    # pkg/controller/constants/constants.go
GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
MANAGED = "kueue.x-k8s.io/managed"                           # label "true", and the finalizer's name
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"                    # apis/kueue/v1beta2/topology_types.go
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"


def group_name(job_id: int) -> str:
    """The pod group, and so the Workload, of job job_id."""
    return f"g{job_id}"


def as_group_member(pod: dict[str, Any], job_id: int, members: int, local_queue: str,
                    topology: tuple[str, str] | None) -> dict[str, Any]:
    """`pod` (a Pod body) made a member of job job_id's group of `members` pods in `local_queue`;
    topology = (annotation, node label) asks TAS to keep the group in one domain of that label."""
    meta = pod["metadata"]
    meta["labels"] = {**meta.get("labels", {}), QUEUE_NAME: local_queue, GROUP_NAME: group_name(job_id),
                      MANAGED: "true"}
    ann = {**meta.get("annotations", {}), GROUP_TOTAL: str(members), ROLE_HASH: role_hash(pod["spec"])}
    if topology is not None:
        ann[topology[0]] = topology[1]
    meta["annotations"] = ann
    meta["finalizers"] = [MANAGED]
    pod["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}, {"name": TOPOLOGY_GATE}]
    return pod


def role_hash(spec: dict[str, Any]) -> str:
    """8 hex digits over what makes members alike (containers, node selector), as Kueue's own
    (pkg/util/pod/pod.go GenerateRoleHash) is 8 hex digits of a sha256 over the spec's shape."""
    shape = {"containers": spec.get("containers"), "nodeSelector": spec.get("nodeSelector")}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]
