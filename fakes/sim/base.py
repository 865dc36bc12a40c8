"""What the four simulated schedulers share: timers, job bookkeeping, completion, chaos.

A SimTarget is a pure model: time only moves when the runner calls advance(now), every random
choice comes from a seeded numpy Generator, and nothing does I/O. Subclasses implement the
scheduling mechanism (`_enqueue`, `_on_release`, `_lose`) and schedule their own work through
`_at(t, fn)`.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from fakes.sim.state import ClusterState
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import stranded_gpus
from loadgen.model.job import Job
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.target import ChaosAction, Snapshot, Target, TargetContext

# the kinds every job goes through, as module names (`Kind.X` is an enum class attribute lookup)
SUBMITTED, BOUND, ADMITTED, STARTED, READY, FINISHED = (Kind.SUBMITTED, Kind.BOUND, Kind.ADMITTED, Kind.STARTED,
                                                        Kind.READY, Kind.FINISHED)


@dataclass(eq=False)
class JobState:
    job: Job
    bound: int = 0                  # members currently bound/allocated
    admitted_t: float | None = None
    running: bool = False
    done: bool = False
    runs: int = 0                   # times it started (restarts after eviction add one)
    run_token: int = 0              # invalidates a scheduled finish after an eviction
    extra: dict = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        return not self.running and not self.done


class SimTarget(Target):
    backend = "sim"
    timebase = "virtual"
    # On losing members: True = the whole gang is released and requeued (gang schedulers);
    # False = only the lost members are recreated, the rest keep their GPUs (pods, PG bundles).
    restart_whole_gang = True

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cfg = ctx.config
        self.fleet = ctx.fleet
        self.state = ClusterState(ctx.fleet)
        self.rng = np.random.default_rng(ctx.seed)
        self.jobs: dict[int, JobState] = {}
        self.waiting: dict[int, JobState] = {}    # submitted, not running, not done
        self.active: dict[int, JobState] = {}     # running
        self._timers: list = []
        # observed job events, (due, seq, Event) in (due, seq) order: timers of their own, kept
        # apart from the heap because they arrive in order (see _emit)
        self._seen: deque = deque()
        self._now = 0.0                           # the latest time advance() reached
        self._seq = itertools.count()
        self._prefill_ids = itertools.count(-1, -1)
        self.counters: dict[str, float] = {}
        # GPU sharing: the shapes of the jobs arrived so far, (share, GPUs per member, gpu_spec) ->
        # count: the target workload of the ATC '23 fragmentation measure
        self.shapes: dict[tuple[str, int, str], int] = {}
        # What a client of the real scheduler sees lags its decisions (a watch event, an squeue
        # poll, a ready callback): every job event reaches the runner this much later, in order.
        self.observe_s = float(self.cfg.get("observe_ms") or 0.0) / 1000.0
        self.release_s = float(self.cfg.get("release_ms") or 0.0) / 1000.0
        # Placement-to-ready: every member's node pulls the image (or has it), then its container
        # starts; the same model the real adapters apply through KWOK Stages, a prolog, actors.
        self.images = ImageCache(ctx.startup.image, ctx.fleet.nodes, ctx.seed)

    # --- time -------------------------------------------------------------------------------
    def _at(self, t: float, fn, *args) -> None:
        heapq.heappush(self._timers, (t, next(self._seq), fn, args))

    def _emit(self, t: float, job_id: int, kind: Kind, members: int = 0, reason: str = "",
              backend_t: float | None = None, nodes: tuple[int, ...] = ()) -> None:
        if self.observe_s > 0:
            # The event reaches the runner observe_s later, as a timer at that time would deliver
            # it. Events come at non-decreasing times, so their due times queue in order without
            # the heap; one that would not (none known) takes a heap timer. Either way it keeps
            # its place among the timers: (due, seq).
            due = t + self.observe_s
            seen = self._seen
            if seen and due < seen[-1][0]:
                self._at(due, self._observed, job_id, kind, members, reason, nodes)
            else:
                seen.append((due, next(self._seq), Event(due, job_id, kind, members, reason, None, tuple(nodes))))
        else:
            super()._emit(t, job_id, kind, members, reason, backend_t, nodes)

    def _observed(self, t: float, job_id: int, kind: Kind, members: int, reason: str,
                  nodes: tuple[int, ...] = ()) -> None:
        super()._emit(t, job_id, kind, members, reason, None, nodes)

    def next_wakeup(self) -> float | None:
        if self._seen:
            due = self._seen[0][0]
            return min(due, self._timers[0][0]) if self._timers else due
        return self._timers[0][0] if self._timers else None

    def _horizon(self) -> float:
        """The time of the next timer or observation, inf when there is none."""
        wake = self.next_wakeup()
        return float("inf") if wake is None else wake

    def advance(self, now: float) -> list[Event]:
        if now > self._now:
            self._now = now
        self._drain(now)
        return self._take()

    def _drain(self, now: float) -> None:
        """Fire every timer and emit every observation due by `now`, in (time, seq) order."""
        timers, seen, pop = self._timers, self._seen, heapq.heappop
        while True:
            if seen and seen[0][0] <= now:
                # the earlier of the two queues' heads by (time, seq): an observation or a timer
                due, seq, event = seen[0]
                if not timers or due < timers[0][0] or (due == timers[0][0] and seq < timers[0][1]):
                    seen.popleft()
                    self._out.append(event)
                    continue
            elif not timers or timers[0][0] > now:
                break
            t, _, fn, args = pop(timers)
            fn(t, *args)

    def run_instants(self, upcoming: float, end_s: float, limit: float, instant) -> None:
        """Each of this target's instants w (its next timer or observation) while w < upcoming,
        w <= end_s and w <= limit, one after another, exactly as advance(w) would run it; after
        each, `instant(w, events)` gets what it emitted and returns the new limit. A wrapper with
        timers of its own (loadgen/drive/lifecycle.py) runs the target's instants this way: one
        call per instant instead of next_wakeup and advance through every layer."""
        cls = type(self)
        if (cls.advance, cls.next_wakeup, cls._take) != (SimTarget.advance, SimTarget.next_wakeup, Target._take):
            # a subclass with its own: every instant through them
            wake = self.next_wakeup()
            while wake is not None and wake < upcoming and wake <= end_s and wake <= limit:
                limit = instant(wake, self.advance(wake))
                wake = self.next_wakeup()
            return
        timers, seen = self._timers, self._seen
        while True:
            if seen:
                w = seen[0][0]
                if timers and timers[0][0] < w:
                    w = timers[0][0]
            elif timers:
                w = timers[0][0]
            else:
                return
            if w >= upcoming or w > end_s or w > limit:
                return
            if w > self._now:
                self._now = w
            self._drain(w)
            events, self._out = self._out, []
            limit = instant(w, events)

    def _count(self, key: str, n: float = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    # --- job lifecycle ----------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        js = JobState(job)
        self.jobs[job.id] = js
        if self.state.slices is not None:
            key = (job.share, job.gpus_per_member, job.gpu_spec)
            self.shapes[key] = self.shapes.get(key, 0) + 1
        self.waiting[job.id] = js
        self._submit(js, now)
        return self._take()

    def _submit(self, js: JobState, now: float) -> None:
        """Default: accepted at once; subclasses with a control plane may delay or refuse."""
        self._emit(now, js.job.id, SUBMITTED)
        self._enqueue(js, now)

    def _enqueue(self, js: JobState, t: float) -> None:
        raise NotImplementedError

    def _on_release(self, t: float) -> None:
        """Resources came free at t (a finish, an eviction, a node back up)."""

    def _bind(self, js: JobState, t: float, n: int) -> None:
        """n more members bound at t; admits the gang when min_available is reached."""
        js.bound += n
        self._emit(t, js.job.id, BOUND, js.bound)
        if js.admitted_t is None or not js.running:
            if js.bound >= js.job.min_available:
                self._start(js, t)

    def _start(self, js: JobState, t: float) -> None:
        if js.admitted_t is None:
            js.admitted_t = t
        js.running = True
        self.waiting.pop(js.job.id, None)
        self.active[js.job.id] = js
        js.runs += 1
        js.run_token += 1
        nodes = tuple([h[0] for h in self.state.holdings.get(js.job.id, ())])
        self._emit(t, js.job.id, ADMITTED, js.bound, nodes=nodes)
        self._emit(t, js.job.id, STARTED, js.bound)
        ready = self.images.gang_ready_at(t, nodes)
        if ready <= t:
            self._emit(t, js.job.id, READY)
        else:
            self._at(ready, self._ready, js, js.run_token)
        self._at(t + js.job.duration_s, self._finish, js, js.run_token)

    def _ready(self, t: float, js: JobState, token: int) -> None:
        if token == js.run_token and js.running:
            self._emit(t, js.job.id, READY)

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """The whole gang back to the queue (a failed start under a requeue policy)."""
        js = self.jobs.get(job_id)
        if js is not None and js.running:
            self._lose(js, {n for n, _, _ in self.state.holdings.get(job_id, ())}, now, reason)
            self._on_release(now)
        return self._take()

    def _finish(self, t: float, js: JobState, token: int) -> None:
        """The job's work is done at t. Its resources come back release_ms later: the time a real
        backend takes to see it gone (Slurm's completion RPC and epilog, a placement group's
        removal reaching the GCS, pod deletion reaching the scheduler's cache)."""
        if token != js.run_token or js.done or not js.running:
            return
        js.running, js.done = False, True
        self.active.pop(js.job.id, None)
        self._emit(t, js.job.id, FINISHED)
        if self.release_s > 0:
            self._at(t + self.release_s, self._release, js)
        else:
            self._release(t, js)

    def _release(self, t: float, js: JobState) -> None:
        self.state.give_back(js.job.id)
        js.bound = 0
        self._finished(js, t)
        self._on_release(t)

    def _finished(self, js: JobState, t: float) -> None:
        """Hook for schedulers that keep per-job or per-tenant accounting."""

    # --- chaos (Target.chaos dispatches to these) ---------------------------------------------
    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        for _ in range(int(action.params.get("members", 1))):
            if not self.active:
                return
            running = sorted(self.active)
            js = self.active[running[int(self.rng.integers(len(running)))]]
            held = self.state.holdings.get(js.job.id, [])
            node = held[int(self.rng.integers(len(held)))][0]
            self._count("evictions")
            self._lose(js, {node}, now, "evicted")
        self._on_release(now)

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        nodes = set(int(n) for n in action.params["nodes"])
        for n in nodes:
            self.state.set_up(n, False)
        for owner in self.state.owners_on(nodes):
            if owner < 0:
                self.state.give_back(owner, None)
                continue
            js = self.jobs[owner]
            if js.done:         # finished, its resources on their way back: nothing to lose
                continue
            self._lose(js, nodes, now, "node-failure")
        self._count("node_failures", len(nodes))
        self._on_release(now)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        for n in action.params["nodes"]:
            self.state.set_up(int(n), True)
        self._on_release(now)

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        """Pinned foreign allocations (e.g. long 1-GPU jobs) scattered over chosen nodes."""
        dur = action.params.get("duration_s")
        for node, gpus in action.params["placements"]:
            if not self.state.up[node]:
                continue
            g = min(int(gpus), int(self.state.free_gpus[node]))
            if g <= 0:
                continue
            owner = next(self._prefill_ids)
            cpus = g * (self.fleet.cpus_per_node // self.fleet.gpus_per_node)
            self.state.take(owner, int(node), g, min(cpus, int(self.state.free_cpus[node])))
            if dur is not None:
                self._at(now + dur, self._unpin, owner)
        self._count("prefill_gpus", sum(int(g) for _, g in action.params["placements"]))

    def _unpin(self, t: float, owner: int) -> None:
        self.state.give_back(owner)
        self._on_release(t)

    def _restarts_whole(self, reason: str) -> bool:
        """Whether losing members for `reason` restarts the whole gang."""
        return self.restart_whole_gang

    def _lose(self, js: JobState, nodes: set[int], t: float, reason: str) -> None:
        """Members of js on `nodes` are gone. Gang schedulers restart the whole gang."""
        was_running = js.running
        js.running = False
        self.active.pop(js.job.id, None)
        self.waiting[js.job.id] = js
        js.run_token += 1
        if self._restarts_whole(reason):
            self.state.give_back(js.job.id)
            js.bound = 0
            self._emit(t, js.job.id, Kind.EVICTED, 0, reason)
            self._emit(t, js.job.id, Kind.REQUEUED, 0, reason)
            self._requeue(js, t, list(range(js.job.members)))
            return
        lost = 0
        for n in nodes:
            lost += sum(1 for h in self.state.holdings.get(js.job.id, []) if h[0] == n)
            self.state.give_back(js.job.id, n)
        js.bound -= lost
        self._emit(t, js.job.id, Kind.EVICTED, js.bound, reason)
        if was_running or lost:
            self._emit(t, js.job.id, Kind.REQUEUED, js.bound, reason)
        self._requeue(js, t, list(range(lost)))

    def _requeue(self, js: JobState, t: float, members: list[int]) -> None:
        raise NotImplementedError

    # --- observation ------------------------------------------------------------------------
    def _smallest_pending_member(self) -> int | None:
        return min((js.job.gpus_per_member for js in self.waiting.values()), default=None)

    def snapshot(self, now: float) -> Snapshot:
        partial = [js for js in self.waiting.values() if js.bound > 0]
        return Snapshot(
            t=now,
            gpus_allocated=self.state.allocated,
            gpus_partial=sum(js.bound * js.job.gpus_per_member for js in partial),
            gpus_stranded=stranded_gpus(self.state.free_view(), self._smallest_pending_member()),
            pending_jobs=len(self.waiting),
            partial_gangs=len(partial),
            running_jobs=len(self.active),
            control_plane={**{f"{k}_total": v for k, v in self.counters.items()}, **self._live_control_plane()},
            gpu_sharing=self._gpu_sharing(),
        )

    def _gpu_sharing(self) -> dict | None:
        if self.state.slices is None:
            return None
        pending = {(js.job.share, js.job.gpus_per_member, js.job.gpu_spec) for js in self.waiting.values()}
        figures = self.state.slices.figures(self.shapes, pending, self.state.up)
        figures["allocated_whole_gpus"] = self.state.allocated
        return figures

    def _live_control_plane(self) -> dict:
        """Control-plane gauges sampled with every snapshot (timeseries.csv's cp_* columns); the
        counters so far are added as <name>_total."""
        return {}

    def control_plane(self) -> dict:
        images = self.images.figures(self._now) if self.ctx.startup.image.pulls else {}
        return {"model": "simulated", **{k: round(v, 6) for k, v in sorted(self.counters.items())}, **images}

    def _fail(self, js: JobState, t: float, reason: str) -> None:
        """The job will never run: release what it holds and say why."""
        self.waiting.pop(js.job.id, None)
        self.active.pop(js.job.id, None)
        js.running, js.done = False, True
        self.state.give_back(js.job.id)
        js.bound = 0
        self._emit(t, js.job.id, Kind.FAILED, 0, reason)
        self._on_release(t)
