"""Simulated Volcano: vc-controller-manager's job controller and vc-scheduler's sessions (v1.14).

The path of a gang:
1. The client creates the vcjob; the create returns control_plane.create_ms later.
2. The job controller initializes the job's status, then creates the PodGroup (phase Pending),
   through its own client (controller_qps/controller_burst token bucket; a create returns create_ms
   after it goes out, an update write_ms). It syncs a job on one of its `controller_workers`
   workers (--worker-threads, 3 by default in v1.14.1: cmd/controller-manager/app/options; the job's
   worker is its key's hash modulo the workers, here its id), and a sync makes its calls one after
   another and holds its worker until the last returns (pkg/controllers/job: initiateJob, syncJob),
   so a burst of jobs queues at the workers once the calls' latency, not the client's rate, bounds
   them. On a machine the control plane shares (control_plane.cores, fakes/sim/cores.py), each
   vcjob the client creates asks the stack for pod_cpu_ms of CPU, and a controller call that goes
   out while the others ask for more than cores - REQUEST_CORES takes as much longer as its share
   is short: a 2,000-job burst at 176 creates/s leaves it half a core (real: vc-controller-manager
   used 0.10 cores while the vcjobs were created, the apiserver, etcd and the client 1.69). Once a
   job's pods are bound, their new status brings it back to its worker for one more status update
   (in a 20-job run here the controller wrote 2.65 job statuses per job).
3. A session's enqueue moves the PodGroup to Inqueue if its queue has room (proportion:
   allocated + inqueue + the job's minimum - elastic <= min(capability, cluster)); the status is
   written when the session closes.
4. Only then does the job controller create the pods (pkg/controllers/job/job_controller_actions.go
   syncJob creates pods once the PodGroup has left Pending), all at once, each through its rate
   limiter, waits for them, and updates the job's status: one sync on the job's worker.
5. A LATER session's allocate places them once minAvailable of them fit (gang: JobValid needs
   minAvailable pods, JobReady minAvailable allocated; an elastic job's other tasks follow in later
   sessions) and binds them through the scheduler's client (api_qps/api_burst); a bind lands
   write_ms after it goes out.
Sessions run wait.Until(schedule_period_s) from the end of the previous one. A session opens for
session_base_ms + session_per_node_us x nodes + session_per_task_us x pending tasks +
session_per_running_task_us x tasks placed and running (the snapshot clones them, proportion and drf
count them; also in a session with nothing to place), the plugins' session open and close; then
allocate's predicate walk (util/predicate_helper.go PredicateNodes, from a rotating start, 16
goroutines) costs per task it tries: a task it places examines nodes until numNodesToFind feasible
ones (50 - nodes/125 percent, at least 5% and 100 nodes, as kube-scheduler) and scores those,
feasible_per_node_us each, reject_per_node_us for each node it passes over; a task that fits nowhere
examines every node, reject_per_node_us each, every session, and a gang stops at its first such
task. A job commits, and its binds go out, when its walk ends; a session in which nothing changed
walks its failing tasks again. Its close then writes every changed PodGroup status (its phase:
Inqueue, Running; and status.running once a job's bound pods run, jobStatus counting them: three
writes a job, 1,088 in the twin of a 500-node steady run against the apiserver's 1,092 PUT
podgroups) with STATUS_WORKERS workers, podgroup_update_ms each (a PUT of the whole custom resource; unset:
write_ms).
Actions run in the configured order. allocate: queues by share (proportion: allocated /
deserved, deserved by weight water-filling over what each queue requests: allocated + pods
created); an overused queue gets nothing more this session; a task is allocatable while its queue
stays within deserved. Job order is the plugins' JobOrderFns tier by tier: gang puts jobs that
are not ready first, priority higher priority first, drf the smaller dominant share of the job
first (drf orders queues only with hierarchy on), then creation time. binpack prefers the most
allocated feasible node, nodeorder alone the least.
preempt and reclaim (off by default) let a starving job evict running tasks, node by node; the
victims are what the plugins' victim functions agree on, tier by tier as Volcano does (a tier
decides only if every plugin in it names some victims): gang spares jobs that would fall below
minAvailable, priority offers lower-priority jobs, drf jobs whose share stays at least the
preemptor's, proportion (reclaim) jobs of queues above their deserved share. preempt works within
a queue, reclaim across queues for a queue below its deserved share. The evictions go through
only if the preemptor would then be pipelined; one evicted task restarts the whole victim job
(PodEvicted -> RestartJob): the controller deletes its pods, its PodGroup is Pending again at the
next session's close and the job goes round again.
backfill only places BestEffort pods, which this workload has none of.
vGPU books (fraction pools, `vgpu_books`): "fixed" books what is held, as Volcano does once its
AddPod no longer counts a pod twice (upstream after v1.14.1); "v1.14.1" books as v1.14.1 does
(docs/gpu-sharing.md, "## Volcano"): deviceshare's Allocate books each GPU it hands out on the
node's books (TryAddPod) and the bound pod coming back through the informer books it again (AddPod);
the pod's end gives back only the second, the first stays until a Node event rebuilds the books,
which on a vGPU node is the device plugin's next report (every `vgpu_report_s`, all nodes at once).
So a GPU counts a share placed since the last report twice while it runs and once after it ends.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from fakes.kube.sim import num_feasible_nodes_to_find
from fakes.sim.base import JobState
from fakes.sim.controlplane import TokenBucket
from fakes.sim.cores import SharedCores
from fakes.sim.kubefamily import KubeFamily
from fakes.volcano.traits import VolcanoTraits
from loadgen.model.gpushare import MILLI
from loadgen.model.target import TargetContext

FIRST_TIER = ("priority", "gang", "conformance")   # as the real backend's scheduler_conf tiers them
STATUS_WORKERS = 16        # volcano pkg/scheduler/framework/job_updater.go jobUpdaterWorker
CONTROLLER_WORKERS = 3     # vc-controller-manager --worker-threads default (v1.14.1 cmd/controller-manager/app/options)
# a call's CPU runs on one goroutine at a time (the controller's, then the apiserver's handler): alone,
# at most one core; with 0.93 (kube.cycle_cores, fitted) the 2k-jobs anchors give 0.834 / 0.810, not 0.834 / 0.821
REQUEST_CORES = 1.0
SHARE_DELTA = 1e-6         # volcano pkg/scheduler/plugins/drf/drf.go shareDelta


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


def _share(alloc: float, deserved: float) -> float:
    """volcano helpers.Share."""
    if deserved == 0:
        return 0.0 if alloc == 0 else 1.0
    return alloc / deserved


class SimVolcano(VolcanoTraits, KubeFamily):
    name = "volcano"
    restart_whole_gang = True

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        c = self.cfg
        self.plugins = list(c["plugins"])
        self.tiers = [[p for p in self.plugins if p in FIRST_TIER], [p for p in self.plugins if p not in FIRST_TIER]]
        self.proportion = "proportion" in self.plugins
        self.gang = "gang" in self.plugins
        self.actions = list(c["actions"])
        self.period = c["schedule_period_s"]
        self.limiter = TokenBucket(c["api_qps"], c["api_burst"])                  # vc-scheduler's client
        self.ctrl = TokenBucket(c["controller_qps"], c["controller_burst"])       # vc-controller-manager's
        n_workers = c.get("controller_workers") or CONTROLLER_WORKERS
        self.workers: list[deque] = [deque() for _ in range(n_workers)]   # the job controller's: syncs queued
        self.worker_free = [0.0] * n_workers                               # when each last went idle
        self.shared = SharedCores.from_config(ctx.control_plane)
        self.podgroup_bytes = ctx.control_plane["object_bytes"]["podgroup"]
        self.pending_pg: dict[int, JobState] = {}    # PodGroup Pending, seen by the next session
        self.inqueue: dict[int, JobState] = {}       # PodGroup Inqueue or Running, tasks left to place
        self.to_pending: dict[int, JobState] = {}    # restarted: PodGroup Pending at the next close
        self.q_alloc: dict[str, int] = {}            # per queue, GPUs: allocated
        self.q_inqueue: dict[str, int] = {}          # ... minimum of Inqueue jobs not yet allocated
        self.q_elastic: dict[str, int] = {}          # ... allocated beyond jobs' minimum
        self.q_pending: dict[str, int] = {}          # ... of created pods not yet allocated
        self.pending_tasks = 0
        self.running_tasks = 0                       # placed tasks of live jobs: in every session's snapshot
        self.counts_due: dict[int, JobState] = {}    # PodGroup task counts changed since the last close
        self.blocked: list[tuple] = []               # controller writes etcd refused: redone at recovery
        self.next_session = 0.0                      # start of the session loop's next session
        self.session_timer = False
        self.idle_cost_s = (c["session_base_ms"] + c["session_per_node_us"] * self.fleet.nodes / 1000.0) / 1000.0
        self.dirty = True          # something changed since the last session's actions ran
        self.no_fit: set = set()   # slice shapes that found no room at state version no_fit_at
        self.no_fit_at = -1
        self.deserved: dict[str, float] = {}
        self.total = self._total()                   # GPUs of the nodes up, as the session saw them
        self.session_ms: list[float] = []
        self.session_log: list[tuple[float, float, float]] = []   # (start s, length ms, walk ms) per session
        self.to_find = num_feasible_nodes_to_find(self.fleet.nodes, None)   # util.CalculateNumOfFeasibleNodesToFind
        self.pg_update_s = (c["podgroup_update_ms"] or ctx.control_plane["write_ms"]) / 1000.0
        self.reject_s = c["reject_per_node_us"] / 1e6
        self.feasible_s = c["feasible_per_node_us"] / 1e6
        self.ssn_t = 0.0             # the session's own clock: open, then each walk
        self.fail_walk_s = 0.0       # the walks of the tasks that found no node in the last session that ran
        self.stale_books = c["vgpu_books"] == "v1.14.1" and self.state.slices is not None
        self.report_s = c["vgpu_report_s"]
        self.rebuild_due = False
        self.vgpu_node = np.array([self.fleet.sharing_of(i).mode == "fraction" for i in range(self.fleet.nodes)]) \
            if self.stale_books else None

    def _objects(self, js: JobState) -> list[float]:
        return [self.podgroup_bytes]                 # the client creates the vcjob only

    def _owned(self, js: JobState) -> list[float]:
        return [self.podgroup_bytes, self.podgroup_bytes] + [self.pod_bytes] * js.job.members

    # --- queues -------------------------------------------------------------------------------
    def _queue(self, js: JobState) -> str:
        return js.job.tenant

    def _weight(self, queue: str) -> float:
        return float(self.cfg["queues"]["weights"].get(queue, 1.0))

    def _capability(self, queue: str) -> float:
        cap = self.cfg["queues"]["capability_gpus"].get(queue)
        return float("inf") if cap is None else float(cap)

    def _total(self) -> int:
        return int(self.state.up.sum()) * self.fleet.gpus_per_node

    def _g(self, js: JobState) -> float:
        """GPUs one task counts for in the queues' books: a slice at its compute share (a fleet with
        node pools), else its whole GPUs."""
        s = self.state
        return s.slices.size_of(js.job.gpu_share) if s.sliced(js.job) else js.job.gpus_per_member

    def _sync(self, js: JobState) -> None:
        """Recompute what js contributes to its queue's books from its state."""
        e, g, m = js.extra, self._g(js), js.job.min_available
        live = not js.done and e["phase"] in ("inqueue", "running")
        new = (e["placed"] * g if live else 0,
               max(0, m - e["placed"]) * g if live else 0,
               max(0, e["placed"] - m) * g if live else 0,
               (e["pods"] - e["placed"]) * g if live else 0,
               e["pods"] - e["placed"] if live else 0,
               e["placed"] if live else 0)
        old = e.get("books", (0, 0, 0, 0, 0, 0))
        if new == old:
            return
        q = self._queue(js)
        for books, i in ((self.q_alloc, 0), (self.q_inqueue, 1), (self.q_elastic, 2), (self.q_pending, 3)):
            books[q] = books.get(q, 0) + new[i] - old[i]
        self.pending_tasks += new[4] - old[4]
        self.running_tasks += new[5] - old[5]
        e["books"] = new

    # --- the job controller -------------------------------------------------------------------
    def _enqueue(self, js: JobState, t: float) -> None:
        """The vcjob exists: a sync initializes its status, then creates its PodGroup."""
        js.extra.update(gen=0, pods=0, asked=0, placed=0, phase="new", unschedulable=False)
        self.shared.placed(t)
        self._worker_sync(t, js, [(self.podgroup_bytes, 0.0, None, 1),
                                  (self.podgroup_bytes, None, self._podgroup_created, 1)])

    def _worker_sync(self, t: float, js: JobState, steps: list[tuple]) -> None:
        """One sync of js on its worker, after the syncs queued there before it: each step's writes
        (nbytes, live, then, n) go out together once the step before has returned."""
        w = js.job.id % len(self.workers)
        self.workers[w].append((js, steps))
        if len(self.workers[w]) == 1:
            self._step(t, w, 0)

    def _step(self, t: float, w: int, i: int) -> None:
        """Step i of the sync at the head of worker w's queue goes out at t (steps run as events, so
        the controller's rate limiter is always asked in time order); after the last, the next sync."""
        queue = self.workers[w]
        js, steps = queue[0]
        if i < len(steps):
            self._at(self._controller(t, js, *steps[i]), self._step, w, i + 1)
            return
        queue.popleft()
        self.worker_free[w] = t
        if queue:
            self._step(t, w, 0)

    def _controller(self, t: float, js: JobState, nbytes: float, live: float | None, then, n: int = 1) -> float:
        """n writes by the job controller (issued concurrently, as it creates a job's pods): each
        waits for its rate limiter; a create returns create_ms (its mean) after it goes out, an
        update write_ms, both `slow` times longer when the machine's cores are short at t. Returns
        when the last one has returned."""
        latency = self.create_latency if live is None else self.write_latency
        slow = self.shared.stretch(t, REQUEST_CORES)
        if n == 1:
            out = self.ctrl.acquire(t)
            self._at(out, self._controller_write, js, js.extra["gen"], nbytes, live, then, 1, slow)
            return out + latency.draw() * slow
        times = [self.ctrl.acquire(t) for _ in range(n)]
        for at in sorted(set(times)):
            self._at(at, self._controller_write, js, js.extra["gen"], nbytes, live, then, times.count(at), slow)
        return self.returned(times, latency, slow)

    def _controller_write(self, t: float, js: JobState, gen: int, nbytes: float, live, then, n: int,
                          slow: float = 1.0) -> None:
        if js.done or gen != js.extra["gen"]:
            return
        ok = 0
        while ok < n and self._api_write(t, nbytes, live):
            ok += 1
        self._count("controller_writes", ok)
        if ok < n:
            self._count("controller_writes_refused", n - ok)
            self.blocked.append((js, gen, nbytes, live, then, n - ok))
        if then is not None and ok:
            self._at(t + self.create_latency.slowest(ok) * slow, then, js, gen, ok)

    def _podgroup_created(self, t: float, js: JobState, gen: int, n: int) -> None:
        if js.done or gen != js.extra["gen"]:
            return
        js.extra["phase"] = "pending"
        self.pending_pg[js.job.id] = js
        self._changed(t)

    def _inqueue_seen(self, t: float, js: JobState, gen: int) -> None:
        """The controller sees the PodGroup Inqueue: a sync creates the job's pods and updates its status."""
        e = js.extra
        if js.done or gen != e["gen"]:
            return
        self._worker_sync(t, js, [(self.pod_bytes, None, self._pod_created, js.job.members - e["asked"]),
                                  (self.podgroup_bytes, 0.0, None, 1)])      # then the job's status
        e["asked"] = js.job.members

    def _pod_created(self, t: float, js: JobState, gen: int, n: int) -> None:
        if js.done or gen != js.extra["gen"]:
            return
        js.extra["pods"] += n
        self._sync(js)
        self._changed(t)

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        """Whole-job restart (base._lose released its nodes): the controller deletes the pods."""
        e = js.extra
        self.inqueue.pop(js.job.id, None)
        self.pending_pg.pop(js.job.id, None)
        times = [self.ctrl.acquire(t) for _ in range(e["pods"])]
        for at in sorted(set(times)):
            self._at(at, self._pods_deleted, times.count(at))
        e.update(gen=e["gen"] + 1, pods=0, asked=0, placed=0, phase="restarting", unschedulable=False)
        self._sync(js)
        self.to_pending[js.job.id] = js
        self._changed(t)

    def _pods_deleted(self, t: float, n: int) -> None:
        for _ in range(n):
            self.cp.delete(t, self.pod_bytes)

    def _finished(self, js: JobState, t: float) -> None:
        super()._finished(js, t)
        js.extra["phase"] = "done"
        self.inqueue.pop(js.job.id, None)
        self._sync(js)

    def _recovered(self, t: float) -> None:
        super()._recovered(t)
        blocked, self.blocked = self.blocked, []
        for js, gen, nbytes, live, then, n in blocked:
            if not js.done and gen == js.extra["gen"]:
                self._controller(t, js, nbytes, live, then, n)

    # --- the session loop ---------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self.pending_pg or self.inqueue or self.to_pending)

    def _changed(self, t: float) -> None:
        self.dirty = True
        self._wake(t)

    def _on_release(self, t: float) -> None:
        self._changed(t)

    def _wake(self, t: float) -> None:
        """Make sure a session is coming; idle sessions in between are not simulated one by one."""
        if self.session_timer or not self._has_work():
            return
        if self.next_session < t:
            step = self.period + self.idle_cost_s + self.cfg["session_per_running_task_us"] * self.running_tasks / 1e6
            idle = math.ceil((t - self.next_session) / step)
            self.next_session += idle * step
            self._count("sessions_idle", idle)
        self.session_timer = True
        self._at(self.next_session, self._session)

    def _session(self, t: float) -> None:
        c = self.cfg
        self.ssn_t = t + (c["session_base_ms"] + c["session_per_node_us"] * self.fleet.nodes / 1000.0
                          + (c["session_per_task_us"] * self.pending_tasks
                             + c["session_per_running_task_us"] * self.running_tasks) / 1000.0) / 1000.0
        opened = self.ssn_t
        self._count("sessions")
        updates: list[tuple[JobState, str]] = []
        if self.cp.alarm:          # no PodGroup status or bind can be written; nothing moves
            self._count("sessions_stalled_nospace")
        elif self.dirty:
            self.dirty = False
            self.fail_walk_s = 0.0
            self.total = self._total()
            self._open()
            for action in self.actions:
                updates += getattr(self, f"_action_{action}")(t, self.ssn_t)
            for jid in sorted(self.to_pending):
                updates.append((self.to_pending.pop(jid), "pending"))
        else:
            self.ssn_t += self.fail_walk_s     # nothing changed: the same tasks fail the same walks
        if not self.cp.alarm:
            updates += [(js, "counts") for _, js in sorted(self.counts_due.items()) if not js.done]
            self.counts_due.clear()
        walked = self.ssn_t - opened
        end = self.ssn_t + self._close(self.ssn_t, updates)
        self.session_ms.append((end - t) * 1000.0)
        self.session_log.append((t, (end - t) * 1000.0, walked * 1000.0))
        self.next_session = end + self.period
        self.session_timer = False
        self._wake(end)

    def _close(self, t: float, updates: list[tuple[JobState, str]]) -> float:
        """CloseSession: the job updater writes changed PodGroup statuses, STATUS_WORKERS at a time."""
        rounds = math.ceil(len(updates) / STATUS_WORKERS)
        self._count("podgroup_updates", len(updates))
        for r in range(rounds):
            batch = [(js, js.extra["gen"], what) for js, what in updates[r * STATUS_WORKERS:(r + 1) * STATUS_WORKERS]]
            for _ in batch:
                self.limiter.acquire(t)
            self._at(t + (r + 1) * self.pg_update_s, self._status_written, batch)
        return rounds * self.pg_update_s

    def _status_written(self, t: float, batch: list) -> None:
        for js, gen, what in batch:
            ok = self._api_write(t, self.podgroup_bytes)
            if js.done or gen != js.extra["gen"]:
                continue
            if what == "inqueue":
                if ok:
                    self._inqueue_seen(t, js, gen)
                elif js.extra["phase"] == "inqueue" and not js.extra["pods"]:
                    self._to_phase(js, "pending", t)     # not persisted: Pending in the next snapshot
            elif what == "pending":
                self._to_phase(js, "pending", t)

    def _to_phase(self, js: JobState, phase: str, t: float) -> None:
        jid = js.job.id
        js.extra["phase"] = phase
        self.inqueue.pop(jid, None)
        self.pending_pg.pop(jid, None)
        if phase == "pending":
            self.pending_pg[jid] = js
        elif phase == "inqueue":
            self.inqueue[jid] = js
        self._sync(js)
        self._changed(t)

    def _open(self) -> None:
        """OpenSession: proportion's deserved share per queue, from what the queues request."""
        if not self.proportion:
            return
        total = self.total
        queues = set(self.q_alloc) | set(self.q_pending)
        requests = {q: min(self.q_alloc.get(q, 0) + self.q_pending.get(q, 0), self._capability(q), total)
                    for q in queues}
        self.deserved = water_fill(total, {q: self._weight(q) for q in queues}, requests)

    def _queue_order(self, q: str) -> tuple:
        if self.proportion:
            return (_share(self.q_alloc.get(q, 0), self.deserved.get(q, 0.0)), q)
        return (q,)

    def _overused(self, q: str) -> bool:
        return self.proportion and self.deserved.get(q, 0.0) <= self.q_alloc.get(q, 0)

    def _job_order(self, js: JobState) -> tuple:
        key: list = []
        for p in self.tiers[0] + self.tiers[1]:
            if p == "gang":
                key.append(js.extra["placed"] >= js.job.min_available)
            elif p == "priority":
                key.append(-js.job.priority)
            elif p == "drf":
                key.append(js.extra["placed"] * self._g(js) / max(self.total, 1))
        return (*key, js.job.submit_s, js.job.id)

    # --- actions (each returns the PodGroup status updates it caused) -------------------------
    def _action_enqueue(self, t: float, bind_from: float) -> list:
        updates = []
        total = self.total
        for jid in sorted(self.pending_pg, key=lambda j: self._job_order(self.pending_pg[j])):
            js = self.pending_pg[jid]
            q = self._queue(js)
            need = js.job.min_available * self._g(js)
            if self.proportion:
                used = need + self.q_alloc.get(q, 0) + self.q_inqueue.get(q, 0) - self.q_elastic.get(q, 0)
                if used > min(self._capability(q), total):
                    self._count("enqueue_rejected_capability")
                    continue
            self._to_phase(js, "inqueue", t)
            updates.append((js, "inqueue"))
        return updates

    def _valid(self, js: JobState) -> bool:
        """gang's JobValid: at least minAvailable pods exist."""
        return not self.gang or js.extra["pods"] >= js.job.min_available

    def _action_allocate(self, t: float, bind_from: float) -> list:
        updates = []
        by_queue: dict[str, list[JobState]] = {}
        for js in self.inqueue.values():
            if js.extra["pods"] > js.extra["placed"] and self._valid(js):
                by_queue.setdefault(self._queue(js), []).append(js)
        for jobs in by_queue.values():
            jobs.sort(key=self._job_order, reverse=True)     # pop() takes the first
        while by_queue:
            q = min(by_queue, key=self._queue_order)
            if self._overused(q):
                self._count("allocate_skipped_overused")
                del by_queue[q]
                continue
            js = by_queue[q].pop()
            if not by_queue[q]:
                del by_queue[q]
            was_ready = js.extra["placed"] >= js.job.min_available
            if self._allocate_job(js, bind_from):
                if not was_ready:
                    updates.append((js, "running"))
            elif not js.extra["unschedulable"]:
                js.extra["unschedulable"] = True
                updates.append((js, "unschedulable"))
        return updates

    def _allocate_job(self, js: JobState, bind_from: float) -> bool:
        """Place js's pending tasks; its binds go out when its walk ends (bind_from is unused: the
        session's own clock, ssn_t, says when)."""
        e = js.extra
        g, c = self._g(js), js.job.cpus_per_member
        todo = e["pods"] - e["placed"]
        if self.proportion:      # each task must keep its queue within deserved
            room = self.deserved.get(self._queue(js), 0.0) - self.q_alloc.get(self._queue(js), 0)
            todo = min(todo, max(0, int(math.floor(room / g + 1e-9))))
        short = js.job.min_available - e["placed"] if self.gang else 0      # tasks it needs now
        if self.state.sliced(js.job):
            return self._allocate_sliced(js, c, todo, short, bind_from)
        feasible = self.state.count_ge(g)
        if short > 0 and todo < short:       # the queue's share runs out first: no walk for the rest
            self._walk(todo, 0, feasible)
            self._count("gang_discarded")
            return False
        if short > 0 and not self.state.fits(short, g):
            self._walk(min(short - 1, feasible) if g >= self.state.gpn else 0, 1, feasible)
            self._count("gang_discarded")
            return False
        nodes = self._place(g, c, todo) if todo > 0 else []
        commits = bool(nodes) and not (self.gang and e["placed"] + len(nodes) < js.job.min_available)
        self._walk(len(nodes), int(len(nodes) < todo), feasible, commits)
        if self.gang and e["placed"] + len(nodes) < js.job.min_available:
            self._count("gang_discarded")
            return False
        if not nodes:
            return False
        since = self._held(js)
        for n in nodes:
            self.state.take(js.job.id, n, g, c)
        self._book_twice(js, since, self.ssn_t)
        return self._allocated(js, nodes, self.ssn_t)

    def _walk(self, placed: int, failed: int, feasible: int, commits: bool = False) -> None:
        """allocate's predicate walks on the session's clock: `placed` tasks that found a node
        (nodes examined until numNodesToFind of the `feasible` ones, those scored) and `failed`
        tasks that examined every node. What a job walks without committing (a task that fits
        nowhere, a discarded gang's placed tasks) it walks again in every session until something
        changes."""
        n = self.fleet.nodes
        cost = again = 0.0
        if placed:
            found = min(max(feasible, 1), self.to_find)
            examined = n if feasible <= self.to_find else min(n, math.ceil(self.to_find * n / feasible))
            cost = placed * (self.feasible_s * found + self.reject_s * (examined - found))
            again = 0.0 if commits else cost
        if failed:
            cost += failed * self.reject_s * n
            again += failed * self.reject_s * n
        if placed or failed:
            self._count("walks_placed", placed)
            self._count("walks_failed", failed)
        self.fail_walk_s += again
        self.ssn_t += cost

    def _allocated(self, js: JobState, nodes: list[int], bind_from: float) -> bool:
        e = js.extra
        e["placed"] += len(nodes)
        e["phase"] = "running"
        if e["placed"] >= js.job.members:
            self.inqueue.pop(js.job.id, None)
        self._sync(js)
        sent = [self.limiter.acquire(bind_from) for _ in nodes] or [bind_from]
        self._count("binds", len(nodes))
        self._at(self.returned(sent, self.write_latency), self._bound, js, e["gen"], nodes)
        return True

    def _bound(self, t: float, js: JobState, gen: int, nodes: list[int]) -> None:
        if js.done or gen != js.extra["gen"]:
            return
        if all(self._api_write(t, self.pod_bytes) for _ in nodes):
            self._bind(js, t, len(nodes))
            # its pods go Running: the PodGroup's status.running changes, which the next session's
            # job updater writes (jobStatus counts Running tasks)
            self.counts_due[js.job.id] = js
            # its pods' new status brings the job back to its worker: a sync that writes its status
            self._worker_sync(t, js, [(self.podgroup_bytes, 0.0, None, 1)])
            return
        # A refused bind (etcd NOSPACE): the tasks are pending again and their nodes free.
        self._count("bind_refused")
        for n in sorted(set(nodes)):
            self.state.give_back(js.job.id, n)
        js.extra["placed"] = len(self.state.holdings.get(js.job.id, []))
        self.inqueue[js.job.id] = js
        self._sync(js)
        self._changed(t)

    def _allocate_sliced(self, js: JobState, c: int, todo: int, short: int, bind_from: float) -> bool:
        """Tasks asking for a GPU slice (deviceshare / vGPU) or a GPU model: one at a time on the
        node the node order prefers (binpack: the least free GPU capacity that fits; nodeorder
        alone: the most), on the GPU deviceshare's policy picks (binpack: best fit; spread: the
        emptiest); a gang that cannot reach minAvailable gives its tasks back (the statement is
        discarded)."""
        s = self.state
        binpack = "binpack" in self.plugins
        if short > 0 and todo < short:
            self._count("gang_discarded")
            return False
        shape = (js.job.share, js.job.gpus_per_member, js.job.gpu_spec, c)
        if shape in self.no_fit and self.no_fit_at == self.state.version:
            self._walk(0, 1, 0)
            return False            # the same shape found no room this session, and nothing was placed since
        before = list(s.holdings.get(js.job.id, []))
        since = self._held(js)
        nodes: list[int] = []
        for _ in range(todo):
            ok = np.flatnonzero(s.feasible_for(js.job))
            self._walk(int(len(ok) > 0), int(len(ok) == 0), len(ok), commits=True)
            if not len(ok):
                break
            free = s.slices.free_compute[ok].sum(axis=1)
            level = free.min() if binpack else free.max()
            best = ok[np.isclose(free, level)]
            n = int(best[int(self.rng.integers(len(best)))]) if len(best) > 1 else int(best[0])
            s.take(js.job.id, n, js.job.gpus_per_member, c, js.job.gpu_share, "best" if binpack else "worst")
            nodes.append(n)
        if not nodes:
            if self.no_fit_at != self.state.version:
                self.no_fit, self.no_fit_at = set(), self.state.version
            self.no_fit.add(shape)
            return False
        if self.gang and js.extra["placed"] + len(nodes) < js.job.min_available:
            if nodes:
                s.give_back(js.job.id)
                for node, gpus, cpus in before:
                    s.take(js.job.id, node, gpus, cpus, js.job.gpu_share, "best" if binpack else "worst")
                self._count("gang_discarded")
            return False
        self._book_twice(js, since, self.ssn_t)
        return self._allocated(js, nodes, self.ssn_t)

    # --- v1.14.1's vGPU books ----------------------------------------------------------------------
    def _held(self, js: JobState) -> int:
        slices = self.state.slices
        return len(slices.holdings.get(js.job.id, [])) if self.stale_books else 0

    def _book_twice(self, js: JobState, since: int, t: float) -> None:
        """The GPUs js took from its `since`-th on: on vGPU nodes each is booked once at Allocate
        (vgpu/device_info.go Allocate -> utils.go checkNodeGPUSharingPredicateAndScore -> hamicore.go
        TryAddPod, on the cache's own books: api/node_info.go Clone shares Others), which the take
        stands for, and again when the bound pod comes back through the informer (cache
        event_handlers.go updatePod -> node_info.go AddTask -> device_info.go AddResource -> AddPod):
        that second booking is the stale one, from the bind on. A discarded statement's bookings
        (its Release is a no-op) are not modelled."""
        if not self.stale_books:
            return
        gpus = [(node, k, MILLI if slot.share.is_whole else slot.share.amount)
                for node, k, slot in self.state.slices.holdings.get(js.job.id, [])[since:] if self.vgpu_node[node]]
        if gpus:
            self._at(t + self.write_s, self._booked_again, gpus)

    def _booked_again(self, t: float, gpus: list[tuple[int, int, int]]) -> None:
        for node, k, milli in gpus:
            self.state.book_stale(node, k, milli)
        if not self.rebuild_due:
            self.rebuild_due = True
            self._at((math.floor(t / self.report_s) + 1) * self.report_s, self._rebuild)

    def _rebuild(self, t: float) -> None:
        """The device plugin reports: every vGPU node's books are rebuilt from what its pods hold
        (api/node_info.go setNode -> setNodeOthersResource -> vgpu.NewGPUDevices, then addResource)."""
        self.rebuild_due = False
        self.state.clear_stale()
        self._changed(t)

    def _action_backfill(self, t: float, bind_from: float) -> list:
        return []          # places BestEffort pods only

    def _place(self, g: int, c: int, count: int) -> list[int]:
        """Up to `count` nodes for tasks of g GPUs and c CPUs: predicates, then node order (binpack:
        the fewest free GPUs that fit; nodeorder alone: the most), ties at random."""
        s = self.state
        if g >= s.gpn:
            ok = np.flatnonzero(s.free_gpus >= g)
            ok = ok[s.up[ok] & (s.free_cpus[ok] >= c)]
            if len(ok) == 0:
                return []
            return [int(x) for x in self.rng.choice(ok, size=min(count, len(ok)), replace=False)]
        levels = range(g, s.gpn + 1) if "binpack" in self.plugins else range(s.gpn, g - 1, -1)
        taken: dict[int, int] = {}            # node -> tasks of this job placed on it so far
        chosen = []
        for _ in range(count):
            pick = None
            for level in levels:
                moved = [n for n, k in taken.items() if s.free_gpus[n] - k * g == level and s.free_cpus[n] - k * c >= c]
                if s.count_ge(level) - s.count_ge(level + 1) == 0 and not moved:
                    continue
                nodes = np.flatnonzero(s.free_gpus == level)
                nodes = nodes[s.up[nodes] & (s.free_cpus[nodes] >= c)]
                if taken:
                    nodes = nodes[~np.isin(nodes, list(taken))]
                if moved:
                    nodes = np.sort(np.concatenate((nodes, np.array(moved, dtype=nodes.dtype))))
                if len(nodes):
                    pick = int(nodes[int(self.rng.integers(len(nodes)))])
                    break
            if pick is None:
                break
            taken[pick] = taken.get(pick, 0) + 1
            chosen.append(pick)
        return chosen

    # --- preempt and reclaim ------------------------------------------------------------------
    def _starving(self, js: JobState) -> bool:
        """JobStarving of the first tier that has an opinion (gang and priority are both tier 1)."""
        e = js.extra
        votes = [p for p in self.tiers[0] if p in ("gang", "priority")]
        if not votes or e["phase"] not in ("inqueue", "running") or not self._valid(js):
            return False
        return all(e["placed"] < (js.job.min_available if p == "gang" else e["pods"]) for p in votes)

    def _action_preempt(self, t: float, bind_from: float) -> list:
        return self._evict_action("preempt", bind_from)

    def _action_reclaim(self, t: float, bind_from: float) -> list:
        return self._evict_action("reclaim", bind_from)

    def _evict_action(self, kind: str, bind_from: float) -> list:
        starving: dict[str, list[JobState]] = {}
        for js in self.inqueue.values():
            if self._starving(js):
                starving.setdefault(self._queue(js), []).append(js)
        book = {"queue": dict(self.q_alloc), "job": {}, "ready": {}, "gone": set()}
        for q in sorted(starving, key=self._queue_order):
            if kind == "reclaim" and self._overused(q):
                continue
            for js in sorted(starving[q], key=self._job_order):
                book = self._evict_for(js, kind, book, bind_from)
        return []

    def _evict_for(self, js: JobState, kind: str, book: dict, bind_from: float) -> dict:
        """One statement: pipeline js's pending tasks onto nodes that victims free, node by node;
        commit if js is then pipelined (its evictions go out), else discard."""
        q, g, e = self._queue(js), js.job.gpus_per_member, js.extra
        stmt = {"queue": dict(book["queue"]), "job": dict(book["job"]), "ready": dict(book["ready"]),
                "gone": set(book["gone"])}
        running = [v for v in self.active.values() if v.job.id not in stmt["gone"]
                   and (self._queue(v) != q if kind == "reclaim" else self._queue(v) == q and v is not js)]
        on_node: dict[int, list[tuple[JobState, int]]] = {}
        for v in running:
            for n, gpus, _ in self.state.holdings.get(v.job.id, []):
                on_node.setdefault(n, []).append((v, gpus))
        future = self.state.free_view().astype(np.int64)
        victims: dict[int, JobState] = {}
        pipelined = 0
        for _ in range(e["pods"] - e["placed"]):
            if e["placed"] + pipelined >= (js.job.min_available if self.gang else e["pods"]):
                break
            if kind == "reclaim" and not self._allocatable(stmt, q, g):
                break                      # proportion's Preemptive: the queue has no room left
            for n in sorted(on_node):
                chosen = self._victims(kind, js, on_node[n], stmt)
                if not chosen or future[n] + sum(gp for _, gp in chosen) < g:
                    continue               # ValidateVictims
                for task in sorted(chosen, key=lambda x: self._job_order(x[0]), reverse=True):
                    if kind == "preempt" and self._allocatable(stmt, q, g) and future[n] >= g:
                        break
                    v, gp = task
                    future[n] += gp
                    victims[v.job.id] = v
                    on_node[n].remove(task)
                    self._evicted_in(stmt, v, gp)
                    if kind == "reclaim" and future[n] >= g:
                        break
                if future[n] >= g and (kind == "reclaim" or self._allocatable(stmt, q, g)):
                    future[n] -= g         # pipelined onto n
                    pipelined += 1
                    stmt["queue"][q] = stmt["queue"].get(q, 0) + g
                    stmt["job"][js.job.id] = stmt["job"].get(js.job.id, e["placed"] * g) + g
                    break
            else:
                break
        if e["placed"] + pipelined < js.job.min_available or not victims:
            return book                    # not pipelined: discard
        self._count(f"{kind}_victims", len(victims))
        for v in victims.values():
            stmt["gone"].add(v.job.id)
            self._at(self.limiter.acquire(bind_from) + self.write_s, self._evict, v, v.run_token, kind)
        return stmt

    def _allocatable(self, stmt: dict, q: str, g: int) -> bool:
        """proportion's queueAllocatable: the queue stays within its deserved share."""
        return not self.proportion or stmt["queue"].get(q, 0) + g <= self.deserved.get(q, 0.0) + 1e-9

    def _evicted_in(self, stmt: dict, v: JobState, gpus: int) -> None:
        """What the plugins' deallocate handlers see when a victim task is evicted in a statement."""
        q = self._queue(v)
        stmt["queue"][q] = stmt["queue"].get(q, 0) - gpus
        stmt["job"][v.job.id] = stmt["job"].get(v.job.id, v.extra["placed"] * v.job.gpus_per_member) - gpus
        stmt["ready"][v.job.id] = stmt["ready"].get(v.job.id, v.extra["placed"]) - 1

    def _victims(self, kind: str, js: JobState, tasks: list, stmt: dict) -> list:
        """ssn.Preemptable / ssn.Reclaimable: tier by tier; a plugin naming no victim leaves its
        tier undecided; within a tier the victims are what every plugin names."""
        fns = {"gang": self._v_gang, "conformance": lambda js_, ts, st: list(range(len(ts)))}
        if kind == "preempt":
            fns.update(priority=self._v_priority, drf=self._v_drf)
        else:
            fns.update(proportion=self._v_proportion)
        for tier in self.tiers:
            chosen: set[int] | None = None
            for p in tier:
                if p not in fns:
                    continue
                cands = set(fns[p](js, tasks, stmt))
                if not cands:
                    chosen = None
                    break
                chosen = cands if chosen is None else (chosen & cands or None)
            if chosen:
                return [tasks[i] for i in sorted(chosen)]
        return []

    def _v_gang(self, js: JobState, tasks: list, stmt: dict) -> list[int]:
        occupied: dict[int, int] = {}
        out = []
        for i, (v, _) in enumerate(tasks):
            left = occupied.setdefault(v.job.id, stmt["ready"].get(v.job.id, v.extra["placed"]))
            if left > v.job.min_available:
                occupied[v.job.id] = left - 1
                out.append(i)
        return out

    def _v_priority(self, js: JobState, tasks: list, stmt: dict) -> list[int]:
        return [i for i, (v, _) in enumerate(tasks) if v.job.priority < js.job.priority]

    def _v_drf(self, js: JobState, tasks: list, stmt: dict) -> list[int]:
        total = max(self.total, 1)
        mine = stmt["job"].get(js.job.id, js.extra["placed"] * js.job.gpus_per_member)
        ls = (mine + js.job.gpus_per_member) / total
        alloc: dict[int, int] = {}
        out = []
        for i, (v, gp) in enumerate(tasks):
            alloc[v.job.id] = alloc.get(v.job.id,
                                        stmt["job"].get(v.job.id, v.extra["placed"] * v.job.gpus_per_member)) - gp
            rs = alloc[v.job.id] / total
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                out.append(i)
        return out

    def _v_proportion(self, js: JobState, tasks: list, stmt: dict) -> list[int]:
        alloc: dict[str, float] = {}
        out = []
        for i, (v, gp) in enumerate(tasks):
            q = self._queue(v)
            alloc.setdefault(q, stmt["queue"].get(q, 0))
            if alloc[q] > self.deserved.get(q, 0.0):
                alloc[q] -= gp
                out.append(i)
        return out

    def _evict(self, t: float, v: JobState, token: int, kind: str) -> None:
        if v.done or token != v.run_token or not v.running:
            return
        held = {n for n, _, _ in self.state.holdings.get(v.job.id, [])}
        self._lose(v, held, t, {"preempt": "preempted", "reclaim": "reclaimed"}[kind])
        self._on_release(t)

    # --- observation --------------------------------------------------------------------------
    def snapshot(self, now: float):
        snap = super().snapshot(now)
        snap.control_plane.update(inqueue_jobs=len(self.inqueue), pending_podgroups=len(self.pending_pg))
        return snap

    def control_plane(self) -> dict:
        ms = np.array(self.session_ms) if self.session_ms else np.zeros(1)
        return {**super().control_plane(),
                "session_ms_mean": round(float(ms.mean()), 4),
                "session_ms_max": round(float(ms.max()), 4),
                # allocate's walks (vc-scheduler's action_ms{allocate}), the rest is open and close
                "session_walk_ms_mean": round(float(np.mean([w for _, _, w in self.session_log]))
                                              if self.session_log else 0.0, 4),
                "podgroup_updates": int(self.counters.get("podgroup_updates", 0)),   # PUT podgroups
                **({"controller_calls_short_of_cores": self.shared.stretches} if self.shared.on else {}),
                "busy_s": {**self.cp.busy_s(), "volcano-session": round(float(sum(self.session_ms)) / 1000.0, 6),
                           "client-qps-limiter": round(self.limiter.busy_s, 6),
                           "controller-qps-limiter": round(self.ctrl.busy_s, 6)}}
