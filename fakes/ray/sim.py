"""Simulated Ray GCS placement-group scheduling (gcs_placement_group_manager.cc, _scheduler.cc).

Mechanisms modeled:
- Pending groups wait in one queue ordered by rank: a new group's rank is its registration time.
  The GCS schedules one group at a time, always the lowest rank, and only once that rank is due.
- One attempt costs the GCS gcs_base_ms + gcs_per_bundle_ms x b + gcs_per_bundle_sq_us x b^2
  + gcs_per_node_us x alive nodes (b = bundles still to place); a placed group then takes a
  prepare and a commit round trip to the raylets (2 x commit_rtt_ms) before it is created.
- A group that cannot be placed now is re-queued at rank = now + its backoff (retry_initial_s,
  times retry_multiplier per failure, at most retry_max_s), so younger groups go first. Nothing
  wakes the GCS when its rank comes due: the next registration, finished attempt or the
  GCS's periodic Tick (gcs_tick_s) does. Freed resources do not trigger scheduling either.
- A group larger than the alive cluster could ever hold is infeasible: it leaves the queue
  until a node is added.
- Strategies: STRICT_SPREAD (distinct nodes), SPREAD (distinct if possible), STRICT_PACK (one
  node), PACK (one node if possible). Bundles go to the feasible node with the least resources
  left (best fit), as Ray's bundle scorer does.
- When a node dies its bundles are rescheduled (RESCHEDULING) while the group's other bundles
  stay reserved (partial holdings). Such a group is re-queued at rank 0 without backoff: the
  GCS retries it back to back, ahead of every other group, until it fits.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from fakes.ray.traits import RayTraits
from fakes.sim.base import JobState, SimTarget
from loadgen.model.target import ChaosAction, TargetContext


class SimRay(RayTraits, SimTarget):
    name = "ray"
    restart_whole_gang = False

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.pending: list = []          # (rank, seq, job_id), lowest rank scheduled first
        self._n = 0
        self.scheduling = False          # an attempt is in progress (one group at a time)
        self.tick_at: float | None = None
        self.spin: tuple | None = None   # (job, first failure, attempt cost) of a group retried back to back
        self.infeasible: dict[int, JobState] = {}
        self.created = 0
        self.attempts = 0
        self.gcs_busy_s = 0.0                  # time the placement-group scheduler spent in attempts
        self.service_ms: list[float] = []      # GCS work + commit of each created group
        self.creation_ms: list[float] = []     # registration (or reschedule) to created, retries included

    def _strategy(self, js: JobState) -> str:
        return self.cfg["multi_node_strategy"] if js.job.members > 1 else self.cfg["single_node_strategy"]

    # --- the pending queue --------------------------------------------------------------------
    def _push(self, js: JobState, rank: float) -> None:
        self._n += 1
        heapq.heappush(self.pending, (rank, self._n, js.job.id))

    def _register(self, js: JobState, t: float, rank: float) -> None:
        js.extra.update(backoff=self.cfg["retry_initial_s"], queued_at=t)
        self._push(js, rank)

    def _enqueue(self, js: JobState, t: float) -> None:
        js.extra.update(nodes=[], resched=False)
        self._register(js, t, t)
        self._schedule_pending(t)

    def _restarts_whole(self, reason: str) -> bool:
        # A group cannot lose one bundle on request: an eviction removes the group and creates it
        # again (what the real adapter does); a dead node's bundles are rescheduled in place.
        return reason == "evicted"

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        if not self.state.holdings.get(js.job.id):          # removed and created again: a new group
            js.extra.update(nodes=[], resched=False)
            self._register(js, t, t)
            self._schedule_pending(t)
            return
        js.extra["nodes"] = [n for n, _, _ in self.state.holdings.get(js.job.id, [])]
        if js.extra["resched"]:
            return        # already RESCHEDULING: wherever it waits, these bundles are now unplaced too
        js.extra["resched"] = True              # OnNodeDead: CREATED -> RESCHEDULING at rank 0
        self._register(js, t, 0.0)
        self._schedule_pending(t)

    def _schedule_pending(self, t: float) -> None:
        """SchedulePendingPlacementGroups: start the next due group unless an attempt is in progress."""
        while not self.scheduling and self.pending:
            rank, _, jid = self.pending[0]
            if rank > t:
                self._tick_after(rank)
                return
            heapq.heappop(self.pending)
            js = self.jobs[jid]
            if not js.done and not js.running:
                self._attempt(js, t)

    def _tick_after(self, rank: float) -> None:
        tick = self.cfg["gcs_tick_s"]
        at = math.ceil(rank / tick - 1e-9) * tick
        if self.tick_at is None or at < self.tick_at:
            self.tick_at = at
            self._at(at, self._tick)

    def _tick(self, t: float) -> None:
        if t != self.tick_at:
            return                      # superseded by an earlier tick
        self.tick_at = None
        self._schedule_pending(t)

    # --- one attempt --------------------------------------------------------------------------
    def _cost(self, bundles: int) -> float:
        c = self.cfg
        ms = (c["gcs_base_ms"] + c["gcs_per_bundle_ms"] * bundles + c["gcs_per_bundle_sq_us"] * bundles ** 2 / 1e3
              + c["gcs_per_node_us"] * self.state.count_ge(0) / 1e3)
        return ms / 1e3

    def _attempt(self, js: JobState, t: float) -> None:
        need = js.job.members - js.bound
        gcs = self._cost(need)
        self.scheduling = True
        self.attempts += 1
        js.extra.update(inflight=True, attempt_t=t)
        nodes = self._place(js, need)
        if nodes is None:
            self.gcs_busy_s += gcs
            self._at(t + gcs, self._failed, js, self._possible(js))
        else:
            done = t + gcs + 2 * self.cfg["commit_rtt_ms"] / 1e3      # prepare + commit round trips
            self.gcs_busy_s += done - t
            self._at(done, self._commit, js, nodes, js.run_token)

    def _failed(self, t: float, js: JobState, feasible: bool) -> None:
        self._count("schedule_failures")
        js.extra["inflight"] = False
        if js.done or js.running:
            self.scheduling = False
        elif not feasible:
            self.infeasible[js.job.id] = js
            self.scheduling = False
        elif js.extra["resched"]:
            # Rank 0, no backoff: the GCS tries again at once, and again, until resources change.
            self.spin = (js, t, self._cost(js.job.members - js.bound))
            return
        else:
            self.scheduling = False
            self._push(js, t + js.extra["backoff"])
            js.extra["backoff"] = min(js.extra["backoff"] * self.cfg["retry_multiplier"], self.cfg["retry_max_s"])
        self._schedule_pending(t)

    def _commit(self, t: float, js: JobState, nodes: list[int], token: int) -> None:
        if token != js.run_token or not self._still_fits(js, nodes):
            # A node died (or filled) during prepare/commit: the attempt fails like any other.
            self._count("commit_failures")
            self._failed(t, js, True)
            return
        self.scheduling = False
        js.extra["inflight"] = False
        for n in nodes:
            self.state.take(js.job.id, n, js.job.gpus_per_member, js.job.cpus_per_member)
        self.created += 1
        self.service_ms.append((t - js.extra["attempt_t"]) * 1e3)
        self.creation_ms.append((t - js.extra["queued_at"]) * 1e3)
        js.extra["resched"] = False
        self._bind(js, t, len(nodes))
        self._schedule_pending(t)

    def _still_fits(self, js: JobState, nodes: list[int]) -> bool:
        s, g, c = self.state, js.job.gpus_per_member, js.job.cpus_per_member
        per: dict[int, int] = {}
        for n in nodes:
            per[n] = per.get(n, 0) + 1
        return all(s.up[n] and s.free_gpus[n] >= k * g and s.free_cpus[n] >= k * c for n, k in per.items())

    # --- what changes the cluster -------------------------------------------------------------
    def _on_release(self, t: float) -> None:
        """Freed resources wake nobody, except a rescheduling group the GCS is retrying back to back:
        its next attempt sees them."""
        if self.spin is None:
            return
        js, first, cost = self.spin
        self.spin = None
        missed = max(0, math.ceil((t - first) / cost - 1e-9)) if cost > 0 else 0
        self._count("schedule_failures", missed)          # attempts that started before the change
        self.attempts += missed
        self.gcs_busy_s += missed * cost
        self._at(first + missed * cost, self._resume, js)

    def _resume(self, t: float, js: JobState) -> None:
        self.scheduling = False
        if not js.done and not js.running:
            self._register(js, t, 0.0)
        self._schedule_pending(t)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        # OnNodeAdd: infeasible groups go back to the pending queue as new ones.
        for js in self.infeasible.values():
            if not js.done:
                self._register(js, now, now)
        self.infeasible.clear()
        super()._chaos_node_recover(action, now)
        self._schedule_pending(now)

    def _possible(self, js: JobState) -> bool:
        """Could the group ever fit the alive cluster (all its nodes empty)?"""
        up = self.state.count_ge(0)
        strategy = self._strategy(js)
        need = js.job.members - js.bound
        if strategy == "STRICT_SPREAD":
            return up >= js.job.members
        if strategy == "STRICT_PACK":
            return js.job.members * js.job.gpus_per_member <= self.state.gpn and up >= 1
        return up * self.state.gpn >= need * js.job.gpus_per_member

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
        if strategy in ("STRICT_SPREAD", "SPREAD"):
            mask = s.feasible(g, c)
            if used:
                mask[list(used)] = False
            ok = np.flatnonzero(mask)
            if len(ok) >= need:         # one bundle per node: best fit is the order (free, index)
                return [int(n) for n in ok[np.argsort(s.free_gpus[ok], kind="stable")[:need]]]
            if strategy == "STRICT_SPREAD":
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

    # --- observation --------------------------------------------------------------------------
    def _live_control_plane(self) -> dict:
        return {"pending_groups": len(self.waiting), "infeasible_groups": len(self.infeasible)}

    def control_plane(self) -> dict:
        ms = np.array(self.service_ms) if self.service_ms else np.zeros(1)
        cr = np.array(self.creation_ms) if self.creation_ms else np.zeros(1)
        return {**super().control_plane(), "groups_created": self.created, "scheduling_attempts": self.attempts,
                "gcs_service_ms_mean": round(float(ms.mean()), 4),
                "gcs_max_groups_per_s": round(1000.0 / float(ms.mean()), 2) if self.service_ms else None,
                "gcs_scheduling_ms_p50": round(float(np.percentile(ms, 50)), 4),
                "gcs_scheduling_ms_p99": round(float(np.percentile(ms, 99)), 4),
                "gcs_creation_ms_p50": round(float(np.percentile(cr, 50)), 4),
                "gcs_creation_ms_p99": round(float(np.percentile(cr, 99)), 4),
                "infeasible_groups": len(self.infeasible),
                "busy_s": {"gcs-placement-groups": round(self.gcs_busy_s, 6)}}
