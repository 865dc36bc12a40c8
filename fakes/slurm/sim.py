"""Simulated slurmctld: batch submission, the scheduling threads and their locks, backfill, cons_tres,
topology/tree, priority/multifactor.

Mechanisms modeled (Slurm 22.05 source: controller.c, job_scheduler.c, backfill.c, proc_req.c):
- One set of slurmctld locks. Each submit and job-completion RPC (rpc_ms), main scheduling cycle and
  backfill stretch holds them; whoever comes next waits (first come, first served). A job started
  inside a cycle takes its nodes at once (its StartTime), but squeue, hence the client, sees it
  RUNNING only once the cycle lets go of the locks: that is when it counts as admitted here.
- sbatch is never placed inside the submit RPC (job_allocate with allocate == 0 only tests). The
  RPC queues the job and bumps job_sched_cnt. The background thread wakes every background_tick_s
  and calls schedule() when now - last_sched_time >= batch_sched_delay_s and job_sched_cnt > 0,
  plus a full-queue pass every sched_interval_s. The end of a job (its epilog completing) calls
  schedule() directly, unless more than LOTS_OF_AGENTS_CNT (50) agents are alive (each job's batch
  launch and each job's terminate message is one, alive agent_ms): then it only bumps
  job_sched_cnt, as node changes and requeues do.
- schedule() wakes the scheduling agent, which runs one cycle at a time, at least
  sched_min_interval_s after the previous one ended. A cycle costs main_cycle_base_ms +
  (main_cycle_per_job_us + main_cycle_per_job_node_ns x nodes) per job tested (select/cons_tres
  tests every node for every job: sdiag's mean cycle grows with both); it walks the queue by
  priority (default_queue_depth jobs, or all of it in a full pass), stops at the first job that
  cannot start (one partition) and once max_sched_time_s has passed (whole seconds, as time(NULL)
  counts them).
- Backfill runs bf_interval_s after the previous pass ended, when something changed since then.
  It costs bf_cycle_base_ms + (bf_cycle_per_job_us + bf_cycle_per_job_node_ns x nodes) per job
  tested and walks up to bf_max_job_test
  jobs: a job starts now if it fits on nodes not reserved for a higher job, or it ends (by its time
  limit) before that reservation starts; a whole-node job that cannot start gets a reservation at
  its earliest start within bf_window_min (rounded up to bf_resolution_s). It stops after
  bf_max_job_start starts (0 = no limit) or bf_interval_s (bf_max_time's default). Every
  bf_yield_interval_s of work it lets go of the locks for bf_yield_sleep_s; if a job or node
  changed meanwhile, the pass ends there (no bf_continue).
- Priority = job size (PriorityFavorSmall=NO: (nodes/cluster nodes + cpus/cluster cpus) / 2) x its
  weight, an integer as Slurm keeps it, ties by submit second then job id. Age and fair share need
  SlurmDBD: with accounting_storage "none" (what the real backend runs) their weights are ignored,
  as slurmctld does; "slurmdbd" adds them (fair share 2^(-usage/shares), usage decayed by
  PriorityDecayHalfLife).
- cons_tres: 8-GPU members take whole nodes (--exclusive); smaller jobs share nodes, best fit.
- --requeue: an evicted job restarts whole; it is eligible again cred_expire_s later and waits for
  the next pass (nothing schedules at that moment).
- topology/tree: a gang goes on the fewest leaf switches (best-fit leaf); with switches=N a gang of
  switches_min_members or more waits up to switches_max_wait_s for N leaves before taking more.
"""
from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fakes.sim.base import JobState, SimTarget
from fakes.slurm.traits import SlurmTraits
from loadgen.model.events import Kind
from loadgen.model.target import TargetContext

Work = Callable[..., "tuple[float, Callable[[float], None] | None]"]
LOTS_OF_AGENTS_CNT = 50     # src/slurmctld/agent.h: above this many agents an epilog defers to the background pass
SAMPLE_STRIDE = 8           # earliest(): every 8th time bounds the m earliest


