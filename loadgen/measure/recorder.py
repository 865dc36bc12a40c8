"""The recorder: turns the stream of target events into per-job arrays and time integrals.

One recorder per (scheduler, run). It is the single measurement path for simulated and real
backends: admission is the first ADMITTED time minus the job's intended submit time.
"""
from __future__ import annotations

from math import isnan

import numpy as np

from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.startup import activity
from loadgen.model.startup.spec import ActivitySpec
from loadgen.model.target import Snapshot

SUBMITTED, BOUND, ADMITTED, STARTED, READY, TRAINING = (Kind.SUBMITTED, Kind.BOUND, Kind.ADMITTED, Kind.STARTED,
                                                        Kind.READY, Kind.TRAINING)
START_FAILED, EVICTED, REQUEUED, FINISHED, FAILED = (Kind.START_FAILED, Kind.EVICTED, Kind.REQUEUED, Kind.FINISHED,
                                                     Kind.FAILED)
ENDS = (Kind.FINISHED, Kind.FAILED, Kind.REJECTED)


class Recorder:
    def __init__(self, jobs: list[Job], activity_spec: ActivitySpec | None = None, pools: tuple = ()):
        self.jobs = jobs
        self.index = {j.id: i for i, j in enumerate(jobs)}
        n = len(jobs)
        self.submit = np.array([j.submit_s for j in jobs], dtype=float)
        # GPUs per member; on a fleet with node pools a slice counts at its compute share (a float)
        self.gpm = np.array([j.gpus_per_member for j in jobs], dtype=np.int64)
        if pools and any(j.share for j in jobs):
            from loadgen.input.workload import slice_size
            sizes = {s: slice_size(s, pools) for s in {j.share for j in jobs}}
            self.gpm = np.array([j.gpus_per_member * sizes[j.share] for j in jobs], dtype=float)
        self.members = np.array([j.members for j in jobs], dtype=np.int64)
        self.sent = np.full(n, np.nan)         # when the client actually submitted (wall runs)
        self.accepted = np.zeros(n, dtype=bool)
        self.accepted_t = np.full(n, np.nan)   # when the target accepted the submission
        self.admit = np.full(n, np.nan)
        self.backend_admit = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.failed = np.zeros(n, dtype=bool)
        self.rejected = np.zeros(n, dtype=bool)
        self.reason: dict[int, str] = {}
        self.evictions = np.zeros(n, dtype=np.int64)
        self.requeued_at: dict[int, float] = {}
        self.readmission: list[float] = []
        # members bound now, and whether the gang is admitted: per-event state, as Python lists (a
        # numpy element costs several times a list item to read or set); gpm and members likewise
        self.bound = [0] * n
        self.admitted_now = [False] * n
        self._gpm, self._members = self.gpm.tolist(), self.members.tolist()
        self.samples: list[Snapshot] = []
        self.chaos_log: list[dict] = []
        # time integrals (GPU-seconds)
        self.t = 0.0
        self.held_gpus = 0            # GPUs bound to workload jobs
        self.partial_gpus = 0         # ... of which in gangs not (or no longer) fully bound
        self.held_gpu_s = 0.0
        self.partial_gpu_s = 0.0
        self.window = (0.0, np.inf)
        self.held_gpu_s_window = 0.0
        self.partial_ever = np.zeros(n, dtype=bool)
        # work thrown away: GPU-seconds of runs cut short by an eviction or a node failure (the
        # gang restarts from scratch: no checkpoints are modelled)
        self.run_start = np.full(n, np.nan)
        self.lost_gpu_s = 0.0
        # placement: where each job's first admission put its members, and every run's nodes and
        # length (closed at finish, eviction, failure or the end), for leaf/spine crossing
        self.first_nodes: dict[int, tuple[int, ...]] = {}
        self.run_nodes: dict[int, tuple[int, ...]] = {}
        self.runs: list[tuple[int, tuple[int, ...], float]] = []    # (job index, nodes, seconds)
        # the budgets after admission: first READY (every member's container runs) and first
        # TRAINING (rendezvous done); failed rendezvous attempts per job
        self.ready = np.full(n, np.nan)
        self.training = np.full(n, np.nan)
        self.start_failures = np.zeros(n, dtype=np.int64)
        # GPU activity (loadgen/model/startup/activity.py): SM-active GPU-seconds of training runs, whole
        # run and inside the window, closed when a training run ends
        self.activity = activity_spec or ActivitySpec()
        self.train_since = np.full(n, np.nan)
        self.active_gpu_s = 0.0
        self.active_gpu_s_window = 0.0
        self.on_sample: list = []       # callables (recorder, snapshot) after each sample (exposition)

    def set_window(self, start: float, end: float) -> None:
        self.window = (float(start), float(end))

    def _integrate(self, t: float) -> None:
        t = float(t)
        if t <= self.t:
            return
        dt = t - self.t
        self.held_gpu_s += self.held_gpus * dt
        self.partial_gpu_s += self.partial_gpus * dt
        lo, hi = max(self.t, self.window[0]), min(t, self.window[1])
        if hi > lo:
            self.held_gpu_s_window += self.held_gpus * (hi - lo)
        self.t = t

    def _set_bound(self, i: int, bound: int, admitted: bool) -> None:
        gpm = self._gpm[i]
        old_held = self.bound[i] * gpm
        old_partial = old_held if not self.admitted_now[i] else 0
        self.bound[i] = int(bound)
        self.admitted_now[i] = admitted
        new_held = int(bound) * gpm
        new_partial = new_held if not admitted else 0
        if new_partial > 0:
            self.partial_ever[i] = True
        self.held_gpus += new_held - old_held
        self.partial_gpus += new_partial - old_partial

    def sent_at(self, job_id: int, t: float) -> None:
        self.sent[self.index[job_id]] = t

    def record(self, events: list[Event]) -> None:
        index = self.index
        for e in events:
            i = index.get(e.job_id)
            if i is None:
                continue
            if e.t > self.t:
                self._integrate(e.t)
            k = e.kind
            if k is SUBMITTED:
                if not self.accepted[i]:
                    self.accepted_t[i] = e.t
                self.accepted[i] = True
            elif k is BOUND:
                self._set_bound(i, e.members, self.admitted_now[i])
            elif k is ADMITTED:
                if isnan(self.run_start[i]):
                    self.run_start[i] = e.t
                if e.nodes:
                    self.first_nodes.setdefault(i, tuple(e.nodes))
                    self.run_nodes[i] = tuple(e.nodes)
                self._set_bound(i, max(e.members, self.bound[i]), True)
                if isnan(self.admit[i]):
                    self.admit[i] = e.t
                    if e.backend_t is not None:
                        self.backend_admit[i] = e.backend_t
                if e.job_id in self.requeued_at:
                    self.readmission.append(e.t - self.requeued_at.pop(e.job_id))
            elif k is STARTED:
                pass
            elif k is READY:
                if isnan(self.ready[i]):
                    self.ready[i] = e.t
            elif k is TRAINING:
                if isnan(self.training[i]):
                    self.training[i] = e.t
                if isnan(self.train_since[i]):
                    self.train_since[i] = e.t
            elif k is START_FAILED:
                self.start_failures[i] += 1
            elif k is EVICTED:
                self.evictions[i] += 1
                self._end_run(i, e.t)
                if not isnan(self.run_start[i]):
                    self.lost_gpu_s += (e.t - self.run_start[i]) * self._members[i] * self._gpm[i]
                    self.run_start[i] = np.nan
                self._set_bound(i, e.members, False)
            elif k is REQUEUED:
                self.requeued_at.setdefault(e.job_id, e.t)
            elif k in ENDS:
                self._end_run(i, e.t)
                self._set_bound(i, 0, False)
                if k is FINISHED:
                    self.finish[i] = e.t
                else:
                    (self.failed if k is FAILED else self.rejected)[i] = True
                    self.reason[e.job_id] = e.reason

    def _end_run(self, i: int, t: float) -> None:
        """The run that started at run_start[i] on run_nodes[i] ends at t (placement GPU-seconds,
        and the SM-active GPU-seconds of its training)."""
        since = self.train_since[i]
        if not isnan(since):
            gpus = self._members[i] * self._gpm[i]
            self.active_gpu_s += gpus * activity.seconds(self.activity, since, since, t)
            lo, hi = self.window
            self.active_gpu_s_window += gpus * activity.seconds(self.activity, since, max(since, lo), min(t, hi))
            self.train_since[i] = np.nan
        nodes = self.run_nodes.pop(i, None)
        if nodes and not isnan(self.run_start[i]):
            self.runs.append((i, nodes, max(0.0, t - float(self.run_start[i]))))

    def sample(self, snap: Snapshot) -> None:
        self._integrate(snap.t)
        self.samples.append(snap)
        for fn in self.on_sample:
            fn(self, snap)

    def subset(self, keep: np.ndarray) -> Recorder:
        """A recorder of only the jobs at the sorted indices `keep` (the jobs a run cut short had
        sent), with what was recorded for them; run-wide figures (samples, time integrals, chaos)
        are shared, as the kept jobs are the only ones that held anything."""
        keep = np.asarray(keep, dtype=np.int64)
        out = Recorder([self.jobs[i] for i in keep], self.activity)
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray) and value.shape == (len(self.jobs),):
                setattr(out, name, value[keep].copy())
        out._gpm, out._members = out.gpm.tolist(), out.members.tolist()
        out.bound = [self.bound[i] for i in keep.tolist()]
        out.admitted_now = [self.admitted_now[i] for i in keep.tolist()]
        where = {int(i): k for k, i in enumerate(keep)}
        ids = {self.jobs[i].id for i in keep}
        out.reason = {j: r for j, r in self.reason.items() if j in ids}
        out.requeued_at = {j: t for j, t in self.requeued_at.items() if j in ids}
        out.first_nodes = {where[i]: n for i, n in self.first_nodes.items() if i in where}
        out.run_nodes = {where[i]: n for i, n in self.run_nodes.items() if i in where}
        out.runs = [(where[i], n, s) for i, n, s in self.runs if i in where]
        for name in ("readmission", "samples", "chaos_log", "t", "held_gpus", "partial_gpus", "held_gpu_s",
                     "partial_gpu_s", "window", "held_gpu_s_window", "lost_gpu_s", "active_gpu_s",
                     "active_gpu_s_window"):
            setattr(out, name, getattr(self, name))
        return out

    def close(self, t: float) -> None:
        self._integrate(t)
        for i in set(self.run_nodes) | set(np.flatnonzero(~np.isnan(self.train_since)).tolist()):
            self._end_run(i, t)           # still running at the end: counted up to t
