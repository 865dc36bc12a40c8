"""Ray's chaos kinds: node failure and recovery (raylets or fakelets stopped and restarted; refused
when attached), member evictions and prefill groups."""
from __future__ import annotations

import threading
import time

import numpy as np

from fakes.ray import attach
from fakes.ray.fleet import node_resource
from loadgen.model.target import ChaosAction, ChaosUnsupported

EVICT_SHARED_UNSUPPORTED = (
    "ray with several Locust processes on one cluster: the groups belong to the submitting processes' "
    "drivers, and removing one from the observer would not create it again (evict is a gang restart)")


class RayChaos:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

    # -- chaos -------------------------------------------------------------------------------
    def _nodes(self, action: ChaosAction) -> set[int]:
        return {int(n) % self.n for n in action.params["nodes"]}

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        if self.existing:
            raise ChaosUnsupported(attach.NODE_CHAOS_UNSUPPORTED)
        for i in sorted(self._nodes(action) - self.dead):
            node_id = self.fleet.kill_raylet(i)["node_id"]
            killed = time.monotonic()
            self.dead.add(i)
            self.node_fail_log.append({"t": round(self.clock.at(killed), 3), "node": i, "node_id": node_id,
                                       "groups": sorted(j for j, ns in self.running.items() if i in ns)})
            self._send(op="node_dead", node_id=node_id, t=killed)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        if self.existing:
            raise ChaosUnsupported(attach.NODE_CHAOS_UNSUPPORTED)
        # A raylet takes seconds to boot: do not stall the open-loop driver meanwhile.
        threading.Thread(target=self._restart, args=(sorted(self._nodes(action) & self.dead),), daemon=True).start()

    def _restart(self, nodes: list[int]) -> None:
        for i in nodes:
            try:
                self._restarted.put((i, self.fleet.restart_node(i)["node"]["node_id"], None))
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                self._restarted.put((i, None, f"node_recover {i}: {e}"))

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        model = self.ctx.fleet
        cpus_per_gpu = max(1, model.cpus_per_node // model.gpus_per_node)
        for node, gpus in action.params["placements"]:
            node, gpus = int(node) % self.n, int(gpus)
            if node in self.dead or gpus <= 0:
                continue
            gid = next(self._prefill_ids)
            self._prefill_wanted[gid] = (node, gpus)
            self.counters["prefill_groups"] += 1
            bundle = {"GPU": float(gpus), "CPU": float(gpus * cpus_per_gpu)}
            if self.existing:    # pinned by the node's ray.io/node-id label: no custom resource there
                self._send(op="prefill", id=gid, hold_s=action.params.get("duration_s"), bundles=[bundle],
                           pin=self.node_ids[node])
            else:
                self._send(op="prefill", id=gid, hold_s=action.params.get("duration_s"),
                           bundles=[{**bundle, node_resource(node): 0.001}])

    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        if self.role == "observe":
            raise ChaosUnsupported(EVICT_SHARED_UNSUPPORTED)
        # Ray cannot take one bundle away from a group: eviction removes the whole group and
        # creates it again (a gang restart), the way an operator would preempt it.
        rng = np.random.default_rng([self.ctx.seed, len(self.jobs), self.counters["evicted"]])
        running = sorted(j for j in self.running if j not in self.partial)
        for j in rng.permutation(running)[:int(action.params.get("members", 1))] if running else []:
            self._send(op="evict", id=int(j))
