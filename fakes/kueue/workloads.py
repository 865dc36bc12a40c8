"""Kueue's own view of admission, as the client sees it: a watch of the run's Workloads and of its
ClusterQueues.

A Workload is Kueue's record of one pod group (its name is the group's, fakes/kueue/pods.py). The
watch notes, on the run clock, when each Workload was first seen, when its QuotaReserved and
Admitted conditions turned True (Kueue's admission, a component of the gang's admission: the pods
are then ungated and bound by kube-scheduler), which ClusterQueue admitted it and how often it was
evicted. The ClusterQueue watch keeps the most GPUs each queue had borrowed from its cohort
(status.flavorsReservation[].resources[].borrowed), Kueue's own borrowing figure.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fakes.kube.listwatch import ListWatch
from fakes.kube.pods import GPU


@dataclass
class WorkloadTimes:
    seen: float
    queue: str = ""                      # the ClusterQueue that reserved quota for it
    quota_reserved: float | None = None  # first time, in this admission
    admitted: float | None = None
    evictions: int = 0
    admissions: list[float] = field(default_factory=list)   # seen -> Admitted, per admission
    first_seen: float = 0.0
    first_admitted: float | None = None


def quantity(text: str | int | float | None) -> float:
    """A GPU quantity ("3", "0", "2k" never occurs for GPUs) as a number."""
    if text in (None, ""):
        return 0.0
    return float(text)


def condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


class KueueWatch(ListWatch):
    """List-then-watch of one Kueue kind through `list_call(**kwargs)` (a CustomObjectsApi list
    with _preload_content=False); each object reaches on_object(t, type, obj)."""

    def __init__(self, name: str, list_call: Callable[..., Any], on_object: Callable[[float, str, dict], None],
                 clock: Callable[[], float]):
        super().__init__(name)
        self.list_call, self.on_object, self.clock = list_call, on_object, clock

    def relist(self) -> str:
        body = json.loads(self.list_call(_request_timeout=(10, 120)).data)
        t = self.clock()
        for item in body.get("items", []):
            self.on_object(t, "MODIFIED", item)
        return body["metadata"]["resourceVersion"]

    def watch(self, rv: str):
        return self.list_call(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=60,
                              _request_timeout=(10, 90))

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        self.on_object(self.clock(), typ, obj)


class AdmissionBook:
    """What the two watches saw, updated on their threads (plain dict and attribute stores)."""

    def __init__(self) -> None:
        self.workloads: dict[str, WorkloadTimes] = {}
        self.borrowed_max: dict[str, float] = {}       # ClusterQueue -> most GPUs borrowed at once
        self.reserved: dict[str, float] = {}           # ClusterQueue -> GPUs reserved now
        self.nominal: dict[str, float] = {}
        self.finished: set[str] = set()                # Workloads Kueue marked Finished (or gone)

    def on_workload(self, t: float, typ: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if typ == "DELETED" or condition(obj, "Finished"):
            self.finished.add(name)
        if typ == "DELETED":
            return
        wl = self.workloads.get(name)
        if wl is None:
            wl = self.workloads[name] = WorkloadTimes(seen=t, first_seen=t)
        status = obj.get("status") or {}
        reserved, admitted = condition(obj, "QuotaReserved"), condition(obj, "Admitted")
        if reserved and wl.quota_reserved is None:
            wl.quota_reserved = t
            wl.queue = (status.get("admission") or {}).get("clusterQueue", wl.queue)
        if admitted and wl.admitted is None:
            wl.admitted = t
            wl.admissions.append(t - wl.seen)
            if wl.first_admitted is None:
                wl.first_admitted = t
        if not reserved and wl.quota_reserved is not None:       # evicted: waits for quota again
            wl.evictions += 1
            wl.quota_reserved = wl.admitted = None
            wl.seen = t

    def on_cluster_queue(self, t: float, typ: str, obj: dict[str, Any]) -> None:
        if typ == "DELETED":
            return
        name = obj["metadata"]["name"]
        groups = (obj.get("spec") or {}).get("resourceGroups") or ()
        self.nominal[name] = sum(quantity(r.get("nominalQuota")) for g in groups for f in g.get("flavors") or ()
                                 for r in f.get("resources") or () if r.get("name") == GPU)
        reserved = (obj.get("status") or {}).get("flavorsReservation") or ()
        borrowed = sum(quantity(r.get("borrowed")) for f in reserved for r in f.get("resources") or ()
                       if r.get("name") == GPU)
        self.borrowed_max[name] = max(self.borrowed_max.get(name, 0.0), borrowed)
        self.reserved[name] = sum(quantity(r.get("total")) for f in reserved for r in f.get("resources") or ()
                                  if r.get("name") == GPU)
