"""Simulated slurmctld: priority/multifactor, main scheduler + backfill, cons_tres, topology/tree.

Mechanisms modeled:
- Priority = age + fair share + job size (PriorityWeight*; fair share 2^(-usage/shares) with
  usage decayed by PriorityDecayHalfLife; bigger jobs rank higher, PriorityFavorSmall=NO).
- The main scheduler runs on job submit/end (coalesced by sched_min_interval_s) and every
  sched_interval_s; it walks jobs by priority up to default_queue_depth and stops at the first
  that cannot start (one partition), so it never lets a lower job jump a higher one.
- Backfill every bf_interval_s walks up to bf_max_job_test jobs: a job starts now if it fits on
  nodes not reserved for a higher job, or it ends (by its time limit) before that reservation
  starts; a whole-node job that cannot start gets a reservation at its earliest start within
  bf_window_min (times rounded up to bf_resolution_s). This is what keeps big gangs from starving.
- cons_tres: 8-GPU members take whole nodes (--exclusive); smaller jobs share nodes, best fit.
- --requeue: an evicted job restarts whole, after the cred_expire_s hold slurmctld applies.
- topology/tree: a gang goes on the fewest leaf switches (best-fit leaf); with switches=N a
  large gang waits up to switches_max_wait_s for N leaves before taking any.
"""
from __future__ import annotations

import math

import numpy as np

from fakes.sim.base import JobState, SimTarget
from loadgen.model.target import TargetContext


