"""Simulated Ray GCS placement-group scheduling.

Mechanisms modeled:
- The GCS schedules one placement group at a time: its own work (gcs_base_ms + per bundle)
  plus a two-phase commit to the raylets (prepare, then commit: two round trips). That service
  time is the GCS throughput limit.
- Strategies: STRICT_SPREAD (distinct nodes), SPREAD (distinct if possible), STRICT_PACK (one
  node), PACK (one node if possible). Bundles go to the feasible node with the least resources
  left (best fit), as Ray's bundle scorer does.
- A group that cannot be placed now goes back to the pending queue with exponential backoff
  (retry_initial_s doubling to retry_max_s) while the GCS moves on, so small groups overtake
  large ones; a group larger than the whole cluster waits as infeasible.
- When a node dies its bundles are rescheduled first; the group's other bundles stay reserved
  (partial holdings while RESCHEDULING).
"""
from __future__ import annotations

import heapq

import numpy as np

from fakes.sim.base import JobState, SimTarget
from loadgen.model.target import TargetContext


class SimRay(SimTarget):
    name = "ray"
    restart_whole_gang = False

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.pending: list = []          # (rescheduling first, ready order, seq, job_id)
        self.busy_until = 0.0
        self.tick_pending = False
        self.infeasible: dict[int, JobState] = {}
        self._n = 0
        self.created = 0
        self.service_ms: list[float] = []

    def _strategy(self, js: JobState) -> str:
        return self.cfg["multi_node_strategy"] if js.job.members > 1 else self.cfg["single_node_strategy"]

    def _push(self, js: JobState, t: float, first: bool = False) -> None:
        self._n += 1
        heapq.heappush(self.pending, (0 if first else 1, t, self._n, js.job.id))
        self._kick(t)

    def _enqueue(self, js: JobState, t: float) -> None:
        js.extra.update(retries=0, nodes=[])
        self._push(js, t)

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        js.extra["nodes"] = [n for n, _, _ in self.state.holdings.get(js.job.id, [])]
        js.extra["retries"] = 0
        self._push(js, t, first=True)

    def _kick(self, t: float) -> None:
        if not self.tick_pending and self.pending:
            self.tick_pending = True
            self._at(max(t, self.busy_until), self._tick)

    def _on_release(self, t: float) -> None:
        for js in list(self.infeasible.values()):
            if self._possible(js):
                del self.infeasible[js.job.id]
                self._push(js, t)

    def _possible(self, js: JobState) -> bool:
        """Could the group ever fit the cluster as it is (all nodes up and empty)?"""
        up = int(self.state.up.sum())
        strategy = self._strategy(js)
        need = js.job.members - js.bound
        if strategy == "STRICT_SPREAD":
            return up >= js.job.members
        if strategy == "STRICT_PACK":
            return js.job.members * js.job.gpus_per_member <= self.state.gpn and up >= 1
        return up * self.state.gpn >= need * js.job.gpus_per_member

    def _tick(self, t: float) -> None:
        self.tick_pending = False
        c = self.cfg
        while self.pending:
            _, _, _, jid = heapq.heappop(self.pending)
            js = self.jobs[jid]
            if js.done or js.running:
                continue
            need = js.job.members - js.bound
            gcs = (c["gcs_base_ms"] + c["gcs_per_bundle_ms"] * need) / 1000.0
            nodes = self._place(js, need)
            if nodes is None:
                self.busy_until = t + gcs
                self._count("schedule_failures")
                if not self._possible(js):
                    self.infeasible[jid] = js
                else:
                    delay = min(c["retry_initial_s"] * 2 ** min(js.extra["retries"], 30), c["retry_max_s"])
                    js.extra["retries"] += 1
                    self._at(self.busy_until + delay, self._retry, js)
                break
            for n in nodes:
                self.state.take(jid, n, js.job.gpus_per_member, js.job.cpus_per_member)
            done = t + gcs + 2 * c["commit_rtt_ms"] / 1000.0     # prepare + commit round trips
            self.busy_until = done
            self.service_ms.append((done - t) * 1000)
            self._at(done, self._committed, js, len(nodes), js.run_token)
            break
        self._kick(self.busy_until)

    def _retry(self, t: float, js: JobState) -> None:
        if not js.done and not js.running:
            self._push(js, t)

    def _committed(self, t: float, js: JobState, n: int, token: int) -> None:
        if js.done or token != js.run_token:
            return
        self.created += 1
        self._bind(js, t, n)

    def _place(self, js: JobState, need: int) -> list[int] | None:
        s = self.state
        g, c = js.job.gpus_per_member, js.job.cpus_per_member
        strategy = self._strategy(js)
        used = set(js.extra.get("nodes", []))
        if strategy == "STRICT_PACK" or (strategy == "PACK" and need * g <= s.gpn):
            ok = np.flatnonzero(s.feasible(g * need, c * need))
            if len(ok):
                return [int(ok[np.argmin(s.free_gpus[ok])])] * need
            if strategy == "STRICT_PACK":
                return None
        if not s.fits(need, g) and strategy == "STRICT_SPREAD":
            return None
        free = s.free_gpus.copy()
        cpus = s.free_cpus.copy()
        chosen: list[int] = []
        distinct = strategy in ("STRICT_SPREAD", "SPREAD")
        for _ in range(need):
            mask = (free >= g) & (cpus >= c) & s.up
            if distinct:
                excl = list(used | set(chosen))
                if excl:
                    mask[excl] = False
                if not mask.any() and strategy == "SPREAD":
                    mask = (free >= g) & (cpus >= c) & s.up
            ok = np.flatnonzero(mask)
            if len(ok) == 0:
                return None
            n = int(ok[np.argmin(free[ok])])           # best fit: least left over
            free[n] -= g
            cpus[n] -= c
            chosen.append(n)
        return chosen

    def snapshot(self, now: float):
        snap = super().snapshot(now)
        snap.control_plane.update(pending_groups=len(self.waiting), infeasible_groups=len(self.infeasible))
        return snap

    def control_plane(self) -> dict:
        ms = np.array(self.service_ms) if self.service_ms else np.zeros(1)
        return {**super().control_plane(), "groups_created": self.created,
                "gcs_service_ms_mean": round(float(ms.mean()), 4),
                "gcs_max_groups_per_s": round(1000.0 / float(ms.mean()), 2) if self.service_ms else None,
                "infeasible_groups": len(self.infeasible)}
