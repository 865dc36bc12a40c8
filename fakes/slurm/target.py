"""Real Slurm target: sbatch into a slurmctld driving one slurmd per emulated node.

Submission: the sbatch CLI from a small thread pool (see docs/slurm.md for why, and the rate it
sustains). Observation: one watcher thread runs one `squeue` per poll cycle, never one per job,
and a light `sdiag` every few seconds. A job holds its allocation with `sleep <duration>`;
admission is the first poll that sees it RUNNING (client observation, Event.t) and Slurm's own
StartTime (Event.backend_t). Slurm allocates a gang atomically, so partial gangs are always 0.
"""
from __future__ import annotations

import contextlib
import math
import queue
import random
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from fakes.real.base import RealTarget
from fakes.slurm.client import Row, SlurmClient
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.hostlist import expand
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, TargetContext

RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}
PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "CONFIGURING", "RESV_DEL_HOLD"}
DONE_OK = {"COMPLETED"}
DONE_BAD = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}
SDIAG_EVERY_S = 5.0
SDIAG_LIVE = ("main_last_cycle_us", "main_mean_cycle_us", "bf_last_cycle_us", "server_thread_count",
              "agent_queue_size", "jobs_pending")


@dataclass
class Tracked:
    job: Job
    slurm_id: int = 0
    submitted_t: float = 0.0            # client: sbatch returned
    seen: bool = False                  # squeue has listed it
    started: bool = False
    done: bool = False
    evicted: bool = False               # chaos already reported the eviction of this allocation
    nodes: list[str] = field(default_factory=list)
    starts: list[tuple[float, int | None, list[str]]] = field(default_factory=list)   # (obs t, StartTime, nodes)