class SimSlurm(SimTarget):
    name = "slurm"
    restart_whole_gang = True        # --requeue: the whole job goes back to the queue

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.pending: dict[int, JobState] = {}
        self.node_end = np.zeros(self.fleet.nodes)          # when a node's jobs end by time limit
        self.node_jobs: dict[int, dict[int, float]] = {}    # job -> {node: end}
        self.on_node: dict[int, dict[int, float]] = {}      # node -> {job: end}
        self.usage: dict[str, float] = {}
        self.usage_t = 0.0
        self.main_at: float | None = None
        self.last_main = -math.inf
        self.bf_at: float | None = None
        self.main_cycles: list[float] = []
        self.bf_cycles: list[float] = []
        self.leaves_used: list[int] = []
        self.rpcs = {"REQUEST_SUBMIT_BATCH_JOB": 0, "REQUEST_COMPLETE_BATCH_SCRIPT": 0}
        self.started_by = {"main": 0, "backfill": 0}

    def _limit(self, js: JobState) -> float:
        return math.ceil(js.job.duration_s * self.cfg["time_limit_factor"] / 60.0) * 60.0

    # --- triggers -------------------------------------------------------------------------
    def _enqueue(self, js: JobState, t: float) -> None:
        self.rpcs["REQUEST_SUBMIT_BATCH_JOB"] += 1
        js.extra["queued_at"] = t
        self.pending[js.job.id] = js
        self._trigger_main(t)
        self._ensure_backfill(t)

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        # A requeued batch job is held until its launch credential expires (cred_expire).
        self._drop_node_ends(js.job.id)
        self._at(t + self.cfg["cred_expire_s"], self._release_hold, js)

    def _release_hold(self, t: float, js: JobState) -> None:
        if js.done or js.running:
            return
        js.extra["queued_at"] = t
        self.pending[js.job.id] = js
        self._trigger_main(t)
        self._ensure_backfill(t)

    def _on_release(self, t: float) -> None:
        if self.pending:
            self._trigger_main(t)

    def _finished(self, js: JobState, t: float) -> None:
        self.rpcs["REQUEST_COMPLETE_BATCH_SCRIPT"] += 1
        self._decay(t)
        runtime = t - js.extra.get("started_at", t)
        self.usage[js.job.tenant] = self.usage.get(js.job.tenant, 0.0) + runtime * js.job.gpus
        self._drop_node_ends(js.job.id)

    def _drop_node_ends(self, jid: int) -> None:
        for n in self.node_jobs.pop(jid, {}):
            others = self.on_node.get(n, {})
            others.pop(jid, None)
            self.node_end[n] = max(others.values(), default=0.0)

    def _trigger_main(self, t: float) -> None:
        if self.main_at is None:
            self.main_at = max(t, self.last_main + self.cfg["sched_min_interval_s"])
            self._at(self.main_at, self._main)

    def _ensure_backfill(self, t: float) -> None:
        if self.bf_at is None:
            iv = self.cfg["bf_interval_s"]
            self.bf_at = (int(t / iv) + 1) * iv
            self._at(self.bf_at, self._backfill)

    # --- priority -------------------------------------------------------------------------
    def _decay(self, t: float) -> None:
        hl = self.cfg["priority_decay_half_life_h"] * 3600.0
        f = 0.5 ** ((t - self.usage_t) / hl)
        for k in self.usage:
            self.usage[k] *= f
        self.usage_t = t

    def _priorities(self, t: float) -> list[JobState]:
        c = self.cfg
        self._decay(t)
        tenants = {js.job.tenant for js in self.pending.values()} | set(self.usage)
        total_usage = sum(self.usage.values()) or 1.0
        share = 1.0 / max(len(tenants), 1)
        fs = {k: 2.0 ** (-(self.usage.get(k, 0.0) / total_usage) / share) for k in tenants}
        max_age = c["priority_max_age_h"] * 3600.0
        total = self.fleet.total_gpus

        def prio(js: JobState) -> float:
            age = min((t - js.job.submit_s) / max_age, 1.0)
            return (c["priority_weight_age"] * age + c["priority_weight_fairshare"] * fs[js.job.tenant]
                    + c["priority_weight_jobsize"] * js.job.gpus / total + 1e6 * js.job.priority)

        return sorted(self.pending.values(), key=lambda js: (-prio(js), js.job.submit_s, js.job.id))

    # --- placement (cons_tres + topology/tree) ---------------------------------------------
    def _place(self, js: JobState, t: float, blocked: np.ndarray | None) -> list[int] | None:
        s = self.state
        g, c, m = js.job.gpus_per_member, js.job.cpus_per_member, js.job.members
        if not s.fits(m, g):
            return None
        if g >= s.gpn:
            mask = (s.free_gpus == s.gpn) & s.up
            if blocked is not None:
                mask &= ~blocked
            free_nodes = np.flatnonzero(mask)
            if len(free_nodes) < m:
                return None
            leaves = s.leaf_of[free_nodes]
            counts = np.bincount(leaves, minlength=self.fleet.leaves)
            fit = np.flatnonzero(counts >= m)
            if len(fit):
                leaf = int(fit[np.argmin(counts[fit])])     # best-fit leaf keeps big free leaves whole
                return [int(n) for n in free_nodes[leaves == leaf][:m]]
            order = np.argsort(-counts, kind="stable")
            need, picked, used = m, [], 0
            for leaf in order:
                if need <= 0 or counts[leaf] == 0:
                    break
                take = free_nodes[leaves == leaf][:need]
                picked.extend(int(n) for n in take)
                need -= len(take)
                used += 1
            want = self.cfg["switches"]
            if want and js.job.cls == "large" and used > want:
                if t - js.extra.get("queued_at", t) < self.cfg["switches_max_wait_s"]:
                    self._count("switches_waits")
                    return None
            return picked
        chosen = []
        free = s.free_gpus.copy()
        cpus = s.free_cpus.copy()
        for _ in range(m):
            mask = (free >= g) & (cpus >= c) & s.up
            if blocked is not None:
                mask &= ~blocked
            ok = np.flatnonzero(mask)
            if len(ok) == 0:
                return None
            n = int(ok[np.argmin(free[ok])])
            free[n] -= g
            cpus[n] -= c
            chosen.append(n)
        return chosen

    def _launch(self, js: JobState, nodes: list[int], t: float, by: str) -> None:
        del self.pending[js.job.id]
        end = t + self._limit(js)
        ends = self.node_jobs.setdefault(js.job.id, {})
        for n in nodes:
            self.state.take(js.job.id, n, js.job.gpus_per_member, js.job.cpus_per_member)
            ends[n] = end
            self.on_node.setdefault(n, {})[js.job.id] = end
            self.node_end[n] = max(self.node_end[n], end)
        js.extra["started_at"] = t
        self.leaves_used.append(len(set(int(self.state.leaf_of[n]) for n in nodes)))
        self.started_by[by] += 1
        self._bind(js, t, len(nodes))

    # --- the main scheduler -----------------------------------------------------------------
    def _main(self, t: float) -> None:
        self.main_at = None
        self.last_main = t
        tested = 0
        for js in self._priorities(t)[: self.cfg["default_queue_depth"]]:
            tested += 1
            nodes = self._place(js, t, None)
            if nodes is None:
                break          # the partition is blocked for everyone below this job
            self._launch(js, nodes, t, "main")
        self.main_cycles.append(0.05 + 0.02 * tested)   # ms, modeled cycle cost
        if self.pending:
            self._at(t + self.cfg["sched_interval_s"], self._periodic_main)

    def _periodic_main(self, t: float) -> None:
        if self.pending and self.main_at is None:
            self._trigger_main(t)

    # --- backfill ---------------------------------------------------------------------------
    def _backfill(self, t: float) -> None:
        self.bf_at = None
        if not self.pending:
            return
        c = self.cfg
        res = float(c["bf_resolution_s"])
        window_end = t + c["bf_window_min"] * 60.0
        reserved_from = np.full(self.fleet.nodes, np.inf)
        tested = 0
        for js in self._priorities(t)[: c["bf_max_job_test"]]:
            tested += 1
            limit = self._limit(js)
            blocked = reserved_from < t + limit          # would run into a higher job's reservation
            nodes = self._place(js, t, blocked)
            if nodes is not None:
                self._launch(js, nodes, t, "backfill")
                continue
            if js.job.gpus_per_member < self.state.gpn:
                continue
            up = self.state.up
            free_at = np.where(self.state.free_gpus == self.state.gpn, t, self.node_end)
            free_at = np.where(up & np.isinf(reserved_from), free_at, np.inf)
            m = js.job.members
            if np.isfinite(free_at).sum() < m:
                continue
            idx = np.argpartition(free_at, m - 1)[:m]
            start = math.ceil(float(free_at[idx].max()) / res) * res
            if start <= window_end:
                reserved_from[idx] = start
                self._count("bf_reservations")
        self.bf_cycles.append(0.1 + 0.05 * tested)      # ms, modeled cycle cost
        if self.pending:
            self._ensure_backfill(t + 1e-9)

    def snapshot(self, now: float):
        snap = super().snapshot(now)
        snap.control_plane.update(pending_jobs=len(self.pending))
        return snap

    def control_plane(self) -> dict:
        mc = np.array(self.main_cycles) if self.main_cycles else np.zeros(1)
        bc = np.array(self.bf_cycles) if self.bf_cycles else np.zeros(1)
        lu = np.array(self.leaves_used) if self.leaves_used else np.zeros(1)
        return {**super().control_plane(), "rpc_counts": dict(self.rpcs),
                "main_cycles": len(self.main_cycles), "main_cycle_ms_mean_modeled": round(float(mc.mean()), 4),
                "bf_cycles": len(self.bf_cycles), "bf_cycle_ms_mean_modeled": round(float(bc.mean()), 4),
                "jobs_started_by": dict(self.started_by),
                "leaves_per_job_mean": round(float(lu.mean()), 4)}
