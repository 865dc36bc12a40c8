"""Pods as the Kubernetes-family adapters write and watch them.

`pod_spec` is the one fake container every gang member and pinned pod runs (KWOK never starts
it); `PodWatch` is the one watch over a namespace's pods: a list, then a watch from the list's
resourceVersion, a fresh list after an error; each change reaches `post(t, type, PodView)`.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fakes.kube.listwatch import ListWatch
from loadgen.model.job import Job

GPU = "nvidia.com/gpu"
L_JOB, L_TENANT = "gangstorm.io/job-id", "gangstorm.io/tenant"
COMPLETE_AFTER = "gangstorm.io/complete-after"   # read by kwok-config/stages.yaml pod-complete
# Placement-to-ready through KWOK: a pod created with STARTUP waits, once bound, for the adapter to
# set READY_AFTER (a Go duration from the image-cache model); stage pod-ready-after then makes it
# Running and Ready after that delay. Pods without STARTUP are Ready at once (stage pod-ready).
STARTUP, READY_AFTER = "gangstorm.io/startup", "gangstorm.io/ready-after"
# The device-level choice a scheduler writes on the pod before binding it (Volcano's deviceshare
# plugin: which GPUs of the node, with how much memory and cores each; fakes/volcano/vgpu.py).
DEVICES = "volcano.sh/vgpu-ids-new"


def label_value(text: str) -> str:
    """text as a valid label value: [A-Za-z0-9._-], at most 63 characters, alphanumeric at both
    ends. A trace's tenant may be any string; an invalid value makes the apiserver refuse the pod."""
    cut = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cut)


def job_labels(job: Job) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gangstorm", L_JOB: str(job.id), L_TENANT: label_value(job.tenant)}


def go_duration(seconds: float) -> str:
    return f"{max(seconds, 0.001):.3f}s"


def pod_spec(requests: dict[str, str], claims: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    """A pod spec asking for `requests` (extended resources such as GPUs and MIG instances also as
    limits, as the apiserver requires) and using the pod's resource `claims` by name, gone at once
    when deleted."""
    limits = {k: v for k, v in requests.items() if "/" in k}
    resources: dict[str, Any] = {"requests": requests, "limits": limits}
    if claims:
        resources["claims"] = [{"name": c} for c in claims]
    return {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,      # no token volume: smaller, cheaper pods
            "containers": [{"name": "main", "image": "gangstorm/fake", "resources": resources}],
            **fields}


@dataclass(frozen=True)
class PodView:
    uid: str
    name: str
    job: int | None          # gangstorm.io/job-id; None for pods that belong to no gang
    node: str
    phase: str
    gpus: int
    deleting: bool
    ready: bool = False      # condition Ready is True (KWOK's pod-ready stages set it)
    devices: str = ""        # the DEVICES annotation, once the scheduler wrote it

    @property
    def holds(self) -> bool:
        """A pod holds its GPUs from binding until it terminates."""
        return bool(self.node) and self.phase not in ("Succeeded", "Failed")


def pod_view(obj: dict[str, Any]) -> PodView:
    meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
    gpus = sum(int((c.get("resources", {}).get("requests") or {}).get(GPU, 0) or 0) for c in spec.get("containers", []))
    job = (meta.get("labels") or {}).get(L_JOB)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    return PodView(uid=meta.get("uid", ""), name=meta.get("name", ""), job=int(job) if job is not None else None,
                   node=spec.get("nodeName") or "", phase=status.get("phase", ""), gpus=gpus,
                   deleting=meta.get("deletionTimestamp") is not None, ready=ready,
                   devices=(meta.get("annotations") or {}).get(DEVICES, ""))


class PodWatch(ListWatch):
    """Watches `namespace` with `core` (a CoreV1Api of its own: the watch holds a connection)."""

    def __init__(self, core, namespace: str, post: Callable[[float, str, PodView], None],
                 clock: Callable[[], float]):
        super().__init__(f"pod-watch-{namespace}")
        self.core, self.ns, self.post, self.clock = core, namespace, post, clock
        self.known: dict[str, PodView] = {}

    def relist(self) -> str:
        """Every pod as MODIFIED, and DELETED for those gone while the watch was down."""
        body = json.loads(self.core.list_namespaced_pod(self.ns, _preload_content=False,
                                                        _request_timeout=(10, 120)).data)
        t, seen = self.clock(), {}
        for item in body.get("items", []):
            pv = pod_view(item)
            seen[pv.uid] = pv
            self.post(t, "MODIFIED", pv)
        for uid in self.known.keys() - seen.keys():
            self.post(t, "DELETED", self.known[uid])
        self.known = seen
        return body["metadata"]["resourceVersion"]

    def watch(self, rv: str):
        return self.core.list_namespaced_pod(self.ns, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                                             timeout_seconds=60, _preload_content=False, _request_timeout=(10, 90))

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        pv = pod_view(obj)
        if typ == "DELETED":
            self.known.pop(pv.uid, None)
        else:
            self.known[pv.uid] = pv
        self.post(self.clock(), typ, pv)