def earliest(times: np.ndarray, m: int) -> np.ndarray:
    """Indices of the m earliest times, in the order of a stable sort by (time, node index): among
    equal times the lowest index first. Defined so, a seed reserves the same nodes on every CPU
    (np.argpartition's choice among equal times depends on the SIMD routine numpy dispatches to).

    The m-th smallest of every SAMPLE_STRIDE-th time bounds the answer from above (those m sampled
    times are themselves at most that), so only the times up to it are sorted: about
    SAMPLE_STRIDE x m of the fleet's nodes instead of all of them."""
    sample = times[::SAMPLE_STRIDE]
    if len(sample) < m:
        return np.argsort(times, kind="stable")[:m]
    near = np.flatnonzero(times <= np.partition(sample, m - 1)[m - 1])
    return near[np.argsort(times[near], kind="stable")[:m]]


def _whole_s(t0: float, t1: float) -> int:
    """Seconds between two instants as difftime() of two time(NULL) readings counts them."""
    return math.floor(t1) - math.floor(t0)


def _walk(n: int, per: float, room: float) -> int:
    """How many of n steps of `per` seconds each start before `room` seconds are used up."""
    if n <= 0 or room <= 0:
        return 0
    return n if per <= 0 else min(n, math.ceil(room / per - 1e-12))


class MainCosts(NamedTuple):
    """A main cycle's costs in seconds (schedule(), job_scheduler.c)."""
    base: float         # fixed
    pending: float      # per pending job: build_job_queue walks them and sorts the queue
    start: float        # per job started: select_nodes picks its nodes over every node, then the launch
    fail: float         # per job tested that cannot start: select_nodes over every node, no allocation
    skip: float         # per job popped after its partition failed (counted in sdiag's depth)

    def cycle(self, pending: int, started: int, failed: int, skipped: int) -> float:
        return self.base + self.pending * pending + self.start * started + self.fail * failed + self.skip * skipped


class BackfillCosts(NamedTuple):
    """A backfill pass's lock-held costs in seconds (_attempt_backfill, backfill.c)."""
    base: float         # fixed: the node-space map, the sort
    test: float         # per job tested (_try_sched over every node, its reservation)
    start: float        # per job started, on top of its test (select_nodes again, the launch)

    def cycle(self, tested: int, started: int) -> float:
        return self.base + self.test * tested + self.start * started


def main_cycle_costs(c: dict, nodes: int) -> MainCosts:
    return MainCosts(c["main_cycle_base_ms"] / 1e3, c["main_cycle_per_pending_us"] / 1e6,
                     c["main_cycle_per_job_us"] / 1e6 + c["main_cycle_per_job_node_ns"] * nodes / 1e9,
                     c["main_cycle_per_fail_us"] / 1e6 + c["main_cycle_per_fail_node_ns"] * nodes / 1e9,
                     c["main_cycle_per_skip_us"] / 1e6)


def bf_cycle_costs(c: dict, nodes: int) -> BackfillCosts:
    return BackfillCosts(c["bf_cycle_base_ms"] / 1e3,
                         c["bf_cycle_per_job_us"] / 1e6 + c["bf_cycle_per_job_node_ns"] * nodes / 1e9,
                         c["bf_cycle_per_start_us"] / 1e6 + c["bf_cycle_per_start_node_ns"] * nodes / 1e9)


def submit_rpc_s(c: dict, nodes: int) -> float:
    """slurmctld's work for one sbatch: job_allocate tests the job against every node (test_only)."""
    return c["rpc_ms"] / 1e3 + c["rpc_per_node_us"] * nodes / 1e6


@dataclass(eq=False)
class _BackfillPass:
    start: float = 0.0                  # when it got the locks first
    order: list[JobState] | None = None  # the queue by priority, built once with the locks held
    reserved_from: np.ndarray | None = None
    reserved_min: float = math.inf      # earliest reservation so far: nothing is blocked before it
    idx: int = 0                        # next job in `order`
    stretches: int = 0                  # lock holds so far (the pass yields between them)
    tested: int = 0
    started: int = 0
    work: float = 0.0                   # lock-held time so far (what sdiag reports)
    yielded_at: float = 0.0


