"""Simulated Ray GCS placement-group scheduling (gcs_placement_group_manager.cc, _scheduler.cc).

Mechanisms modeled:
- Pending groups wait in one queue ordered by rank: a new group's rank is its registration time.
  The GCS schedules one group at a time, always the lowest rank, and only once that rank is due.
- One attempt costs the GCS gcs_base_ms + gcs_per_bundle_ms x b + gcs_per_bundle_sq_us x sum(k^2)
  + gcs_per_node_us x n + gcs_per_node_scored_ns x n x passes (b = bundles still to place, k = the
  bundles it puts on each node, n = alive nodes); a placed group then takes a prepare and a commit
  round to the m nodes it uses (2 x (commit_rtt_ms + commit_per_node_ms x m): nodes that share a
  machine's cores, or one fakelet process, answer one after another) before it is created. What grows faster than the
  bundles grows per node: a node's prepare and commit of k bundles, and the resource view it then
  reports, grow with k (measured: 40 bundles cost 5 raylets 8x what 10 do, 5 fakelets 1.6x, and
  SPREAD groups of 64 bundles on 64 fakelets one apiece stay linear). The node terms follow Schedule() in Ray's
  bundle_scheduling_policy.cc: every attempt copies the alive nodes into its candidate map and
  their CPUs into another (gcs_per_node_us), then GetBestNode scores every remaining candidate once
  per pass: a pass per bundle for SPREAD and STRICT_SPREAD, one per node chosen for PACK, one for
  STRICT_PACK (gcs_per_node_scored_ns).
- A created group costs the GCS gcs_followup_ratio x its attempt's time again before the next
  attempt starts: the resource views its nodes report after the prepare and the commit (applied on
  the GCS's main thread, GcsResourceManager::Update), the table writes and the client's calls about
  the group (wait, read, remove) that Ray's scheduling-latency statistic does not count.
- A group that cannot be placed now is re-queued at rank = now + its backoff (retry_initial_s,
  times retry_multiplier per failure, at most retry_max_s), so younger groups go first. Nothing
  wakes the GCS when its rank comes due: the next registration, finished attempt or the
  GCS's periodic Tick (gcs_tick_s) does. Freed resources do not trigger scheduling either.
- A group larger than the alive cluster could ever hold is infeasible: it leaves the queue
  until a node is added.
- Strategies: STRICT_SPREAD (distinct nodes), SPREAD (distinct if possible, then again over the
  nodes it chose), STRICT_PACK (one node), PACK (fill one node, then the next). Each bundle goes to
  the feasible node Ray's LeastResourceScorer rates best: the most left of what it asks for
  ((available - requested) / available, summed over GPU and CPU), so groups spread over the
  emptiest nodes rather than fill the fullest.
- When a node dies its bundles are rescheduled (RESCHEDULING) while the group's other bundles
  stay reserved (partial holdings). Such a group is re-queued at rank 0 without backoff: the
  GCS retries it back to back, ahead of every other group, until it fits.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter

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
        self.busy_until = 0.0            # the GCS follows up a created group until then
        self.wake_at: float | None = None
        self.spin: tuple | None = None   # (job, first failure, attempt cost) of a group retried back to back
        self.infeasible: dict[int, JobState] = {}
        self.no_fit: set = set()               # sliced shapes that found no room at state version no_fit_at
        self.no_fit_at = -1
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
        """SchedulePendingPlacementGroups: start the next due group unless an attempt is in progress
        or the GCS is still following up a created group."""
        if t < self.busy_until:
            if self.pending and (self.wake_at is None or self.wake_at > self.busy_until):
                self.wake_at = self.busy_until
                self._at(self.busy_until, self._wake)
            return
        while not self.scheduling and self.pending:
            rank, _, jid = self.pending[0]
            if rank > t:
                self._tick_after(rank)
                return
            heapq.heappop(self.pending)
            js = self.jobs[jid]
            if not js.done and not js.running:
                self._attempt(js, t)

    def _wake(self, t: float) -> None:
        if t != self.wake_at:
            return                      # superseded
        self.wake_at = None
        self._schedule_pending(t)

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
    def _cost(self, bundles: int, passes: int, nodes: list[int] | None = None) -> float:
        """Seconds of GCS work for one attempt at `bundles` bundles that scores the nodes `passes`
        times and places them on `nodes` (None: it places nothing, nothing is prepared)."""
        c = self.cfg
        n = self.state.count_ge(0)
        per_node = Counter(nodes) if nodes else Counter()
        ms = (c["gcs_base_ms"] + c["gcs_per_bundle_ms"] * bundles
              + c["gcs_per_bundle_sq_us"] * sum(k * k for k in per_node.values()) / 1e3
              + c["gcs_per_node_us"] * n / 1e3 + c["gcs_per_node_scored_ns"] * n * passes / 1e6
              + 2 * c["commit_per_node_ms"] * len(per_node))
        return ms / 1e3

    def _passes(self, js: JobState, need: int, nodes: list[int] | None) -> int:
        """How many times Schedule() scores the candidate nodes (GetBestNode calls)."""
        strategy = self._strategy(js)
        if strategy == "STRICT_PACK":
            return 1
        if strategy == "PACK" and nodes is not None:
            return len(set(nodes))
        return need

    def _attempt(self, js: JobState, t: float) -> None:
        need = js.job.members - js.bound
        self.scheduling = True
        self.attempts += 1
        js.extra.update(inflight=True, attempt_t=t)
        nodes = self._place(js, need)
        gcs = self._cost(need, self._passes(js, need, nodes), nodes)
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
            need = js.job.members - js.bound
            self.spin = (js, t, self._cost(need, self._passes(js, need, None)))
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
            # the raylet's instance allocation: a fractional demand goes to the best-fit GPU
            # (ray src/ray/common/scheduling/resource_instance_set.cc, TryAllocate)
            self.state.take(js.job.id, n, js.job.gpus_per_member, js.job.cpus_per_member, js.job.gpu_share, "best")
        self.created += 1
        self.service_ms.append((t - js.extra["attempt_t"]) * 1e3)
        follow = self.cfg["gcs_followup_ratio"] * (t - js.extra["attempt_t"])
        if follow > 0:                  # the next attempt waits for the created group's follow-up work
            self.busy_until = max(t, self.busy_until) + follow
            self.gcs_busy_s += follow
        self.creation_ms.append((t - js.extra["queued_at"]) * 1e3)
        js.extra["resched"] = False
        self._bind(js, t, len(nodes))
        self._schedule_pending(t)

    def _still_fits(self, js: JobState, nodes: list[int]) -> bool:
        s, g, c = self.state, js.job.gpus_per_member, js.job.cpus_per_member
        if s.sliced(js.job):
            cap = s.member_capacity(js.job)
            return all(s.up[n] and cap[n] >= k and s.free_cpus[n] >= k * c for n, k in Counter(nodes).items())
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
        if self.state.sliced(js.job):
            return up >= 1 if strategy != "STRICT_SPREAD" else up >= js.job.members
        if strategy == "STRICT_SPREAD":
            return up >= js.job.members
        if strategy == "STRICT_PACK":
            return js.job.members * js.job.gpus_per_member <= self.state.gpn and up >= 1
        return up * self.state.gpn >= need * js.job.gpus_per_member

    @staticmethod
    def _score(free: np.ndarray, cpus: np.ndarray, g: int, c: int) -> np.ndarray:
        """Ray's LeastResourceScorer (scorer.cc): per requested resource (available - requested) /
        available, summed. GetBestNode takes the highest: the node with the most left, not the best fit."""
        score = (free - g) / np.maximum(free, 1)
        return score + (cpus - c) / np.maximum(cpus, 1) if c > 0 else score

    def _best(self, ok: np.ndarray, free: np.ndarray, cpus: np.ndarray, g: int, c: int) -> int:
        """GetBestNode among the candidates `ok` (ties: the lowest index, where Ray takes hash order)."""
        return int(ok[np.argmax(self._score(free[ok], cpus[ok], g, c))])

    def _place(self, js: JobState, need: int) -> list[int] | None:
        """Where Schedule() (bundle_scheduling_policy.cc) puts `need` bundles, or None."""
        s = self.state
        if s.sliced(js.job):
            # a shape that found no room at this state version finds none again (a model shortcut:
            # the GCS still pays for the attempt in _cost); STRICT_SPREAD depends on the group's own nodes
            key = (js.job.share, js.job.gpus_per_member, js.job.gpu_spec, js.job.cpus_per_member,
                   self._strategy(js), need)
            if key[4] != "STRICT_SPREAD" and self.no_fit_at == s.version and key in self.no_fit:
                return None
            nodes = self._place_sliced(js, need)
            if nodes is None:
                if self.no_fit_at != s.version:
                    self.no_fit, self.no_fit_at = set(), s.version
                self.no_fit.add(key)
            return nodes
        g, c = js.job.gpus_per_member, js.job.cpus_per_member
        strategy = self._strategy(js)
        used = set(js.extra.get("nodes", []))
        free, cpus = s.free_gpus.astype(float), s.free_cpus.astype(float)
        if strategy == "STRICT_PACK":                 # the whole group on the best node that holds it
            ok = np.flatnonzero(s.feasible(g * need, c * need))
            return [self._best(ok, free, cpus, g * need, c * need)] * need if len(ok) else None
        if strategy == "PACK":                        # fill the best node, then the next best, ...
            chosen: list[int] = []
            cand = s.feasible(g, c)
            while len(chosen) < need:
                ok = np.flatnonzero(cand)
                if not len(ok):
                    return None
                n = self._best(ok, free, cpus, g, c)
                k = min(need - len(chosen), int(free[n] // g) if g else need, int(cpus[n] // c) if c else need)
                chosen += [n] * k
                cand[n] = False
            return chosen
        cand = s.feasible(g, c)                      # SPREAD and STRICT_SPREAD: one best node per bundle
        if strategy == "STRICT_SPREAD" and used:
            cand[list(used)] = False
        if strategy == "STRICT_SPREAD" and cand.sum() < need:
            return None
        ok = np.flatnonzero(cand)
        if len(ok) >= need:                          # one bundle per node: the best `need`, best first
            order = np.lexsort((ok, -self._score(free[ok], cpus[ok], g, c)))
            return [int(n) for n in ok[order[:need]]]
        if strategy == "STRICT_SPREAD":
            return None
        chosen = [int(n) for n in ok]                # every candidate once, then SPREAD goes back over
        for n in chosen:                             # the nodes it chose, the best one each time
            free[n] -= g
            cpus[n] -= c
        while len(chosen) < need:
            sel = np.array(sorted(set(chosen)))
            sel = sel[(free[sel] >= g) & (cpus[sel] >= c)] if len(sel) else sel
            if not len(sel):
                return None
            n = self._best(sel, free, cpus, g, c)
            free[n] -= g
            cpus[n] -= c
            chosen.append(n)
        return chosen

    def _place_sliced(self, js: JobState, need: int) -> list[int] | None:
        """Bundles of a fraction of one GPU ({"GPU": 0.25}) or of a GPU model: the GCS scores nodes
        by their summed free GPU (its cluster view holds one GPU total per node), the candidates are
        the nodes where a raylet would find one GPU instance that fits (prepare would succeed).
        PACK fills the best node with as many bundles as its GPUs fit, then the next; SPREAD puts
        one bundle per node, best first."""
        s = self.state
        share, c = js.job.gpu_share, js.job.cpus_per_member
        g = share.amount / 1000 if share.kind == "milli" else float(js.job.gpus_per_member)   # num_gpus asked
        free = np.where(s.up[:, None], s.slices.free_compute, 0.0).sum(axis=1)
        cpus = s.free_cpus.astype(float)
        cand = s.feasible_for(js.job)
        cap = s.member_capacity(js.job)
        strategy = self._strategy(js)
        if strategy == "STRICT_SPREAD":
            cand[list(set(js.extra.get("nodes", [])))] = False
        if strategy in ("PACK", "STRICT_PACK"):
            chosen: list[int] = []
            while len(chosen) < need:
                ok = np.flatnonzero(cand)
                if not len(ok) or (strategy == "STRICT_PACK" and chosen):
                    return None
                n = self._best(ok, free, cpus, g, c)
                chosen += [n] * min(need - len(chosen), max(int(cap[n]), 1), int(cpus[n] // c) if c else need)
                cand[n] = False
            return chosen
        ok = np.flatnonzero(cand)
        if len(ok) < need:
            return None if strategy == "STRICT_SPREAD" or not len(ok) else \
                (None if cap[ok].sum() < need else self._place_sliced_pack(ok, free, cpus, g, c, cap, need))
        order = np.lexsort((ok, -self._score(free[ok], cpus[ok], g, c)))
        return [int(n) for n in ok[order[:need]]]

    def _place_sliced_pack(self, ok, free, cpus, g, c, cap, need) -> list[int]:
        chosen: list[int] = []
        for n in ok[np.lexsort((ok, -self._score(free[ok], cpus[ok], g, c)))]:
            chosen += [int(n)] * min(int(cap[n]), need - len(chosen))
            if len(chosen) >= need:
                break
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
