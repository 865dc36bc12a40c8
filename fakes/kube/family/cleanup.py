"""Stopping: the client pools and the watch, a last scrape, and on an existing cluster every object
the run labelled, deleted and waited for."""
from __future__ import annotations

import json
import shutil
import time
from functools import partial
from typing import Any

from fakes.kube import chaos as cluster_chaos
from fakes.kube.refusal import reason_of
from loadgen.model.signals import signals_held
from loadgen.model.target import RUN_LABEL

# While the labelled pods' count still falls, the wait goes on at least this long: longer than one
# delete-collection (the apiserver cuts it off at 60 s) plus a listing of tens of thousands of pods.
DRAINING_S = 150.0


class Cleanup:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for pool in (self.pool, self._chaos_pool):
            if pool:
                pool.shutdown(wait=False, cancel_futures=True)
        if self.watch:
            self.watch.stop()
        if self.api is not None and self.role != "submit":
            self._final = self._scrape()
            if self.existing:
                with signals_held():
                    self.left_behind = self._remove_labelled()
        if self.cluster:
            self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def labelled(self) -> dict[str, int]:
        """Objects carrying this run's label in the cluster, by kind (what stop() must leave at 0)."""
        sel = f"{RUN_LABEL}={self.label}"
        out = {}
        for kind, call in (("pods", self.api.list_pod_for_all_namespaces), ("namespaces", self.api.list_namespace),
                           ("nodes", self.api.list_node),
                           ("configmaps", self.api.list_config_map_for_all_namespaces)):
            out[kind] = len(json.loads(call(label_selector=sel, _preload_content=False,
                                            _request_timeout=(10, 60)).data)["items"])
        out.update(self._labelled_scheduler_objects(sel))
        return out

    def _labelled_scheduler_objects(self, selector: str) -> dict[str, int]:
        return {}

    def _remove_scheduler_objects(self) -> None:
        """Volcano: its Jobs and the run's Queues."""

    def _remove_labelled(self, timeout_s: float = 90.0) -> dict[str, int]:
        """Delete everything the run created on the existing cluster (its pods, namespaces, nodes,
        scheduler objects), recover nodes it failed, and wait until nothing labelled is left;
        returns what is still there after timeout_s (all zeros when clean)."""
        sel, api = f"{RUN_LABEL}={self.label}", self.api
        quiet = dict(_preload_content=False, _request_timeout=(10, 60))
        steps = [lambda: self._remove_scheduler_objects()]
        steps += [partial(api.delete_collection_namespaced_pod, ns, label_selector=sel, grace_period_seconds=0, **quiet)
                  for ns in (self.ns, self.fill_ns)]
        steps += [partial(api.delete_namespace, ns, **quiet) for ns in (self.ns, self.fill_ns)]
        for i in sorted(self.down):
            steps.append(partial(cluster_chaos.mark_failed, api, self.node_names[i], False))
        for step in steps:
            self._cleanup_step(step)
        deadline = time.monotonic() + timeout_s
        left = self.labelled()
        before, resent = left["pods"], time.monotonic()
        while left["pods"] and time.monotonic() < deadline:     # our kwok finalizes pods on our nodes
            time.sleep(1.0)
            left = self.labelled()
            if left["pods"] < before:
                # still draining: tens of thousands of pods (a soak past its ceiling) take longer to
                # delete than timeout_s, and the apiserver cuts a delete-collection off after 60 s
                # (504) with only part of them gone, so it is sent again while the count falls
                deadline = max(deadline, time.monotonic() + DRAINING_S)
                before = left["pods"]
            if time.monotonic() - resent >= 10.0:
                resent = time.monotonic()
                for ns in (self.ns, self.fill_ns):
                    self._cleanup_step(partial(api.delete_collection_namespaced_pod, ns, label_selector=sel,
                                               grace_period_seconds=0, **quiet))
        try:
            api.delete_collection_node(label_selector=sel, **quiet)
        except Exception as e:
            self._count(f"cleanup_error_{reason_of(e)}")
        while any(left.values()) and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self.labelled()
        return left

    def _cleanup_step(self, step) -> None:
        try:
            step()
        except Exception as e:
            if getattr(e, "status", None) != 404:
                self._count(f"cleanup_error_{reason_of(e)}")

    def after_stop(self) -> dict[str, Any]:
        """What stop() left on an existing cluster ({} on a cluster of our own)."""
        return {} if self.left_behind is None else {"left_behind": self.left_behind}