class SimSlurm(SlurmTraits, SimTarget):
    name = "slurm"
    restart_whole_gang = True        # --requeue: the whole job goes back to the queue
    # the cost model, for comparisons with measured cycles (loadgen/calibration/slurm_curve.py)
    main_costs = staticmethod(main_cycle_costs)
    bf_costs = staticmethod(bf_cycle_costs)
    submit_rpc_s = staticmethod(submit_rpc_s)

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        c = self.cfg
        self.dbd = c["accounting_storage"] == "slurmdbd"
        self.pending: dict[int, JobState] = {}              # eligible jobs
        self.queue: list[tuple] = []                        # (-priority, submit second, id), static without dbd
        self.node_end = np.zeros(self.fleet.nodes)          # when a node's jobs end by time limit
        self.node_jobs: dict[int, dict[int, float]] = {}    # job -> {node: end}
        self.on_node: dict[int, dict[int, float]] = {}      # node -> {job: end}
        self.usage: dict[str, float] = {}
        self.usage_t = 0.0
        # locks
        self.lock_q: deque = deque()
        self.locked = False
        self.lock_busy_s = {"rpc": 0.0, "main": 0.0, "backfill": 0.0}     # time each kind of holder held them
        # background thread
        self.tick = float(c["background_tick_s"])
        self.full_every = max(1, math.ceil(c["sched_interval_s"] / self.tick - 1e-9))   # ticks
        self.job_sched_cnt = 0
        self.last_sched = 0.0
        self.bg_k = 0                   # last tick handled
        self.bg_at: int | None = None   # tick armed
        # scheduling agent
        self.agent_busy = False
        self.sched_requests = False
        self.sched_full = False
        self.sched_last_end = -math.inf
        # backfill agent
        self.bf_last_end = 0.0
        self.bf_at: float | None = None
        self.bf: _BackfillPass | None = None
        self.last_update = 0.0          # last job or node change (last_job_update / last_node_update)
        self._ending = False
        self.agents: list[float] = []   # when each live agent (launch, terminate) ends: a heap
        # what sdiag would show
        self.main_cycles: list[tuple[float, int, int]] = []  # (lock-held s, jobs tested, depth as sdiag counts)
        self.bf_cycles: list[tuple[float, int]] = []
        self.rpcs: dict[str, list[float]] = {"REQUEST_SUBMIT_BATCH_JOB": [], "REQUEST_COMPLETE_BATCH_SCRIPT": []}
        self.leaves_used: list[int] = []
        self.started_by = {"main": 0, "backfill": 0}

    def _limit(self, js: JobState) -> float:
        return math.ceil(js.job.duration_s * self.cfg["time_limit_factor"] / 60.0) * 60.0

    # --- slurmctld's locks ------------------------------------------------------------------
    def _lock(self, t: float, work: Work, *args) -> None:
        """Queue `work` for the locks; work(t, *args) returns how long it holds them and what to do
        when it lets go."""
        self.lock_q.append((work, args))
        if not self.locked:
            self._grant(t)

    def _grant(self, t: float) -> None:
        work, args = self.lock_q.popleft()
        self.locked = True
        hold, after = work(t, *args)
        holder = {"_main": "main", "_bf_run": "backfill"}.get(work.__name__, "rpc")
        self.lock_busy_s[holder] += hold
        self._at(t + hold, self._unlock, after)

    def _unlock(self, t: float, after) -> None:
        self.locked = False
        if after is not None:
            after(t)
        if self.lock_q and not self.locked:
            self._grant(t)

    def _rpc(self, t: float, name: str, done: Callable[[float], None]) -> None:
        cost = submit_rpc_s(self.cfg,
                            self.fleet.nodes) if name == "REQUEST_SUBMIT_BATCH_JOB" else self.cfg["rpc_ms"] / 1e3

        def work(t0: float):
            def after(t1: float) -> None:
                self.rpcs[name].append(t1 - t)          # sdiag's RPC time includes the wait for locks
                done(t1)
            return cost, after
        self._lock(t, work)

    def _touch(self, t: float) -> None:
        self.last_update = t
        self._bf_arm(t)

    # --- jobs coming and going --------------------------------------------------------------
    def _submit(self, js: JobState, now: float) -> None:
        self._rpc(now, "REQUEST_SUBMIT_BATCH_JOB", lambda t: self._accepted(t, js))

    def _accepted(self, t: float, js: JobState) -> None:
        self._emit(t, js.job.id, Kind.SUBMITTED)
        self._eligible(js, t, t)
        self._queue_job_scheduler(t)

    def _eligible(self, js: JobState, t: float, submit_t: float) -> None:
        js.extra.update(queued_at=t, submit_t=submit_t)
        self.pending[js.job.id] = js
        if not self.dbd:
            key = (-self._priority(js), math.floor(submit_t), js.job.id)
            js.extra["key"] = key
            bisect.insort(self.queue, key)
        self._touch(t)
        self._bg_arm(t)                 # the full-queue pass concerns it from now on

    def _dequeue(self, js: JobState) -> None:
        del self.pending[js.job.id]
        if not self.dbd:
            i = bisect.bisect_left(self.queue, js.extra["key"])
            del self.queue[i]

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        # Requeue resets the submit time and sets begin_time = now + cred_expire (+1 s): the job is
        # eligible then, and nothing schedules at that moment.
        self._drop_node_ends(js.job.id)
        self._at(t + self.cfg["cred_expire_s"], self._release_hold, js, t)

    def _release_hold(self, t: float, js: JobState, requeued_t: float) -> None:
        if not js.done and not js.running and js.job.id not in self.pending:
            self._eligible(js, t, requeued_t)

    def _finished(self, js: JobState, t: float) -> None:
        if self.dbd:
            self._decay(t)
            runtime = t - js.extra.get("started_at", t)
            self.usage[js.job.tenant] = self.usage.get(js.job.tenant, 0.0) + runtime * js.job.gpus
        self._drop_node_ends(js.job.id)
        self._ending = True
        self._agent_born(t)             # REQUEST_TERMINATE_JOB to the job's nodes
        # The completion RPC, then the epilog-complete message calls schedule() (proc_req.c).
        self._rpc(t, "REQUEST_COMPLETE_BATCH_SCRIPT", self._epilog_complete)

    def _epilog_complete(self, t: float) -> None:
        self._touch(t)
        if self._agents_alive(t) > LOTS_OF_AGENTS_CNT:
            self._queue_job_scheduler(t)     # LOTS_OF_AGENTS: the next background pass instead
        else:
            self._schedule(t)

    # --- slurmctld's agents: one per batch launch and per job's terminate message -----------------
    def _agent_born(self, t: float) -> None:
        if self.cfg["agent_ms"] > 0:
            heapq.heappush(self.agents, t + self.cfg["agent_ms"] / 1e3)

    def _agents_alive(self, t: float) -> int:
        while self.agents and self.agents[0] <= t:
            heapq.heappop(self.agents)
        return len(self.agents)

    def _on_release(self, t: float) -> None:
        if self._ending:                # a job end: its epilog already asks for a cycle
            self._ending = False
            return
        self._touch(t)                  # node up/down, eviction: queue_job_scheduler()
        self._queue_job_scheduler(t)

    def _drop_node_ends(self, jid: int) -> None:
        for n in self.node_jobs.pop(jid, {}):
            others = self.on_node.get(n, {})
            others.pop(jid, None)
            self.node_end[n] = max(others.values(), default=0.0)

    # --- the background thread ---------------------------------------------------------------
    def _queue_job_scheduler(self, t: float) -> None:
        self.job_sched_cnt += 1
        self._bg_arm(t)

    def _bg_arm(self, t: float) -> None:
        """Arm the first background tick that will call schedule(); idle ticks are skipped."""
        if not (self.job_sched_cnt or self.pending):
            return
        n = self.full_every
        k0 = max(self.bg_k + 1, math.ceil(t / self.tick - 1e-9))
        k = -(-k0 // n) * n                                             # next full-queue pass
        if self.job_sched_cnt:
            last = max(self.last_sched, (k0 - 1) // n * n * self.tick)   # full passes while idle count
            k = min(k, max(k0, math.ceil((last + self.cfg["batch_sched_delay_s"]) / self.tick - 1e-9)))
        if self.bg_at is None or k < self.bg_at:
            self.bg_at = k
            self._at(k * self.tick, self._bg_tick, k)

    def _bg_tick(self, t: float, k: int) -> None:
        if k != self.bg_at:
            return
        self.bg_at, self.bg_k = None, k
        self.job_sched_cnt = 0
        self.last_sched = t
        self._schedule(t, full=k % self.full_every == 0)
        self._bg_arm(t)

    # --- the scheduling agent and the main cycle -------------------------------------------------
    def _schedule(self, t: float, full: bool = False) -> None:
        self.sched_requests = True
        self.sched_full |= full
        if not self.agent_busy:
            self.agent_busy = True
            start = self.sched_last_end + self.cfg["sched_min_interval_s"]
            if start <= t:
                self._agent(t)
            else:
                self._at(start, self._agent)

    def _agent(self, t: float) -> None:
        full, self.sched_full, self.sched_requests = self.sched_full, False, False
        self._lock(t, self._main, full)

    def _main(self, t: float, full: bool):
        c = self.cfg
        cost = main_cycle_costs(c, self.fleet.nodes)
        work = cost.base + cost.pending * len(self.pending)
        order = self._order(t, len(self.pending) if full else c["default_queue_depth"])
        launched: list = []
        tested = 0
        blocked = False
        for js in order:
            if _whole_s(t, t + work) >= c["max_sched_time_s"]:
                break
            tested += 1
            nodes = self._place(js, t + work + cost.start, None)
            if nodes is None:
                work += cost.fail
                blocked = True          # the partition is blocked for everyone below this job
                break
            work += cost.start
            launched.append(self._launch(js, nodes, t + work, "main"))
        skipped = 0
        if blocked:                     # ... but schedule() still pops them, within depth and time
            skipped = _walk(len(order) - tested, cost.skip, math.floor(t) + c["max_sched_time_s"] - (t + work))
            work += skipped * cost.skip
        self.main_cycles.append((work, tested, tested + skipped))

        def after(tr: float) -> None:
            self._started(tr, launched)
            self.sched_last_end = tr
            if self.sched_requests:
                self._at(tr + c["sched_min_interval_s"], self._agent)
            else:
                self.agent_busy = False
        return work, after

    # --- priority -------------------------------------------------------------------------
    def _priority(self, js: JobState, t: float = 0.0, fs: dict | None = None) -> int:
        c, f = self.cfg, self.fleet
        size = (js.job.members / f.nodes + js.job.members * js.job.cpus_per_member / (f.nodes * f.cpus_per_node)) / 2
        p = c["priority_weight_jobsize"] * size + 1e6 * js.job.priority
        if fs is not None:
            age = min((t - js.extra["submit_t"]) / (c["priority_max_age_h"] * 3600.0), 1.0)
            p += c["priority_weight_age"] * age + c["priority_weight_fairshare"] * fs[js.job.tenant]
        return max(1, int(p))

    def _order(self, t: float, limit: int) -> list[JobState]:
        if not self.dbd:
            return [self.pending[k[2]] for k in self.queue[:limit]]
        self._decay(t)
        tenants = {js.job.tenant for js in self.pending.values()} | set(self.usage)
        total_usage = sum(self.usage.values()) or 1.0
        share = 1.0 / max(len(tenants), 1)
        fs = {k: 2.0 ** (-(self.usage.get(k, 0.0) / total_usage) / share) for k in tenants}
        keyed = sorted((-self._priority(js, t, fs), math.floor(js.extra["submit_t"]), js.job.id)
                       for js in self.pending.values())
        return [self.pending[k[2]] for k in keyed[:limit]]

    def _decay(self, t: float) -> None:
        hl = self.cfg["priority_decay_half_life_h"] * 3600.0
        f = 0.5 ** ((t - self.usage_t) / hl)
        for k in self.usage:
            self.usage[k] *= f
        self.usage_t = t

    # --- placement (cons_tres + topology/tree) ---------------------------------------------
    def _place(self, js: JobState, t: float, blocked: np.ndarray | None) -> list[int] | None:
        s = self.state
        g, c, m = js.job.gpus_per_member, js.job.cpus_per_member, js.job.members
        if s.sliced(js.job):
            return self._place_sliced(js, blocked)
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
            if want and m >= self.cfg["switches_min_members"] and used > want:
                if t - js.extra["queued_at"] < self.cfg["switches_max_wait_s"]:
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

    def _place_sliced(self, js: JobState, blocked: np.ndarray | None) -> list[int] | None:
        """A job of shards (gres/shard), a typed MIG GRES or a GPU model: cons_tres best fit, each
        task on the node with the least free GPU capacity where its GRES fits."""
        s, c = self.state, js.job.cpus_per_member
        mask = s.feasible_for(js.job)
        if blocked is not None:
            mask &= ~blocked
        cap = np.where(mask, s.member_capacity(js.job), 0)
        cpus = s.free_cpus.copy()
        free = s.slices.free_compute.sum(axis=1)
        chosen: list[int] = []
        for _ in range(js.job.members):
            ok = np.flatnonzero((cap > 0) & (cpus >= c))
            if not len(ok):
                return None
            n = int(ok[np.argmin(free[ok])])
            cap[n] -= 1
            cpus[n] -= c
            chosen.append(n)
        return chosen

    def _launch(self, js: JobState, nodes: list[int], t: float, by: str) -> tuple:
        """Allocate now (StartTime = t); the job is seen RUNNING when the locks are let go."""
        self._dequeue(js)
        end = t + self._limit(js)
        ends = self.node_jobs.setdefault(js.job.id, {})
        for n in nodes:
            self.state.take(js.job.id, n, js.job.gpus_per_member, js.job.cpus_per_member, js.job.gpu_share, "best")
            ends[n] = end
            self.on_node.setdefault(n, {})[js.job.id] = end
            self.node_end[n] = max(self.node_end[n], end)
        self.leaves_used.append(len(set(int(self.state.leaf_of[n]) for n in nodes)))
        self.started_by[by] += 1
        return js, len(nodes), js.run_token

    def _started(self, t: float, launched: list) -> None:
        for js, n, token in launched:
            if token == js.run_token and not js.done:     # not lost while the cycle held the locks
                js.extra["started_at"] = t
                self._agent_born(t)                       # the batch launch
                self._bind(js, t, n)
        if launched:
            self._touch(t)

    # --- backfill ---------------------------------------------------------------------------
    def _bf_arm(self, t: float) -> None:
        """The backfill agent sleeps bf_interval_s after a pass, then re-checks every tick."""
        if self.bf_at is not None or self.bf is not None or not self.pending:
            return
        first = self.bf_last_end + self.cfg["bf_interval_s"]
        at = first if t <= first else first + math.ceil((t - first) / self.tick - 1e-9) * self.tick
        self.bf_at = at
        self._at(at, self._bf_wake)

    def _bf_wake(self, t: float) -> None:
        self.bf_at = None
        if not self.pending or self.last_update < self.bf_last_end:
            return                      # nothing new since the last pass (_more_work); _touch re-arms
        self.bf = _BackfillPass()
        self._lock(t, self._bf_run)

    def _bf_run(self, t: float):
        c, bp = self.cfg, self.bf
        if bp.stretches and self.last_update > bp.yielded_at:
            return 0.0, self._bf_done   # a job or node changed while the locks were yielded
        cost = bf_cycle_costs(c, self.fleet.nodes)
        res = float(c["bf_resolution_s"])
        window = c["bf_window_min"] * 60.0
        seg = 0.0
        if not bp.stretches:            # the base cost: the job queue and the node-space map
            bp.start, seg = t, cost.base
            bp.order = self._order(t, c["bf_max_job_test"])
            bp.reserved_from = np.full(self.fleet.nodes, np.inf)
        bp.stretches += 1
        stop = False
        launched: list = []
        # When each node is free for a reservation (free_at below), kept up to date through this
        # stretch's own launches and reservations rather than rebuilt for every job: nothing else
        # changes the fleet while the stretch holds the locks.
        s = self.state
        avail = s.up & np.isinf(bp.reserved_from)          # up and not reserved for a higher job
        busy_until = np.where(avail, self.node_end, np.inf)
        whole = (s.free_gpus == s.gpn) & avail
        n_avail = int(avail.sum())
        while bp.idx < len(bp.order):
            if seg >= c["bf_yield_interval_s"]:
                break
            now = t + seg
            if _whole_s(bp.start, now) >= c["bf_interval_s"]:      # bf_max_time (default bf_interval)
                stop = True
                break
            js = bp.order[bp.idx]
            bp.idx += 1
            if js.job.id not in self.pending:
                continue                # started or lost meanwhile
            seg += cost.test
            now += cost.test
            bp.tested += 1
            limit = self._limit(js)
            blocked = None                                 # would run into a higher job's reservation
            if now + limit > bp.reserved_min:
                blocked = bp.reserved_from < now + limit
            nodes = self._place(js, now, blocked)
            if nodes is not None:
                seg += cost.start
                now += cost.start
                launched.append(self._launch(js, nodes, now, "backfill"))
                busy_until[nodes] = np.where(avail[nodes], self.node_end[nodes], np.inf)
                whole[nodes] = (s.free_gpus[nodes] == s.gpn) & avail[nodes]
                bp.started += 1
                if c["bf_max_job_start"] and bp.started >= c["bf_max_job_start"]:
                    stop = True
                    break
                continue
            if js.job.gpus_per_member < self.state.gpn:
                continue
            m = js.job.members
            if n_avail < m:
                continue
            free_at = np.where(whole, now, busy_until)     # inf: down or reserved
            idx = earliest(free_at, m)
            start = math.ceil(float(free_at[idx[-1]]) / res) * res
            if start <= now + window:
                bp.reserved_from[idx] = start
                bp.reserved_min = min(bp.reserved_min, start)
                avail[idx] = whole[idx] = False
                busy_until[idx] = np.inf
                n_avail -= m
                self._count("bf_reservations")
        bp.work += seg
        done = stop or bp.idx >= len(bp.order)

        def after(tr: float) -> None:
            self._started(tr, launched)
            if done:
                self._bf_done(tr)
            else:
                bp.yielded_at = tr
                self._at(tr + c["bf_yield_sleep_s"], self._lock, self._bf_run)
        return seg, after

    def _bf_done(self, t: float) -> None:
        bp, self.bf = self.bf, None
        self.bf_cycles.append((bp.work, bp.tested))
        self.bf_last_end = t
        self._bf_arm(t)

    # --- observation ------------------------------------------------------------------------
    def _live_control_plane(self) -> dict:
        return {"pending_jobs": len(self.pending)}

    def control_plane(self) -> dict:
        def cycles(rows: list[tuple], prefix: str, width: int) -> dict:
            a = np.array(rows) if rows else np.zeros((1, width))
            out = {f"{prefix}_cycles": len(rows), f"{prefix}_mean_cycle_us": int(a[:, 0].mean() * 1e6),
                   f"{prefix}_max_cycle_us": int(a[:, 0].max() * 1e6),
                   f"{prefix}_mean_depth": round(float(a[:, -1].mean()), 2)}
            if a.shape[1] == 3:         # the main cycle: jobs tested, and the depth as sdiag counts it
                out[f"{prefix}_mean_tested"] = round(float(a[:, 1].mean()), 2)
            return out
        lu = np.array(self.leaves_used) if self.leaves_used else np.zeros(1)
        rpc = {k: {"count": len(v), "ave_time": int(np.mean(v) * 1e6) if v else 0,
                   "total_time": int(np.sum(v) * 1e6)} for k, v in self.rpcs.items()}
        return {**super().control_plane(), "rpc": rpc, **cycles(self.main_cycles, "main", 3),
                **cycles(self.bf_cycles, "bf", 2), "bf_backfilled_jobs": self.started_by["backfill"],
                "jobs_started_by": dict(self.started_by), "leaves_per_job_mean": round(float(lu.mean()), 4),
                "lock_busy_s": {k: round(v, 6) for k, v in self.lock_busy_s.items()},
                "busy_s": {"slurmctld-locks": round(sum(self.lock_busy_s.values()), 6)}}
