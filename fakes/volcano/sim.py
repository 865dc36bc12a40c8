"""Simulated Volcano scheduler: periodic sessions over a snapshot, gang commit-or-discard.

Mechanisms modeled:
- A session every schedule_period_s, measured from the end of the previous one (wait.Until);
  its cost grows with nodes and pending tasks, so a slow session delays the next.
- enqueue: a PodGroup moves Pending -> Inqueue only if its queue's allocated + inqueue minimum
  + this job stays within the queue's capability (proportion).
- allocate: queues in order of share (allocated / deserved, deserved by weight water-filling);
  overused queues are skipped; within a queue jobs by priority then creation. gang: a job is
  committed only if minAvailable tasks fit, otherwise the statement is discarded and the next
  job is tried (no reservation: large gangs can starve behind small ones).
- binpack prefers the most allocated feasible node; nodeorder alone prefers the least.
- Binds go out after the session through the client rate limiter; eviction restarts the whole
  job (policy PodEvicted -> RestartJob).
- backfill only places BestEffort pods, which this workload has none of.
"""
from __future__ import annotations

import numpy as np

from fakes.sim.base import JobState
from fakes.sim.controlplane import TokenBucket
from fakes.sim.kubefamily import KubeFamily
from loadgen.model.target import TargetContext


def water_fill(capacity: float, weights: dict[str, float], requests: dict[str, float]) -> dict[str, float]:
    """proportion plugin: deserved share by weight, capped at each queue's request, surplus reshared."""
    deserved = {q: 0.0 for q in weights}
    remaining = float(capacity)
    active = {q for q in weights if requests.get(q, 0) > 0 and weights[q] > 0}
    while remaining > 1e-9 and active:
        total_w = sum(weights[q] for q in active)
        given = 0.0
        for q in sorted(active):
            add = min(remaining * weights[q] / total_w, requests[q] - deserved[q])
            deserved[q] += add
            given += add
        remaining -= given
        active = {q for q in active if requests[q] - deserved[q] > 1e-9}
        if given <= 1e-9:
            break
    return deserved


