"""Simulated Kueue (v0.19.2) in front of kube-scheduler: quota, cohort borrowing and preemption as
Kueue computes them (fakes/kueue/quota.py), topology-aware placement as TAS does
(fakes/kueue/tas.py), then one bind per member.

What happens to a gang, in the order the real one goes (fakes/kueue/target.py):
- The client creates the group's pods (fakes/sim/kubefamily.py: create_ms, client pace); Kueue's
  pod reconciler composes the Workload workload_create_ms after the last one.
- The Workload waits in its ClusterQueue (one per tenant queue, all in one cohort), ordered by
  priority, then creation (or eviction) time (pkg/cache/queue/cluster_queue.go, BestEffortFIFO or
  StrictFIFO). Kueue's scheduler loop (pkg/scheduler/scheduler.go schedule) takes the head of
  every ClusterQueue, orders the heads (scheduler.go classicalIterator: those that fit without
  borrowing first, then priority, then time) and processes them in turn against the quota the
  cycle has used so far: one that fits and has a TAS placement reserves quota and its nodes; one
  that needs preemption evicts its targets and waits for their quota to come back; one that does
  not fit is inadmissible (BestEffortFIFO: the next in its queue becomes head; StrictFIFO: it
  stays head) until quota or nodes come free in the cohort. A cycle costs admission_cycle_ms
  (Kueue's kueue_admission_attempt_duration_seconds); cycles run back to back while heads wait.
- Admitted, the pods are ungated and kube-scheduler binds them on the nodes TAS chose: the first
  ungate_ms after admission, the next pod_bind_ms apart (one kube-scheduler, one pod at a time).
- A lost member (eviction, node failure) is recreated in the same group: the Workload keeps its
  quota and nodes and only the replacement is bound again (its node if still up, else where TAS
  finds room). A preempted Workload loses all its pods and goes back to its queue.
- Quota is released when the gang's pods are gone (release_ms after it finished).
"""
from __future__ import annotations

import heapq

import numpy as np

from fakes.kube.metrics import quantiles
from fakes.kube.sim import POD_MEMORY_GIB, PodState
from fakes.kueue.quota import FIT, NO_FIT, PREEMPT, Admitted, ClusterQueue, Cohort
from fakes.kueue.tas import place
from fakes.kueue.traits import KueueTraits, nominal_gpus, queue_name
from fakes.sim.base import JobState
from fakes.sim.kubefamily import KubeFamily
from loadgen.model.target import TargetContext

PREEMPTED = "preempted"


