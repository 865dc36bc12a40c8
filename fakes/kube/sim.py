"""Simulated kube-scheduler: one pod at a time, no gang semantics unless coscheduling is on.

Mechanisms modeled (the ones that matter at 10k nodes), as kube-scheduler v1.36.1 does them
(pkg/scheduler/schedule_one.go, backend/queue/, client-go rest):
- PrioritySort activeQ; pods of one job sit together, so a job's pending pods form one entry.
- The scheduling cycle is serial, one pod at a time: Filter walks nodes from a rotating start index
  and stops after numFeasibleNodesToFind (percentageOfNodesToScore: adaptive 50 - nodes/125, floor
  5%, at least 100 nodes); only those are scored, and a single feasible node is not scored at all.
  An infeasible pod costs a walk over every node. A cycle costs cycle_base_ms + cycle_per_node_us
  per node Filter examined (+ filter_fail_us more per node it rejected, whose status the cycle keeps
  for its diagnosis) + score_per_node_us per node scored: the algorithm and Reserve/Permit,
  measured from scheduler_scheduling_algorithm_duration_seconds and the Filter and Score extension
  points (fakes/kube/costcurve.py). The 16 parallel Filter/Score workers are inside those
  per-node costs (wall time on this machine's cores), not a separate term. Each cycle takes its
  own time around that mean (cycle_sigma: lognormal, fitted to the algorithm histogram's buckets;
  fakes/sim/latency.py), and the pods queued behind a slow one wait for it. On a machine the
  control plane shares (control_plane.cores), a cycle that gets fewer cores than it uses
  (cycle_cores) while the rest of the control plane works on the pods just placed takes longer
  (fakes/sim/cores.py).
- Filter (NodeResourcesFit): GPUs, CPUs and memory; every pod requests POD_MEMORY_GIB and at
  least one cpu (traits.pod_cpus), what the real adapter (fakes/kube/target.py) sends.
- Score, in kube-scheduler's integer arithmetic: NodeResourcesFit LeastAllocated or
  MostAllocated over cpu (weight 1), memory (1) and nvidia.com/gpu (gpu_weight), plus the default
  profile's NodeResourcesBalancedAllocation over cpu and memory; `balanced_allocation` scores
  BalancedAllocation alone over cpu, memory and GPUs (the real adapter's profile). As of 1.36
  BalancedAllocation scores how much the pod changes the node's balance (`balanced_allocation`
  below), not the balance with the pod (1.34's, which the coscheduling twin keeps). Ties are
  broken at random, as selectHost does. When the fleet's GPUs go through DRA (`gpu_api`
  resolving to dra, fakes/kube/gpuapi.py), a node lists no nvidia.com/gpu and a pod requests
  none, so both plugins leave GPUs out (a resource the pod does not request is skipped, and so is
  its weight: noderesources/resource_allocation.go), and DynamicResources' Score adds the same 0
  to every node (it scores only firstAvailable subrequests; gangstorm's claims ask `exactly`).
- A pod reaches the scheduling queue only once its create returned (control_plane.create_ms); the
  client sends a job's pods client_create_ms apart (fakes/sim/kubefamily.py).
- The binding cycle is asynchronous: it does not hold the scheduling loop. Its bind goes through
  the client rate limiter (api_qps/burst), as do status patches for unschedulable pods, and lands
  write_ms after it goes out (its mean; write_sigma its spread). A bind the apiserver answers 429
  (max-requests-inflight, Retry-After: 1) is retried by client-go itself 1 s later, through the
  limiter again, up to 10 times; only then, or on any other refusal (etcd NOSPACE), does the
  scheduler see a binding error: it forgets the
  pod (its node comes free, which re-queues waiting pods as a pod deletion would) and puts it in
  the error backoff queue (no plugin rejected it), retried after 1, 2, 4 ... pod_max_backoff_s s
  (aligned down to the queue's 1 s window), never among the unschedulable pods.
- Unschedulable pods wait until a release could fit them (queueing hints), with per-pod
  exponential backoff (its expiry aligned down to the queue's 1 s window); one still backing off
  waits in the backoff queue, which the scheduler pops at once whenever the active queue is empty
  (SchedulerPopFromBackoffQ, on by default since 1.33; pods backing off after an error are not
  popped early). Without gang semantics a gang's pods bind independently, so partial gangs hold
  GPUs while they wait for the rest.
- coscheduling (scheduler-plugins): pods wait in Permit, holding their reservation, until
  minMember are reserved; on permit_timeout_s the whole group is rejected and backs off.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from fakes.kube.feasible import FeasibleNodes
from fakes.kube.gpuapi import choose_api
from fakes.kube.traits import KubeTraits, pod_cpus
from fakes.sim.base import JobState
from fakes.sim.controlplane import TokenBucket
from fakes.sim.cores import SharedCores
from fakes.sim.kubefamily import KubeFamily
from fakes.sim.latency import Latency, stream
from fakes.sim.state import ClusterState
from loadgen.model.fleet import Fleet
from loadgen.model.target import TargetContext

MIN_FEASIBLE_NODES = 100
MIN_PERCENT = 5
# client-go rest: a 429 with Retry-After is retried by the client (maxRetries 10, request.go); the
# apiserver's max-inflight filter answers Retry-After: 1 (apiserver server/filters/maxinflight.go)
CLIENT_MAX_RETRIES = 10
RETRY_AFTER_S = 1.0
BACKOFF_WINDOW_S = 1.0      # backoffQ ordering window: expiries truncated to it (SchedulerPopFromBackoffQ, on in 1.36)
MAX_NODE_SCORE = 100
SCORE_TABLE_CELLS = 1 << 22      # a pod shape's score table: at most 8 MiB (int16), else computed per pod
POD_MEMORY_GIB = 1          # memory request of every gang pod the real adapter creates
CYCLE_STREAM_TAG = 0xC7C1     # the cycle spread's own draws, apart from the apiserver latencies' (0x1A7E)


def num_feasible_nodes_to_find(nodes: int, percentage: int | None) -> int:
    """kube-scheduler's numFeasibleNodesToFind."""
    if nodes < MIN_FEASIBLE_NODES or percentage == 100:
        return nodes
    pct = percentage if percentage else max(50 - nodes // 125, MIN_PERCENT)
    return min(nodes, max(nodes * pct // 100, MIN_FEASIBLE_NODES))


class PodState(ClusterState):
    """ClusterState plus the memory requested on each node (GiB). Prefill pods ask for none, as
    the real adapter's pinned pods do."""

    def __init__(self, fleet: Fleet):
        super().__init__(fleet)
        self.mem = fleet.memory_gib_per_node
        self.free_mem = np.full(fleet.nodes, self.mem, dtype=np.int32)
        # nodes without memory for one more pod: 0 lets a filter skip the memory check
        self.mem_short = 0 if self.mem >= POD_MEMORY_GIB else fleet.nodes

    def take(self, owner: int, node: int, gpus: int, cpus: int, share=None, pick: str = "first") -> None:
        super().take(owner, node, gpus, cpus, share, pick)
        if owner >= 0:
            before = int(self.free_mem[node])
            self.free_mem[node] = before - POD_MEMORY_GIB
            if before >= POD_MEMORY_GIB > before - POD_MEMORY_GIB:
                self.mem_short += 1

    def give_back(self, owner: int, node: int | None = None) -> list[tuple[int, int, int]]:
        gone = super().give_back(owner, node)
        if owner >= 0:
            for n, _, _ in gone:
                before = int(self.free_mem[n])
                self.free_mem[n] = before + POD_MEMORY_GIB
                if before < POD_MEMORY_GIB <= before + POD_MEMORY_GIB:
                    self.mem_short -= 1
        return gone


def _least_requested(requested: np.ndarray, capacity: int) -> np.ndarray:
    return np.where(requested > capacity, 0, (capacity - requested) * MAX_NODE_SCORE // capacity)


def _most_requested(requested: np.ndarray, capacity: int) -> np.ndarray:
    return np.minimum(requested, capacity) * MAX_NODE_SCORE // capacity


class Scorer:
    """kube-scheduler's node score for one pod shape, in its integer arithmetic
    (noderesources/least_allocated.go, most_allocated.go, balanced_allocation.go of v1.36.1). Each
    resource's score and requested fraction (with and without the pod) is tabulated by the node's
    free amount of that resource.
    `gpus_scored` False (DRA): GPUs are no node resource, so only cpu and memory count, with
    their weights alone in the sum. `balance_change` False: BalancedAllocation as kube-scheduler
    1.34 scores it, the balance with the pod (scheduler-plugins v0.34.7 runs on kube-scheduler 1.34)."""

    def __init__(self, mode: str, gpu_weight: int, state: PodState, gpus: int, cpus: int, gpus_scored: bool = True,
                 balance_change: bool = True):
        self.balance_change = balance_change
        def requested(capacity: int, request: int) -> np.ndarray:
            return capacity - np.arange(capacity + 1, dtype=np.int64) + request

        pod = {"cpu": (cpus, state.cpn), "mem": (POD_MEMORY_GIB, state.mem)}
        if gpus_scored:
            pod["gpu"] = (gpus, state.gpn)
        req = {r: (requested(cap, ask), cap) for r, (ask, cap) in pod.items()}
        # requested fraction of each resource with the pod (`fraction`) and without it (`before`)
        self.fraction = {r: np.minimum(rq / cap, 1.0) for r, (rq, cap) in req.items()}
        self.before = {r: np.minimum((rq - pod[r][0]) / cap, 1.0) for r, (rq, cap) in req.items()}
        self.mode, self.weight_sum = mode, 2 + (gpu_weight if gpus_scored else 0)
        if mode != "balanced_allocation":
            fit = _least_requested if mode == "least_allocated" else _most_requested
            self.fit = {r: fit(rq, cap) * (gpu_weight if r == "gpu" else 1) for r, (rq, cap) in req.items()}
        # Every node's score looked up by its free (GPUs,) cpus and memory: one index per pod
        # instead of a dozen array operations over the candidates. Scores are 0..200 (int16).
        self.table = None
        dims = ((state.gpn + 1,) if gpus_scored else ()) + (state.cpn + 1, state.mem + 1)
        if math.prod(dims) <= SCORE_TABLE_CELLS:
            c = np.arange(state.cpn + 1)[:, None]
            m = np.arange(state.mem + 1)[None, :]
            g = np.arange(state.gpn + 1)[:, None, None] if gpus_scored else np.zeros(1, dtype=np.int64)
            if gpus_scored:
                c, m = c[None], m[None]
            full = np.broadcast_to(self.score(g, c, m), dims)
            if full.min() >= np.iinfo(np.int16).min and full.max() <= np.iinfo(np.int16).max:
                self.table = full.astype(np.int16)

    def __call__(self, free_gpus: np.ndarray, free_cpus: np.ndarray, free_mem: np.ndarray) -> np.ndarray:
        if self.table is None:
            return self.score(free_gpus, free_cpus, free_mem)
        if self.table.ndim == 3:
            return self.table[free_gpus, free_cpus, free_mem]
        return self.table[free_cpus, free_mem]

    def score(self, free_gpus: np.ndarray, free_cpus: np.ndarray, free_mem: np.ndarray) -> np.ndarray:
        """The score computed from the per-resource tables (what `table` holds for every free amount)."""
        return sum(self.plugins(free_gpus, free_cpus, free_mem).values())

    def plugins(self, free_gpus: np.ndarray, free_cpus: np.ndarray, free_mem: np.ndarray) -> dict[str, np.ndarray]:
        """Each scoring plugin's part, by kube-scheduler's plugin name (as -v=10 logs them)."""
        free = {"cpu": free_cpus, "mem": free_mem, "gpu": free_gpus}
        # NodeResourcesBalancedAllocation over cpu and memory, or (`balanced_allocation`, GPUs scored)
        # alone over cpu, memory and GPUs
        alone = self.mode == "balanced_allocation" and "gpu" in self.fraction
        names = ("cpu", "mem", "gpu") if alone else ("cpu", "mem")
        with_pod = [self.fraction[r][free[r]] for r in names]
        out = {"NodeResourcesBalancedAllocation": (
            balanced_allocation(with_pod, [self.before[r][free[r]] for r in names]) if self.balance_change
            else _balance(with_pod))}
        if self.mode != "balanced_allocation":
            fit = self.fit["cpu"][free_cpus] + self.fit["mem"][free_mem]
            if "gpu" in self.fraction:
                fit = fit + self.fit["gpu"][free_gpus]
            out["NodeResourcesFit"] = fit // self.weight_sum
        return out


def _balance(fractions: list[np.ndarray]) -> np.ndarray:
    """balancedResourceScore: (1 - std of the requested fractions) x 100, truncated; the std of two
    fractions is half their difference."""
    if len(fractions) == 2:
        std = np.abs((fractions[0] - fractions[1]) / 2)
    else:
        mean = sum(fractions) / len(fractions)
        std = np.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation(with_pod: list[np.ndarray], without_pod: list[np.ndarray]) -> np.ndarray:
    """kube-scheduler 1.36's BalancedAllocation (balancedResourceScorer): the change the pod makes to
    the node's balance, 50 + (50 + with - without) / 2, so about 75 wherever the pod leaves the
    balance as it was (1.34 scored the balance with the pod alone). with - without >= -50, so the
    integer division truncates as Go's does."""
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + _balance(with_pod) - _balance(without_pod)) // 2


class SimKube(KubeTraits, KubeFamily):
    name = "kube"
    restart_whole_gang = False    # a lost pod is recreated; its siblings keep their nodes
    balance_change = True         # kube-scheduler >= 1.36: BalancedAllocation scores the pod's change to the balance

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.state = PodState(ctx.fleet)
        c = self.cfg
        self.to_find = num_feasible_nodes_to_find(self.fleet.nodes, c["percentage_of_nodes_to_score"])
        self.start_index = 0
        self.limiter = TokenBucket(c["api_qps"], c["api_burst"])
        self.queue: list = []                       # (-priority, queued_at, seq, job_id)
        self.backoff: list = []                     # podBackoffQ: (expiry, -priority, queued_at, seq, job_id)
        self.unschedulable: dict = {}               # gpus per member (or a slice key) -> {job id: jobs}
        self.busy_until = 0.0
        self.cycle_busy_s = 0.0                     # time the scheduling loop spent in cycles
        self.tick_pending = False
        self.coscheduling = bool(c["coscheduling"])
        self.cycle_ms = []
        self.cycle_spread = Latency(1.0, float(c["cycle_sigma"]), stream(ctx.seed, CYCLE_STREAM_TAG))
        self.shared = SharedCores.from_config(ctx.control_plane)
        self.cycle_cores = float(c["cycle_cores"])
        self.nodes_examined = [0, 0]                # nodes Filter examined, nodes scored: totals
        self.scorers: dict[tuple[int, int], Scorer] = {}
        # under DRA no node lists a GPU resource: the node score never sees GPUs (fakes/kube/gpuapi.py)
        self.gpus_scored = choose_api(c, self.fleet, existing=False) != "dra"
        self._seqn = 0

    # --- queueing -----------------------------------------------------------------------
    def _enqueue(self, js: JobState, t: float) -> None:
        js.extra.update(assumed=0, reserved=0, attempts=0, queued=False, patched=False)
        self._activate(js, t)

    def _activate(self, js: JobState, t: float) -> None:
        if js.extra["queued"] or js.done or self._pending_pods(js) == 0:
            return
        js.extra["queued"] = True
        self._seqn += 1
        heapq.heappush(self.queue, (-js.job.priority, js.job.submit_s, self._seqn, js.job.id))
        self._kick(t)

    def _pending_pods(self, js: JobState) -> int:
        return js.job.members - js.bound - js.extra["assumed"] - js.extra["reserved"]

    def _kick(self, t: float) -> None:
        if not self.tick_pending and (self.queue or self.backoff):
            self.tick_pending = True
            self._at(max(t, self.busy_until), self._tick)

    def _next_job(self) -> JobState | None:
        """The active queue's head; when it is empty, the backoff queue's (SchedulerPopFromBackoffQ)."""
        while self.queue:
            jid = heapq.heappop(self.queue)[-1]
            js = self.jobs[jid]
            js.extra["queued"] = False
            return js
        while self.backoff:
            jid = heapq.heappop(self.backoff)[-1]
            js = self.jobs[jid]
            if js.extra.pop("in_backoff", False) and not js.extra["queued"]:
                self._count("popped_from_backoff")
                return js
        return None

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        js.extra["queued"] = False
        self._activate(js, t)

    def _park(self, js: JobState, t: float) -> None:
        """Unschedulable: wait for a release that could fit it, after backoff."""
        js.extra["attempts"] += 1
        js.extra["errors"] = 0            # a plugin rejected it: the error count starts over
        js.extra["failed_at"] = t
        if not js.extra["patched"]:       # PodScheduled=False condition, one patch per pod
            js.extra["patched"] = True
            for _ in range(self._pending_pods(js)):
                self.limiter.acquire(t)
                self._api_write(t, self.pod_bytes)
        self.unschedulable.setdefault(self._wait_key(js), {})[js.job.id] = js

    def _wait_key(self, js: JobState):
        """What a parked pod waits for: a node with this many free GPUs, or (sliced) its own shape."""
        j = js.job
        return (j.share, j.gpus_per_member, j.gpu_spec) if self.state.sliced(j) else j.gpus_per_member

    def _could_fit(self, key, group: dict[int, JobState]) -> bool:
        if isinstance(key, int):
            return self.state.count_ge(key) > 0
        return self.state.member_fits(next(iter(group.values())).job)

    def _on_release(self, t: float) -> None:
        for g in list(self.unschedulable):
            if not self._could_fit(g, self.unschedulable[g]) or not self.state.up.any():
                continue
            for js in self.unschedulable.pop(g).values():
                self._move_to_queue(js, t)

    def _move_to_queue(self, js: JobState, t: float) -> None:
        """An event may make it schedulable: to the active queue, or the backoff queue while its
        backoff (from its last failure) lasts."""
        if js.done:
            return
        ready = js.extra.get("failed_at", t) + self._backoff_s(js.extra["attempts"])
        ready -= ready % BACKOFF_WINDOW_S
        if ready <= t:
            js.extra["queued"] = False
            self._activate(js, t)
        elif not js.extra.get("in_backoff"):
            js.extra["in_backoff"] = True
            self._seqn += 1
            heapq.heappush(self.backoff, (ready, -js.job.priority, js.job.submit_s, self._seqn, js.job.id))
            self._at(ready, self._backoff_done, js)
            self._kick(t)

    def _backoff_done(self, t: float, js: JobState) -> None:
        """Its backoff ended in the backoff queue: to the active queue (unless popped meanwhile)."""
        if js.extra.pop("in_backoff", False):
            js.extra["queued"] = False
            self._activate(js, t)

    def _backoff_s(self, count: int) -> float:
        """backoffQueue.calculateBackoffDuration: initial x 2^(count-1), at most the maximum."""
        c = self.cfg
        return min(c["pod_initial_backoff_s"] * 2 ** min(count - 1, 30), c["pod_max_backoff_s"])

    # --- the scheduling cycle -----------------------------------------------------------
    def _cycle_s(self, examined: int, scored: int = 0, rejected: int = 0) -> float:
        """The serial cycle: fixed part, Filter over the nodes examined (more for each it rejected),
        Score over the nodes scored."""
        c = self.cfg
        return (c["cycle_base_ms"] + (c["cycle_per_node_us"] * examined + c["filter_fail_us"] * rejected
                                      + c["score_per_node_us"] * scored) / 1000.0) / 1000.0

    def _tick(self, t: float) -> None:
        self.tick_pending = False
        clock = start = max(t, self.busy_until)
        # Attempts that cannot succeed (no node has room for one member) change nothing but the
        # scheduler's clock, so they run inline until the next event; one that may bind ends the tick.
        horizon = self._horizon()
        while self.queue or self.backoff:
            js = self._next_job()
            if js is None:
                break
            if js.done or self._pending_pods(js) == 0:
                continue
            hopeless = not self.state.member_fits(js.job)
            clock = self._attempt(js, clock)
            if not hopeless or clock >= horizon:
                break
        self.busy_until = clock
        self.cycle_busy_s += clock - start
        self._kick(clock)

    def _candidates(self, g: int, c: int, job=None, feasible: FeasibleNodes | None = None) -> tuple[np.ndarray, int]:
        """First to_find feasible nodes from the rotating start index, and nodes examined (taken
        from `feasible` when the attempt keeps them)."""
        n = self.fleet.nodes
        if feasible is not None:
            return self._examined(feasible.first(self.start_index, self.to_find))
        s = self.state
        idx = (s.member_nodes(job) if job is not None else s.free_gpus >= g).nonzero()[0]
        if len(idx) == 0:
            return idx, n
        pos = int(idx.searchsorted(self.start_index))
        found: list[np.ndarray] = []
        have = 0
        # the other resources, a window at a time, over the nodes from the start index on, then
        # those before it (the rotated order, without copying it)
        for part in ((idx[pos:], idx[:pos]) if pos else (idx,)):
            i = 0
            while have < self.to_find and i < len(part):
                w = part[i:i + self.to_find - have]
                i += len(w)
                if s.nodes_down or s.mem_short:
                    w = w[s.up[w] & (s.free_cpus[w] >= c) & (s.free_mem[w] >= POD_MEMORY_GIB)]
                else:               # every node is up and has memory for a pod: cpus alone decide
                    w = w[s.free_cpus[w] >= c]
                found.append(w)
                have += len(w)
        return self._examined(found[0] if len(found) == 1 else np.concatenate(found))

    def _examined(self, order: np.ndarray) -> tuple[np.ndarray, int]:
        """The candidates and the nodes Filter examined to find them; moves the start index on."""
        n = self.fleet.nodes
        if len(order) == 0:
            return order, n
        examined = n if len(order) < self.to_find else (int(order[-1]) - self.start_index) % n + 1
        self.start_index = (self.start_index + examined) % n
        return order, examined

    def _score(self, nodes: np.ndarray, g: int, c: int, feasible: FeasibleNodes | None = None) -> int:
        s = self.state
        scorer = self.scorers.get((g, c))
        if scorer is None:
            scorer = self.scorers[(g, c)] = Scorer(self.cfg["scoring"], self.cfg["gpu_weight"], s, g, c,
                                                   self.gpus_scored, self.balance_change)
        if feasible is not None:        # `nodes` came from it: their scores, kept through the attempt
            score = feasible.scores(scorer)
        else:
            score = scorer(s.free_gpus[nodes], s.free_cpus[nodes], s.free_mem[nodes])
        best = np.flatnonzero(score == score.max())
        return int(nodes[best[int(self.rng.integers(len(best)))]] if len(best) > 1 else nodes[best[0]])

    def _attempt(self, js: JobState, clock: float) -> float:
        g, c = js.job.gpus_per_member, pod_cpus(js.job.cpus_per_member)
        pods = self._pending_pods(js)
        sliced = self.state.sliced(js.job)
        # a gang's pods: the feasible nodes and their scores once for the attempt, then kept per
        # placement (fakes/kube/feasible.py)
        feasible = None
        for i in range(pods):
            if not self.state.member_fits(js.job):
                # Every remaining pod of this job walks all nodes and fails.
                clock += (self._cycle_s(self.fleet.nodes, 0, self.fleet.nodes) * (pods - i)
                          * self.shared.stretch(clock, self.cycle_cores))
                self._count("failed_attempts", pods - i)
                self._park(js, clock)
                break
            if pods > 1 and not sliced and feasible is None:
                feasible = FeasibleNodes(self.state, self.state.free_mem, g, c, POD_MEMORY_GIB)
            nodes, examined = self._candidates(g, c, js.job if sliced else None, feasible)
            scored = len(nodes) if len(nodes) > 1 else 0       # one feasible node: no Score
            cycle = (self._cycle_s(examined, scored, examined - len(nodes)) * self.cycle_spread.draw()
                     * self.shared.stretch(clock, self.cycle_cores))
            self.nodes_examined[0] += examined
            self.nodes_examined[1] += scored
            clock += cycle
            self.cycle_ms.append(cycle * 1000)
            if len(nodes) == 0:
                self._count("failed_attempts", pods - i)
                self._park(js, clock)
                break
            if sliced:
                # A slice is an extended resource (MIG mixed strategy) or a DRA device, neither of
                # which NodeResourcesFit scores: the node score sees cpu, memory and (device plugin)
                # whole GPUs; the device plugin / DRA allocator then takes the first fitting GPU in order.
                node = self._score(nodes, 0 if js.job.share else g, c)
                self.state.take(js.job.id, node, g, c, js.job.gpu_share, "first")
            else:
                node = self._score(nodes, g, c, feasible)
                self.state.take(js.job.id, node, g, c)
                if feasible is not None:
                    feasible.placed(node)
            self._count("scheduled_pods")
            self.shared.placed(clock)
            if self.coscheduling:
                js.extra["reserved"] += 1
                self._permit(js, clock)
            else:
                js.extra["assumed"] += 1
                self._send_bind(js, clock)
        return clock

    # --- the binding cycle (asynchronous) -------------------------------------------------
    def _send_bind(self, js: JobState, t: float, retries: int = 0) -> None:
        """POST pods/binding through the client limiter; it lands write_ms after it goes out."""
        self._at(self.limiter.acquire(t) + self.write_latency.draw(), self._bound, js, retries)

    def _bound(self, t: float, js: JobState, retries: int = 0) -> None:
        if js.done or js.extra["assumed"] == 0:
            return
        result = self.cp.write(t, self.pod_bytes, 0.0)     # an update: the old revision becomes history
        if result == "429" and retries < CLIENT_MAX_RETRIES:
            # client-go retries it after Retry-After; the scheduler never sees this refusal
            self._count("bind_retries_429")
            self._send_bind(js, t + RETRY_AFTER_S, retries + 1)
            return
        js.extra["assumed"] -= 1
        if result != "ok":
            self._maybe_auto_recover(t)
            self._bind_failed(js, t)
            return
        js.extra["errors"] = 0
        self._count("binds")
        self._bind(js, t, 1)

    def _bind_failed(self, js: JobState, t: float) -> None:
        """handleBindingCycleError: unreserve and forget the pod (its node is free again, which moves
        waiting pods as an assigned pod's deletion does), then the failure handler: no plugin
        rejected it, so it goes to the error backoff queue (ConsecutiveErrorsCount), not to the
        unschedulable pods; its PodScheduled=False (SchedulerError) patch goes through the limiter."""
        held = self.state.holdings.get(js.job.id, [])
        if held:
            self.state.give_back(js.job.id, held[-1][0])
        self._count("bind_refused")
        js.extra["errors"] = js.extra.get("errors", 0) + 1
        if not js.extra.get("error_patched"):
            js.extra["error_patched"] = True
            self.limiter.acquire(t)
            self._api_write(t, self.pod_bytes)
        expiry = t + self._backoff_s(js.extra["errors"])
        expiry -= expiry % BACKOFF_WINDOW_S
        self._at(max(expiry, t), self._error_backoff_done, js)
        self._on_release(t)

    def _error_backoff_done(self, t: float, js: JobState) -> None:
        self._activate(js, t)         # no-op if the job's other pods keep it queued already

    # --- coscheduling -------------------------------------------------------------------
    def _permit(self, js: JobState, t: float) -> None:
        if js.bound + js.extra["reserved"] >= js.job.min_available:
            n = js.extra["reserved"]
            js.extra["reserved"] = 0
            js.extra["assumed"] += n
            js.extra.pop("permit_since", None)
            for _ in range(n):
                self._send_bind(js, t)
            return
        if "permit_since" not in js.extra:
            js.extra["permit_since"] = t
            js.extra["permit_round"] = js.extra.get("permit_round", 0) + 1
            self._at(t + self.cfg["permit_timeout_s"], self._permit_timeout, js, js.extra["permit_round"])

    def _permit_timeout(self, t: float, js: JobState, round_: int) -> None:
        if js.done or js.extra.get("permit_round") != round_ or "permit_since" not in js.extra:
            return
        js.extra.pop("permit_since")
        js.extra["reserved"] = 0
        self.state.give_back(js.job.id)
        self._count("permit_timeouts")
        self._park(js, t)
        self._on_release(t)

    # --- observation --------------------------------------------------------------------
    def snapshot(self, now: float):
        snap = super().snapshot(now)
        snap.control_plane.update(
            pending_pods=sum(self._pending_pods(js) for js in self.waiting.values() if "assumed" in js.extra),
            permit_waiting_gpus=sum(js.extra.get("reserved", 0) * js.job.gpus_per_member
                                    for js in self.waiting.values()))
        return snap

    def control_plane(self) -> dict:
        cyc = np.array(self.cycle_ms) if self.cycle_ms else np.zeros(1)
        return {**super().control_plane(),
                "num_feasible_nodes_to_find": self.to_find,
                "scheduling_cycle_ms_mean": round(float(cyc.mean()), 4),
                "scheduling_cycle_ms_p99": round(float(np.quantile(cyc, 0.99, method="inverted_cdf")), 4),
                "nodes_examined_mean": round(self.nodes_examined[0] / max(len(self.cycle_ms), 1), 2),
                "nodes_scored_mean": round(self.nodes_examined[1] / max(len(self.cycle_ms), 1), 2),
                "api_qps": self.cfg["api_qps"], "api_burst": self.cfg["api_burst"],
                "coscheduling": self.coscheduling,
                **({"cycles_short_of_cores": self.shared.stretches} if self.shared.on else {}),
                "busy_s": {**self.cp.busy_s(), "scheduling-cycle": round(self.cycle_busy_s, 6),
                           "client-qps-limiter": round(self.limiter.busy_s, 6)}}