class SimVolcano(KubeFamily):
    name = "volcano"
    restart_whole_gang = True

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        c = self.cfg
        self.plugins = set(c["plugins"])
        self.actions = list(c["actions"])
        self.limiter = TokenBucket(c["api_qps"], c["api_burst"])
        self.pending_phase: dict[int, JobState] = {}
        self.inqueue: dict[int, JobState] = {}
        self.queue_alloc: dict[str, int] = {}
        self.session_at: float | None = None
        self.dirty = True          # something changed since the last allocate (else it would repeat)
        self.session_ms: list[float] = []
        self.podgroup_bytes = ctx.control_plane["object_bytes"]["podgroup"]

    def _objects(self, js: JobState) -> list[float]:
        # vcjob + podgroup, then the controller creates the pods.
        return [self.podgroup_bytes, self.podgroup_bytes] + [self.pod_bytes] * js.job.members

    def _tenant(self, js: JobState) -> str:
        return js.job.tenant

    def _weight(self, tenant: str) -> float:
        return float(self.cfg["queues"]["weights"].get(tenant, 1.0))

    def _capability(self, tenant: str) -> float:
        cap = self.cfg["queues"]["capability_gpus"].get(tenant)
        return float("inf") if cap is None else float(cap)

    # --- queueing -----------------------------------------------------------------------
    def _enqueue(self, js: JobState, t: float) -> None:
        self.pending_phase[js.job.id] = js
        self.dirty = True
        self._wake(t)

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        self.inqueue.pop(js.job.id, None)
        self.queue_alloc[self._tenant(js)] = self.queue_alloc.get(self._tenant(js), 0)
        self._enqueue(js, t)

    def _wake(self, t: float) -> None:
        if self.session_at is None:
            period = self.cfg["schedule_period_s"]
            self.session_at = (int(t / period) + 1) * period
            self._at(self.session_at, self._session)

    def _on_release(self, t: float) -> None:
        self.dirty = True
        if self.pending_phase or self.inqueue:
            self._wake(t)

    def _finished(self, js: JobState, t: float) -> None:
        super()._finished(js, t)
        self.queue_alloc[self._tenant(js)] -= js.job.gpus

    def _lose(self, js, nodes, t, reason):
        if js.extra.get("placed", 0):
            self.queue_alloc[self._tenant(js)] -= js.job.gpus
        super()._lose(js, nodes, t, reason)
        js.extra["placed"] = 0

    # --- a session ----------------------------------------------------------------------
    def _session(self, t: float) -> None:
        c = self.cfg
        tasks = sum(js.job.members for js in self.pending_phase.values()) + \
            sum(js.job.members for js in self.inqueue.values())
        cost = (c["session_base_ms"] + c["session_per_node_us"] * self.fleet.nodes / 1000.0
                + c["session_per_task_us"] * tasks / 1000.0) / 1000.0
        self.session_ms.append(cost * 1000)
        self._count("sessions")
        if self.cp.alarm:          # the session cannot update PodGroup status; nothing moves
            self._count("sessions_stalled_nospace")
        elif self.dirty:
            self.dirty = False
            if "enqueue" in self.actions:
                self._enqueue_action()
            else:
                self.inqueue.update(self.pending_phase)
                self.pending_phase.clear()
            if "allocate" in self.actions:
                self._allocate(t + cost)
        self.session_at = None
        if self.pending_phase or self.inqueue:
            self.session_at = t + cost + c["schedule_period_s"]
            self._at(self.session_at, self._session)

    def _enqueue_action(self) -> None:
        inq_min: dict[str, int] = {}
        for js in self.inqueue.values():
            inq_min[self._tenant(js)] = inq_min.get(self._tenant(js), 0) + js.job.gpus
        for jid in sorted(self.pending_phase, key=lambda j: (-self.jobs[j].job.priority, self.jobs[j].job.submit_s)):
            js = self.pending_phase[jid]
            tenant = self._tenant(js)
            if "proportion" in self.plugins:
                used = self.queue_alloc.get(tenant, 0) + inq_min.get(tenant, 0)
                if used + js.job.gpus > self._capability(tenant):
                    self._count("enqueue_rejected_capability")
                    continue
            inq_min[tenant] = inq_min.get(tenant, 0) + js.job.gpus
            self.inqueue[jid] = self.pending_phase.pop(jid)

    def _allocate(self, bind_from: float) -> None:
        by_queue: dict[str, list[JobState]] = {}
        for js in self.inqueue.values():
            by_queue.setdefault(self._tenant(js), []).append(js)
        for jobs in by_queue.values():
            jobs.sort(key=lambda j: (-j.job.priority, j.job.submit_s, j.job.id))
        total = self.fleet.total_gpus
        deserved = {}
        if "proportion" in self.plugins:
            requests = {q: self.queue_alloc.get(q, 0) + sum(j.job.gpus for j in by_queue.get(q, []))
                        for q in set(by_queue) | set(self.queue_alloc)}
            requests = {q: min(r, self._capability(q)) for q, r in requests.items()}
            deserved = water_fill(total, {q: self._weight(q) for q in requests}, requests)

        def share(q: str) -> float:
            alloc = self.queue_alloc.get(q, 0)
            if "proportion" in self.plugins:
                return alloc / max(deserved.get(q, 0.0), 1e-9)
            return alloc / total          # drf: dominant (GPU) share of the tenant

        cursors = {q: 0 for q in by_queue}
        while cursors:
            q = min(cursors, key=lambda k: (share(k), k))
            jobs = by_queue[q]
            js = jobs[cursors[q]]
            cursors[q] += 1
            if cursors[q] >= len(jobs):
                del cursors[q]
            if "proportion" in self.plugins and self.queue_alloc.get(q, 0) >= deserved.get(q, 0) > 0 \
                    and self.queue_alloc.get(q, 0) + js.job.gpus > deserved[q] + 1e-9:
                self._count("allocate_skipped_overused")
                cursors.pop(q, None)      # an overused queue gets nothing more this session
                continue
            self._try_job(js, bind_from)

    def _try_job(self, js: JobState, bind_from: float) -> None:
        g, c, m = js.job.gpus_per_member, js.job.cpus_per_member, js.job.members
        placed = js.extra.get("placed", 0)
        need = m - placed
        gang = "gang" in self.plugins
        if gang and not self.state.fits(need, g):
            self._count("gang_discarded")
            return
        nodes = self._place(g, c, need, allow_partial=not gang)
        if gang and len(nodes) < need:
            self._count("gang_discarded")
            return
        if not nodes:
            return
        for n in nodes:
            self.state.take(js.job.id, n, g, c)
        self.queue_alloc[self._tenant(js)] = self.queue_alloc.get(self._tenant(js), 0) + \
            (js.job.gpus if placed == 0 else 0)
        js.extra["placed"] = placed + len(nodes)
        if js.extra["placed"] >= js.job.min_available:
            self.inqueue.pop(js.job.id, None)
        t = bind_from
        for _ in nodes:
            t = self.limiter.acquire(bind_from) + self.cpcfg["write_ms"] / 1000.0
            self._api_write(t, self.pod_bytes)
        self._count("binds", len(nodes))
        self._at(t, self._bound, js, len(nodes), js.run_token)

    def _bound(self, t: float, js: JobState, n: int, token: int) -> None:
        if js.done or token != js.run_token:
            return
        self._bind(js, t, n)

    def _place(self, g: int, c: int, count: int, allow_partial: bool) -> list[int]:
        s = self.state
        feasible = np.flatnonzero(s.feasible(g, c))
        if len(feasible) == 0:
            return []
        if g >= s.gpn:
            pick = self.rng.choice(feasible, size=min(count, len(feasible)), replace=False)
            return [int(x) for x in pick] if (len(pick) == count or allow_partial) else []
        chosen = []
        free = s.free_gpus.copy()
        cpus = s.free_cpus.copy()
        for _ in range(count):
            ok = np.flatnonzero((free >= g) & (cpus >= c) & s.up)
            if len(ok) == 0:
                break
            if "binpack" in self.plugins:
                best = ok[free[ok] == free[ok].min()]
            else:
                best = ok[free[ok] == free[ok].max()]
            n = int(best[int(self.rng.integers(len(best)))])
            free[n] -= g
            cpus[n] -= c
            chosen.append(n)
        return chosen if (len(chosen) == count or allow_partial) else []

    def snapshot(self, now: float):
        snap = super().snapshot(now)
        snap.control_plane.update(inqueue_jobs=len(self.inqueue), pending_podgroups=len(self.pending_phase))
        return snap

    def control_plane(self) -> dict:
        ms = np.array(self.session_ms) if self.session_ms else np.zeros(1)
        return {**super().control_plane(),
                "session_ms_mean": round(float(ms.mean()), 4),
                "session_ms_max": round(float(ms.max()), 4)}
