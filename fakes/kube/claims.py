"""The one watch over a namespace's ResourceClaims (resource.k8s.io/v1): a list, then a watch from
the list's resourceVersion, a fresh list after an error; each change reaches `post(t, type, claim)`
with the claim as the apiserver sent it (status.allocation is what kube-scheduler decided)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fakes.kube.listwatch import ListWatch


class ClaimWatch(ListWatch):
    """Watches `namespace` with `resource` (a ResourceV1Api of its own: the watch holds a connection)."""

    def __init__(self, resource, namespace: str, post: Callable[[float, str, dict], None],
                 clock: Callable[[], float]):
        super().__init__(f"claim-watch-{namespace}")
        self.api, self.ns, self.post, self.clock = resource, namespace, post, clock
        self.known: dict[str, dict[str, Any]] = {}

    def relist(self) -> str:
        """Every claim as MODIFIED, and DELETED for those gone while the watch was down."""
        body = json.loads(self.api.list_namespaced_resource_claim(self.ns, _preload_content=False,
                                                                  _request_timeout=(10, 120)).data)
        t, seen = self.clock(), {}
        for item in body.get("items", []):
            seen[item["metadata"]["uid"]] = item
            self.post(t, "MODIFIED", item)
        for uid in self.known.keys() - seen.keys():
            self.post(t, "DELETED", self.known[uid])
        self.known = seen
        return body["metadata"]["resourceVersion"]

    def watch(self, rv: str):
        return self.api.list_namespaced_resource_claim(self.ns, watch=True, resource_version=rv,
                                                       allow_watch_bookmarks=True, timeout_seconds=60,
                                                       _preload_content=False, _request_timeout=(10, 90))

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        uid = obj.get("metadata", {}).get("uid", "")
        if typ == "DELETED":
            self.known.pop(uid, None)
        else:
            self.known[uid] = obj
        self.post(self.clock(), typ, obj)