class RealSlurm(RealTarget):
    name = "slurm"

    def __init__(self, ctx: TargetContext, workers: int | None = None, poll_s: float | None = None):
        super().__init__(ctx)
        self.workers = int(workers or self.cfg.get("submit_workers", 4))
        self.poll_s = float(poll_s or self.cfg.get("poll_s", 0.5))
        self.rng = random.Random(ctx.seed)
        self._tmp = None if ctx.run_dir else tempfile.mkdtemp(prefix="gangstorm-slurm-")
        # Scheduler timers (sched/bf intervals, cred_expire = the 120 s hold on a requeued job) stay
        # in Slurm's own wall seconds, like the latencies measured: only the workload is time-scaled.
        self.cluster = SlurmFleet(ctx.fleet, Path(ctx.run_dir) / "slurm" if ctx.run_dir else Path(self._tmp),
                                  config=dict(self.cfg))
        self.client = SlurmClient(self.cluster)
        self.index = {name: i for i, name in enumerate(self.cluster.names)}
        self.jobs: dict[int, Tracked] = {}          # by job.id
        self.by_slurm: dict[int, Tracked] = {}
        self.active: dict[int, Tracked] = {}        # by slurm id, not yet seen finished/failed
        self.prefill: dict[int, int] = {}           # slurm id -> GPUs (chaos fill, not workload)
        self.resume_at: list[tuple[float, list[str]]] = []     # (run s, drained nodes to resume)
        self._sbatched: queue.SimpleQueue = queue.SimpleQueue()   # (Tracked | None, slurm id | None, t, error, gpus)
        self._polls: queue.Queue = queue.Queue(maxsize=4)         # (t, squeue rows)
        self._inflight = 0
        self._rows: dict[int, Row] = {}
        self._sdiag: dict[str, Any] = {}
        self._stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._watcher: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self.cfg.get("accounting_storage", "none") != "none":
            raise RuntimeError("slurm/real: accounting_storage 'slurmdbd' is simulated only: this backend "
                               "runs no SlurmDBD (set schedulers.slurm.accounting_storage: none)")
        self.cluster.start(timeout_s=float(self.cfg.get("boot_timeout_s", 1200)))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sbatch")
        self._watcher = threading.Thread(target=self._watch, name="squeue", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._watcher is not None:
            self._watcher.join(timeout=30)
        self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- submission ------------------------------------------------------------------------
    def sbatch_argv(self, job: Job) -> list[str]:
        limit_min = max(1, math.ceil(job.duration_s * float(self.cfg.get("time_limit_factor", 1.5)) / 60))
        opts = ["--requeue", f"--time={limit_min}", f"--nodes={job.members}", "--ntasks-per-node=1",
                f"--gres=gpu:{job.gpus_per_member}"]
        if job.tenant:
            opts.append(f"--account={job.tenant}")
        if job.whole_node:
            opts.append("--exclusive")
        elif job.cpus_per_member:
            opts.append(f"--cpus-per-task={job.cpus_per_member}")
        switches = int(self.cfg.get("switches", 0) or 0)
        if switches > 0 and job.members >= int(self.cfg.get("switches_min_members", 8)):
            wait = int(round(float(self.cfg.get("switches_max_wait_s", 300)) / float(self.ctx.time_scale or 1.0)))
            opts.append(f"--switches={switches}@{wait // 60}:{wait % 60:02d}")
        return self.client.batch_argv(f"gs-{job.id}", job.duration_s, *opts)


    def submit(self, job: Job, now: float) -> list[Event]:
        self.clock.sync(now)
        self.jobs[job.id] = tr = Tracked(job)
        self._sbatch(tr, self.sbatch_argv(job))
        return self._take()

    def _sbatch(self, tr: Tracked | None, argv: list[str], gpus: int = 0) -> None:
        """sbatch on the pool; the outcome reaches _observe. tr=None: a prefill job of `gpus`."""
        def call() -> None:
            sid, err = self.client.sbatch(argv, self._stop)
            self._sbatched.put((tr, sid, self.clock.now(), err, gpus))
        self._inflight += 1
        self._pool.submit(call)

    # ---- observation -----------------------------------------------------------------------
    def _watch(self) -> None:
        sdiag_at = -SDIAG_EVERY_S
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                rows = self.client.squeue()
            except subprocess.TimeoutExpired:
                continue
            dt = time.monotonic() - t0
            if rows is not None:
                with contextlib.suppress(queue.Full):
                    self._polls.put((self.clock.now(), rows), timeout=1)
            if t0 - sdiag_at >= SDIAG_EVERY_S:
                sdiag_at, d = t0, self.client.sdiag()
                self._sdiag = {k: d.get(k) for k in SDIAG_LIVE}
            # At least as long as the call took: under load the observer never takes more than
            # half of slurmctld's job-lock time.
            self._stop.wait(max(self.poll_s - dt, dt))

    def _observe(self, now: float) -> None:
        for tr, sid, t, err, gpus in _drained(self._sbatched):
            self._inflight -= 1
            if tr is None:
                if sid is not None:
                    self.prefill[sid] = gpus
            elif sid is None:
                tr.done = True
                self._emit(t, tr.job.id, Kind.REJECTED, reason=err or "sbatch failed")
            else:
                tr.slurm_id, tr.submitted_t = sid, t
                self.by_slurm[sid] = self.active[sid] = tr
        for obs, rows in _drained(self._polls):
            self._rows = rows
            self._on_rows(obs, rows)
        due = [n for t, ns in self.resume_at if t <= now for n in ns]
        if due:
            self.resume_at = [(t, ns) for t, ns in self.resume_at if t > now]
            self.client.set_nodes(due, "RESUME")

    def _on_rows(self, obs: float, rows: dict[int, Row]) -> None:
        for sid, tr in list(self.active.items()):
            jid, row = tr.job.id, rows.get(sid)
            if tr.done:
                del self.active[sid]
                continue
            if row is None:
                if tr.seen:        # aged out of squeue between polls (MinJobAge): it ended
                    tr.done = True
                    self._emit(obs, jid, Kind.FINISHED, tr.job.members)
                continue
            if not tr.seen:
                tr.seen = True
                self._emit(tr.submitted_t, jid, Kind.SUBMITTED, backend_t=self.clock.from_epoch(row.submit))
            state, end = row.state, self.clock.from_epoch(row.end)
            if not tr.started and (state in RUNNING or (state in DONE_OK | DONE_BAD and state != "CANCELLED"
                                                        and row.start and row.nodelist)):
                tr.started, tr.nodes = True, expand(row.nodelist)
                tr.starts.append((obs, row.start, tr.nodes))
                for kind in (Kind.ADMITTED, Kind.STARTED):
                    self._emit(obs, jid, kind, tr.job.members, backend_t=self.clock.from_epoch(row.start))
            if state in PENDING and tr.started:
                tr.started, tr.nodes = False, []
                if not tr.evicted:      # Slurm requeued it on its own (node not responding, ...)
                    self._emit(obs, jid, Kind.EVICTED, 0, state.lower())
                tr.evicted = False
                self._emit(obs, jid, Kind.REQUEUED, reason=state.lower())
            if state in DONE_OK:
                tr.done = True
                self._emit(obs, jid, Kind.FINISHED, tr.job.members, backend_t=end)
            elif state in DONE_BAD:
                tr.done = True
                kind = Kind.FINISHED if state == "TIMEOUT" else Kind.FAILED
                self._emit(obs, jid, kind, reason=state.lower(), backend_t=end)

    # ---- state -----------------------------------------------------------------------------
    def _node_usage(self) -> dict[str, int]:
        """GPUs held per node name, as the last squeue listed them (prefill jobs included)."""
        used: dict[str, int] = {}
        for sid, row in self._rows.items():
            if row.state in RUNNING:
                tr = self.by_slurm.get(sid)
                per = tr.job.gpus_per_member if tr else self.prefill.get(sid, 0)
                for n in expand(row.nodelist):
                    used[n] = used.get(n, 0) + per
        return used

    def used_per_node(self) -> np.ndarray:
        used = np.zeros(self.fleet.nodes, dtype=np.int64)
        for name, gpus in self._node_usage().items():
            used[self.index[name]] += gpus
        return used

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        return ((tr.job, 0, tr.started) for tr in self.jobs.values() if not tr.done)

    def live_control_plane(self) -> dict[str, Any]:
        return {"sbatch_inflight": self._inflight, "squeue_calls": self.client.calls("squeue"), **self._sdiag}

    def control_plane(self) -> dict[str, Any]:
        d = self.client.sdiag()
        d["client"] = {**self.client.summary(), "submit_workers": self.workers, "poll_s": self.poll_s}
        d["fleet"] = {"nodes": self.fleet.nodes, "boot_s": self.cluster.boot_s}
        d["lock_busy_s"], d["busy_s"] = lock_busy(d)
        return d

    # ---- chaos -----------------------------------------------------------------------------
    def _nodes(self, action: ChaosAction) -> tuple[set[int], list[str]]:
        nodes = [int(i) for i in action.params.get("nodes", [])]
        return set(nodes), [self.fleet.node_name(i) for i in nodes]

    def _running(self) -> list[Tracked]:
        return [tr for tr in self.active.values() if tr.started and not tr.done]

    def _evict(self, victims: list[Tracked], now: float, reason: str) -> None:
        for tr in victims:
            tr.evicted = True
            self._emit(now, tr.job.id, Kind.EVICTED, 0, reason)

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        self.cluster.kill_slurmds(names)
        self.client.set_nodes(names, "DOWN", "gangstorm-node_fail")
        self.down |= nodes
        # Slurm requeues the whole batch job (--requeue): nothing stays bound, as in the sim.
        self._evict([tr for tr in self._running() if set(names) & set(tr.nodes)], now, "node_fail")

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        for n in names:
            self.cluster.start_slurmd(n)
        self.client.set_nodes(names, "RESUME")
        self.down -= nodes

    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        """Drain the nodes of random running jobs covering `members` members and requeue the jobs;
        the nodes are resumed drain_s (wall seconds once time-scaled) later."""
        want, running = int(action.params.get("members", 1)), self._running()
        self.rng.shuffle(running)
        victims, got = [], 0
        for tr in running:
            if got >= want:
                break
            victims.append(tr)
            got += tr.job.members
        if not victims:
            return
        nodes = sorted({n for tr in victims for n in tr.nodes})
        self.client.set_nodes(nodes, "DRAIN", "gangstorm-evict")
        self.client.requeue([tr.slurm_id for tr in victims])
        self.resume_at.append((now + float(action.params.get("drain_s", 10.0)) / float(self.ctx.time_scale or 1.0),
                               nodes))
        self._evict(victims, now, "evict")

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        dur = float(action.params.get("duration_s", 60))        # the runner already scaled it to wall seconds
        for node, gpus in action.params.get("placements", []):
            self._sbatch(None, self.client.batch_argv(
                "gs-prefill", dur, f"--nodelist={self.fleet.node_name(int(node))}", "--nodes=1",
                f"--gres=gpu:{int(gpus)}", f"--time={max(1, math.ceil(dur / 60) + 1)}"), int(gpus))


def _drained(q: queue.SimpleQueue | queue.Queue) -> Iterator:
    """What `q` holds now, without waiting."""
    while True:
        try:
            yield q.get_nowait()
        except queue.Empty:
            return


def lock_busy(sdiag: dict) -> tuple[dict[str, float], dict[str, float]]:
    """slurmctld's lock holders' time from sdiag: main and backfill cycles, and the submit and
    completion RPCs. sdiag's RPC time includes waiting for the locks, so this is an upper bound."""
    def cycles(prefix: str) -> float:
        return sdiag.get(f"{prefix}_cycles", 0) * sdiag.get(f"{prefix}_mean_cycle_us", 0) / 1e6
    rpc = sdiag.get("rpc") or {}
    rpc_s = sum(rpc.get(k, {}).get("total_time", 0) for k in ("REQUEST_SUBMIT_BATCH_JOB", "REQUEST_COMPLETE_BATCH_SCRIPT")) / 1e6
    parts = {"rpc": round(rpc_s, 6), "main": round(cycles("main"), 6), "backfill": round(cycles("bf"), 6)}
    return parts, {"slurmctld-locks": round(sum(parts.values()), 6)}