class SimKueue(KueueTraits, KubeFamily):
    name = "kueue"
    restart_whole_gang = False      # a lost pod is recreated; its Workload stays admitted

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        c = self.cfg
        self.state = PodState(ctx.fleet)
        self.cohort = Cohort()
        self.queued: dict[str, list] = {}            # ClusterQueue -> heap (-priority, since, id)
        self.inadmissible: dict[str, dict[int, JobState]] = {}
        self.strict = (c.get("queues") or {}).get("queueing_strategy") == "StrictFIFO"
        self.topology_mode = c.get("topology", "preferred")
        self.create_wl_s = c["workload_create_ms"] / 1000.0
        self.cycle_s = c["admission_cycle_ms"] / 1000.0
        self.ungate_s = c["ungate_ms"] / 1000.0
        self.pod_s = c["pod_bind_ms"] / 1000.0
        self.busy_until = 0.0
        self.cycle_pending = False
        self.binder_free = 0.0                       # kube-scheduler's next free moment
        self.fleet_gpus = ctx.fleet.nodes * ctx.fleet.gpus_per_node
        self.leaf_of = ctx.fleet.leaf_of
        self.spine_of = ctx.fleet.spine_of
        self.cycles = 0
        self.seen: dict[int, float] = {}             # workload -> entered its queue (this attempt)
        self.admission_s: dict[str, list[float]] = {}
        self.borrowed_max: dict[str, int] = {}
        self.preempted: dict[str, int] = {}
        # jobs whose extra holds "waiting_members" (members lost and not yet placed again): while
        # there are none, a release has no member to place and skips the walk over every job
        self.member_waiters: dict[int, JobState] = {}

    # --- queues ---------------------------------------------------------------------------------
    def _cq(self, js: JobState) -> ClusterQueue:
        name = queue_name(js.job)
        cq = self.cohort.queues.get(name)
        if cq is None:
            q = self.cfg.get("queues") or {}
            limit = q.get("borrowing_limit_gpus")
            cq = self.cohort.add(ClusterQueue(name, nominal_gpus(js.job, self.cfg, self.fleet_gpus),
                                              None if limit is None else int(limit),
                                              q.get("reclaim_within_cohort", "Any"),
                                              q.get("within_cluster_queue", "LowerPriority")))
            self.queued[name], self.inadmissible[name] = [], {}
        return cq

    def _enqueue(self, js: JobState, t: float) -> None:
        """The group's last pod exists: Kueue composes the Workload, then queues it."""
        self._at(t + self.create_wl_s, self._queue, js)

    def _queue(self, t: float, js: JobState) -> None:
        if js.done:
            return
        cq = self._cq(js)
        self.seen[js.job.id] = t
        js.extra["since"] = t
        heapq.heappush(self.queued[cq.name], (-js.job.priority, t, js.job.id))
        self._kick(t)

    def _kick(self, t: float) -> None:
        ready = any(heap and heap[0][2] not in self.inadmissible[name] for name, heap in self.queued.items())
        if not self.cycle_pending and ready:
            self.cycle_pending = True
            self._at(max(t, self.busy_until), self._cycle)

    def _gpus(self, js: JobState) -> int:
        return js.job.members * js.job.gpus_per_member

    # --- the admission cycle --------------------------------------------------------------------
    def _cycle(self, t: float) -> None:
        self.cycle_pending = False
        self.cycles += 1
        end = t + self.cycle_s
        self.busy_until = end
        heads = []
        for name, heap in self.queued.items():
            while heap and (self.jobs[heap[0][2]].done or "admitted" in self.jobs[heap[0][2]].extra):
                heapq.heappop(heap)
            if heap and heap[0][2] not in self.inadmissible[name]:      # StrictFIFO: a blocked head waits
                heads.append(self.jobs[heap[0][2]])
        cqs = {id(js): self.cohort.queues[queue_name(js.job)] for js in heads}

        def borrows(js: JobState) -> bool:
            cq = cqs[id(js)]
            return cq.usage + self._gpus(js) > cq.nominal

        heads.sort(key=lambda js: (borrows(js), -js.job.priority, js.extra["since"], js.job.id))
        for js in heads:
            cq = cqs[id(js)]
            mode = self.cohort.mode(cq, self._gpus(js))
            if mode == FIT:
                nodes = self._placement(js)
                if nodes is not None:
                    heapq.heappop(self.queued[cq.name])
                    self._admit(js, cq, nodes, end)
                    continue
                mode = NO_FIT                        # quota, but no room on the nodes
            if mode == PREEMPT:
                targets = self.cohort.preemption_targets(cq, self._gpus(js), js.job.priority, js.extra["since"])
                if targets:
                    for a in targets:
                        self._preempt(self.jobs[a.wid], end)
                    continue                          # it stays head; retried when their quota is back
            self._inadmissible(js, cq)
        self._kick(end)

    def _placement(self, js: JobState) -> list[int] | None:
        g, c = js.job.gpus_per_member, js.job.cpus_per_member
        s = self.state
        fit = s.member_capacity(js.job) if s.sliced(js.job) else s.free_gpus // g
        per_node = np.where(s.up, np.minimum(fit, np.minimum(s.free_cpus // max(c, 1),
                                                             s.free_mem // POD_MEMORY_GIB)), 0)
        mode = self.topology_mode if js.job.members > 1 else "none"
        return place(per_node.astype(np.int64), self.leaf_of, self.spine_of, js.job.members, mode)

    def _inadmissible(self, js: JobState, cq: ClusterQueue) -> None:
        """BestEffortFIFO: out of the queue until the cohort frees something; StrictFIFO: it stays
        head, and the queue waits with it."""
        self._count("inadmissible")
        if self.strict:
            self.inadmissible[cq.name][js.job.id] = js
            return
        heap = self.queued[cq.name]
        heapq.heappop(heap)
        self.inadmissible[cq.name][js.job.id] = js

    def _admit(self, js: JobState, cq: ClusterQueue, nodes: list[int], t: float) -> None:
        self.cohort.admit(cq, Admitted(js.job.id, cq.name, self._gpus(js), js.job.priority, t))
        self.borrowed_max[cq.name] = max(self.borrowed_max.get(cq.name, 0), cq.borrowed)
        self.admission_s.setdefault(cq.name, []).append(t - self.seen.get(js.job.id, t))
        js.extra["admitted"] = True
        g, c = js.job.gpus_per_member, js.job.cpus_per_member
        for node in nodes:
            self.state.take(js.job.id, node, g, c, js.job.gpu_share)
        self._count("admitted_workloads")
        start = max(t + self.ungate_s, self.binder_free)
        for i in range(len(nodes)):
            self._at(start + i * self.pod_s, self._bound, js, js.run_token)
        self.binder_free = start + len(nodes) * self.pod_s

    def _bound(self, t: float, js: JobState, token: int) -> None:
        if js.done or token != js.run_token:
            return
        self._count("binds")
        self._bind(js, t, 1)

    def _preempt(self, js: JobState, t: float) -> None:
        self._count("preemptions")
        q = queue_name(js.job)
        self.preempted[q] = self.preempted.get(q, 0) + 1
        self._at(t, self._evicted, js, js.run_token)

    def _evicted(self, t: float, js: JobState, token: int) -> None:
        if js.done or token != js.run_token:
            return
        js.extra["preempted"] = True
        self._lose(js, {n for n, _, _ in self.state.holdings.get(js.job.id, ())}, t, PREEMPTED)
        self._on_release(t)

    def _restarts_whole(self, reason: str) -> bool:
        return reason == PREEMPTED

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        if not members:
            return
        if js.extra.pop("preempted", False):
            # quota released, the Workload goes back to its queue (ordered by its eviction time)
            self.cohort.remove(js.job.id, queue_name(js.job))
            js.extra.pop("admitted", None)
            self._queue(t, js)
            return
        # a lost member: its replacement is ungated at once, kube-scheduler binds it
        for _ in members:
            nodes = self._placement_one(js)
            if nodes is None:
                js.extra["waiting_members"] = js.extra.get("waiting_members", 0) + 1
                self.member_waiters[js.job.id] = js
                continue
            self.state.take(js.job.id, nodes, js.job.gpus_per_member, js.job.cpus_per_member, js.job.gpu_share)
            start = max(t + self.ungate_s, self.binder_free)
            self.binder_free = start + self.pod_s
            self._at(start, self._bound, js, js.run_token)

    def _placement_one(self, js: JobState) -> int | None:
        c = js.job.cpus_per_member
        s = self.state
        ok = np.flatnonzero(s.up & s.member_nodes(js.job) & (s.free_cpus >= c) & (s.free_mem >= POD_MEMORY_GIB))
        return int(ok[0]) if len(ok) else None

    def _finished(self, js: JobState, t: float) -> None:
        super()._finished(js, t)
        self.cohort.remove(js.job.id, queue_name(js.job))

    def _on_release(self, t: float) -> None:
        """Quota or nodes came free: every inadmissible Workload of the cohort is queued again
        (qcache.Manager.QueueInadmissibleWorkloads), and members waiting for a node get one."""
        for name, waiting in self.inadmissible.items():
            for jid, js in list(waiting.items()):
                del waiting[jid]
                if js.done:
                    continue
                if not self.strict:
                    heapq.heappush(self.queued[name], (-js.job.priority, js.extra["since"], jid))
        if self.member_waiters:
            for js in list(self.active.values()) + list(self.waiting.values()):
                n = js.extra.pop("waiting_members", 0)
                if n:
                    self._requeue(js, t, list(range(n)))
            # those a walk cannot reach (done: in neither dict) never get their members back
            self.member_waiters = {jid: js for jid, js in self.member_waiters.items()
                                   if "waiting_members" in js.extra and not js.done}
        self._kick(t)

    # --- observation ------------------------------------------------------------------------------
    def kueue_figures(self) -> dict:
        out = {}
        for name, cq in sorted(self.cohort.queues.items()):
            adm = self.admission_s.get(name, [])
            out[name] = {"workloads_admitted": len(adm), "admission_s": quantiles(np.array(adm)),
                         "evictions": self.preempted.get(name, 0), "nominal_gpus": float(cq.nominal),
                         "borrowed_gpus_max": float(self.borrowed_max.get(name, 0))}
        return {"queues": out, "admission_cycles": self.cycles}

    def control_plane(self) -> dict:
        figures = self.kueue_figures()
        return {**super().control_plane(), "queues": figures.pop("queues"), "kueue": figures,
                # kube-scheduler places the admitted pods one at a time, pod_bind_ms each (_admit's
                # binder_free): the ceiling search needs that serial resource's load too
                "busy_s": {**self.cp.busy_s(), "kueue-admission-cycle": round(self.cycles * self.cycle_s, 6),
                           "scheduling-cycle": round(self.counters.get("binds", 0) * self.pod_s, 6)}}
