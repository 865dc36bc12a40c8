"""The Kubernetes family's chaos kinds (Target.chaos dispatches to these): evictions through the
Eviction API, node failure (KWOK NotReady + taint), etcd fill and recovery on a chaos thread, and
prefill pods that fragment the fleet."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from fakes.kube import chaos as cluster_chaos
from fakes.kube.attached import pods_by_node
from fakes.kube.family.gang import TIMEOUT
from fakes.kube.pods import COMPLETE_AFTER, GPU, go_duration, pod_spec
from fakes.kube.refusal import reason_of
from loadgen.model.target import RUN_LABEL, ChaosAction


class ClusterChaos:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

    # --- chaos (Target.chaos dispatches to these) -----------------------------------------------------
    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        """The Eviction API on random running members (what a drain or a preemption does); the
        losses come back through the watch."""
        self._observe(now)
        running = sorted(self.pods[uid].name for g in self.gangs.values() if g.admitted_t is not None
                         for uid in g.bound if uid in self.pods and self.pods[uid].holds)
        for name in self.rng.sample(running, min(int(action.params.get("members", 1)), len(running))):
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": self.ns},
                    "deleteOptions": {"gracePeriodSeconds": 0}}
            try:
                self.api.create_namespaced_pod_eviction(name, self.ns, body, _preload_content=False,
                                                        _request_timeout=TIMEOUT)
                self._count("evictions")
            except Exception as e:
                self._count(f"eviction_refused_{reason_of(e)}")

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        """KWOK flips the nodes NotReady and the taint-eviction controller deletes their pods: the
        losses come back through the watch, as node-failure."""
        self._mark_failed(action, True)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        self._mark_failed(action, False)

    def _mark_failed(self, action: ChaosAction, failed: bool) -> None:
        nodes = {int(n) for n in action.params.get("nodes", [])}
        if failed and self.existing and self.existing.node_selector:
            nodes -= self._hosting_foreign(nodes)
        for i in sorted(nodes):
            cluster_chaos.mark_failed(self.api, self.node_names[i], failed)
        if failed:
            self.down |= nodes
        else:
            self.down -= nodes

    def _hosting_foreign(self, nodes: set[int]) -> set[int]:
        """Selected nodes (--node-selector) that run a pod gangstorm did not create: failing them
        would evict it, so chaos leaves them alone and counts them."""
        by_node = pods_by_node(self.api)
        busy = {i for i in nodes if any((m.get("labels") or {}).get(RUN_LABEL) != self.label
                                        for m in by_node.get(self.node_names[i], []))}
        if busy:
            self._count("node_fail_skipped_foreign", len(busy))
        return busy

    # etcd steps take seconds to minutes: they run in order on one chaos thread so the runner keeps
    # submitting (and observing the refusals) meanwhile; their figures land in self.figures.
    def _chaos_etcd_fill(self, action: ChaosAction, now: float) -> None:
        p = action.params
        fill = partial(cluster_chaos.fill_etcd, self.api, int(p.get("bytes", 0)),
                       int(p.get("object_bytes", 900 * 1024)), self._stop, self.fill_ns, {RUN_LABEL: self.label})
        self._chaos_pool.submit(self._chaos_step, "etcd_fill", fill)

    def _chaos_etcd_recover(self, action: ChaosAction, now: float) -> None:
        recover = partial(cluster_chaos.recover_etcd, self.api, self.cluster, self.fill_ns)
        self._chaos_pool.submit(self._chaos_step, "etcd_recover", recover)

    def _chaos_step(self, key: str, step: Callable[[], dict]) -> None:
        self.figures[key] = {**step(), "t_done": round(self.clock.now(), 2)}

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        """Pods pinned with spec.nodeName (no scheduler) that fragment the fleet; KWOK completes
        them after duration_s."""
        dur = action.params.get("duration_s")
        ann = {COMPLETE_AFTER: go_duration(float(dur))} if dur else {}
        for node, gpus in action.params.get("placements", []):
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"prefill-{next(self._prefills)}", "annotations": ann,
                                 "labels": {"app.kubernetes.io/managed-by": "gangstorm",
                                            "gangstorm.io/prefill": "true", RUN_LABEL: self.label}},
                    "spec": pod_spec({GPU: str(int(gpus)), "cpu": "1"}, nodeName=self.node_names[int(node)])}
            self._call(partial(self.api.create_namespaced_pod, self.ns, body, _preload_content=False,
                               _request_timeout=TIMEOUT), failed="prefill_errors")
            self._count("prefill_gpus", int(gpus))
