"""Real Slurm target: sbatch into a slurmctld driving one slurmd per emulated node.

Submission: the sbatch CLI from a small thread pool (see docs/slurm.md for why, and the rate it
sustains). Observation: one watcher thread runs one `squeue` per poll cycle, never one per job,
and a light `sdiag` every few seconds. A job holds its allocation with `sleep <duration>`;
admission is the first poll that sees it RUNNING (client observation, Event.t) and Slurm's own
StartTime (Event.backend_t). Slurm allocates a gang atomically, so partial gangs are always 0.

Placement-to-ready (a startup spec with an image to pull or a container start): the launched
cluster runs a prolog on every allocated node (fakes/slurm/prolog.py) that asks the run's ready
service (fakes/slurm/ready.py) how long the node needs, from the run's one ImageCache, sleeps that
long and reports done. READY is the last node's done of the job's current attempt (Slurm's
SLURM_JOB_RESTART_COUNT tells attempts apart). Without a startup spec, or attached to a cluster
whose slurm.conf the run does not write, READY is the ADMITTED instant. restart() requeues a
running job as a whole (scontrol requeue).

Launched (a SlurmFleet of its own) or attached (ctx.existing.slurm_conf: a cluster gangstorm did
not start). Either way every job carries the run label (--comment=gangstorm.io/run=<label>, name
gs-<label>-<id>). Attached, the run drives the first fleet.nodes nodes of the partition (sorted),
never touches a job without its label, acts on nodes only through scontrol (DRAIN, DOWN, RESUME;
never on a node a foreign job runs on), and at stop() cancels its jobs and resumes its nodes.
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
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from fakes.real.base import RealTarget
from loadgen.model.signals import signals_held
from fakes.slurm import prolog
from fakes.slurm.client import Row, SlurmClient
from fakes.slurm.conf import PROLOG_KEY
from fakes.slurm.existing import ExistingSlurm, NodeInfo
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.hostlist import expand
from fakes.slurm.ready import ReadyService, Report
from loadgen.model.errors import BackendError
from loadgen.model.events import Event, Kind
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.job import Job
from loadgen.model.target import (RUN_LABEL, ChaosAction, ChaosUnsupported, ClusterRefused, ForeignWorkloads,
                                  TargetContext, run_label)

RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}
PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "CONFIGURING", "RESV_DEL_HOLD"}
DONE_OK = {"COMPLETED"}
DONE_BAD = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}
SDIAG_EVERY_S = 5.0
SDIAG_LIVE = ("main_last_cycle_us", "main_mean_cycle_us", "bf_last_cycle_us", "server_thread_count",
              "agent_queue_size", "jobs_pending")


@dataclass
class Attempt:
    """What the prologs of one allocation of a job reported (Slurm's restart count = the attempt)."""
    restart: int
    placed: float                   # the first node's prolog asked: the allocation as the nodes saw it
    gang_ready: float               # the model's ready time of the allocation's last node
    done: dict[str, float] = field(default_factory=dict)    # node -> its prolog reported done


@dataclass
class Tracked:
    job: Job
    slurm_id: int = 0
    submitted_t: float = 0.0            # client: sbatch returned
    seen: bool = False                  # squeue has listed it
    started: bool = False
    done: bool = False
    evicted: bool = False               # chaos already reported the eviction of this allocation
    restarting: bool = False            # restart() reported EVICTED and REQUEUED; Slurm has not shown it pending yet
    # The lowest Slurm restart count the current attempt can have: raised at each requeue seen, so
    # what the prologs of an earlier attempt still report never makes the next one READY.
    floor: int = 0
    admitted_t: float = 0.0             # ADMITTED of the current attempt
    ready: bool = False                 # READY reported in the current attempt
    attempt: Attempt | None = None      # the latest attempt the prologs reported
    nodes: list[str] = field(default_factory=list)
    starts: list[tuple[float, int | None, list[str]]] = field(default_factory=list)   # (obs t, StartTime, nodes)


class RealSlurm(RealTarget):
    name = "slurm"

    def __init__(self, ctx: TargetContext, workers: int | None = None, poll_s: float | None = None):
        super().__init__(ctx)
        self.workers = int(workers or self.cfg.get("submit_workers", 4))
        self.poll_s = float(poll_s or self.cfg.get("poll_s", 0.5))
        self.rng = random.Random(ctx.seed)
        self.label = run_label(ctx.run_id)
        self.comment = f"{RUN_LABEL}={self.label}"        # on every job this run submits
        existing = ctx.existing if ctx.existing and ctx.existing.slurm_conf else None
        self.attached = existing is not None
        self.allow_foreign = bool(existing and existing.allow_foreign)
        # Nothing is created before start(): --dry-run and the preflight construct targets too.
        self._tmp: Path | None = None
        self.cluster: SlurmFleet | ExistingSlurm
        if existing:
            self.cluster = ExistingSlurm(Path(existing.slurm_conf), existing.partition)
            self.names: list[str] = []                  # the partition's first fleet.nodes nodes, read at start()
        else:
            if not ctx.run_dir:
                self._tmp = Path(tempfile.gettempdir()) / f"gangstorm-slurm-{uuid.uuid4().hex[:12]}"
            # Scheduler timers (sched/bf intervals, cred_expire = the 120 s hold on a requeued job) stay
            # in Slurm's own wall seconds, like the latencies measured: only the workload is time-scaled.
            self.cluster = SlurmFleet(ctx.fleet, Path(ctx.run_dir) / "slurm" if ctx.run_dir else self._tmp,
                                      config=dict(self.cfg))
            self.names = self.cluster.names
        self.client = SlurmClient(self.cluster)
        self.index = {name: i for i, name in enumerate(self.names)}
        # Placement-to-ready: one image model for the run, answered to the prologs by the ready service.
        image = ctx.startup.image
        self.images = ImageCache(image, self.fleet.nodes, ctx.seed)
        self.startup = image.pulls or image.container_start_s > 0
        self.ready: ReadyService | None = None
        self.prolog_path: Path | None = None
        if self.startup and not self.attached:
            self.prolog_path = prolog.script_path(self.cluster.run_dir)
            self.cluster.config[PROLOG_KEY] = str(self.prolog_path)
            self.ready = ReadyService(self.images, self.index, self.clock.now)
        self.ready_log: list[dict[str, float]] = []     # per prolog READY: job, restart, placed, model, done, t
        self.stale_dones = 0                # prolog reports of an attempt already requeued
        self.restarts = 0                   # restart() requeues
        self._early: list[Report] = []      # reports of jobs whose sbatch result is not drained yet
        self.partition: str | None = None               # attached: the partition the jobs go to
        self.excluded: list[str] = []                   # attached: partition nodes past the fleet
        self.held: dict[str, str] = {}                  # node -> "DRAIN" | "DOWN" this run set, not yet resumed
        self.chaos_skipped: list[dict[str, Any]] = []   # attached: nodes spared because a foreign job ran there
        self.left_behind: dict[str, Any] | None = None  # attached: what stop() could not remove (counts)
        self.left_detail: dict[str, Any] = {}           # ... which ones, or why they could not be counted
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
        if self.attached:
            self._attach()
        else:
            if self.cfg.get("accounting_storage", "none") != "none":
                raise RuntimeError("slurm/real: accounting_storage 'slurmdbd' is simulated only: this backend "
                                   "runs no SlurmDBD (set schedulers.slurm.accounting_storage: none)")
            if self.ready is not None:      # the prolog names the service's port: bound first
                self.ready.start()
                prolog.write_script(self.prolog_path, self.ready.port)
            try:
                self.cluster.start(timeout_s=float(self.cfg.get("boot_timeout_s", 1200)))
            except BaseException:
                if self.ready is not None:
                    self.ready.stop()
                raise
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sbatch")
        self._watcher = threading.Thread(target=self._watch, name="squeue", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._watcher is not None:
            self._watcher.join(timeout=30)
        if self.attached:
            self._remove_own()
            return
        self.cluster.stop()
        if self.ready is not None:          # after the fleet: no prolog is left to ask
            self.ready.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- an existing cluster ---------------------------------------------------------------
    def preflight(self) -> list[str]:
        """Attached: read-only look at the partition and the queue (see Target.preflight)."""
        if not self.attached:
            return []
        part, nodes = self.cluster.nodes()
        jobs = self.cluster.queued()
        foreign = [j.id for j in jobs if not j.comment.startswith(RUN_LABEL + "=")]
        if foreign and not self.allow_foreign:
            raise ForeignWorkloads(f"{self.cluster.conf}: {len(foreign)} jobs gangstorm did not create (ids "
                                   f"{_few(foreign)}): pass --allow-foreign-workloads to run next to them "
                                   f"(they are never touched)")
        self._check_fits(part, nodes)
        states = ", ".join(f"{k} {s}" for s, k in sorted(Counter(n.state for n in nodes).items()))
        others = len(jobs) - len(foreign)
        n = self.fleet.nodes
        return [f"{len(nodes)} nodes in partition {part} ({states}), {len(foreign)} foreign jobs"
                + (f", {others} jobs of other gangstorm runs" if others else ""),
                f"the run drives {n} of them ({nodes[0].name} .. {nodes[n - 1].name}, {self.fleet.gpus_per_node} "
                f"GPUs each)" + (f"; its jobs exclude the other {len(nodes) - n}" if len(nodes) > n else "")]

    def after_stop(self) -> dict[str, Any]:
        return {} if self.left_behind is None else {"left_behind": self.left_behind, **self.left_detail}

    def _check_fits(self, part: str, nodes: list[NodeInfo]) -> None:
        n, g = self.fleet.nodes, self.fleet.gpus_per_node
        if len(nodes) < n:
            raise ClusterRefused(f"{self.cluster.conf}: partition {part} has {len(nodes)} nodes, the scenario's "
                                 f"fleet needs {n} (pass --nodes {len(nodes)} or fewer, or another --partition)")
        short = [x for x in nodes[:n] if x.gpus < g]
        if short:
            raise ClusterRefused(f"{self.cluster.conf}: partition {part}: node {short[0].name} has {short[0].gpus} "
                                 f"GPUs (gres), the scenario's nodes have {g} ({len(short)} such nodes among the "
                                 f"first {n})")

    def _attach(self) -> None:
        self.preflight()                                # the same refusals when not started by the CLI
        self.partition, nodes = self.cluster.nodes()
        self._check_fits(self.partition, nodes)
        self.names = [x.name for x in nodes[:self.fleet.nodes]]
        self.excluded = [x.name for x in nodes[self.fleet.nodes:]]
        self.index = {name: i for i, name in enumerate(self.names)}

    def _scope(self) -> list[str]:
        """sbatch options every job of the run carries: its label and, attached, where it may run."""
        opts = [f"--comment={self.comment}"]
        if self.attached:
            opts.append(f"--partition={self.partition}")
        if self.excluded:
            opts.append(f"--exclude={','.join(self.excluded)}")
        return opts

    def _own_jobs(self) -> list[str]:
        return [j.id for j in self.cluster.queued() if j.comment == self.comment]

    def _remove_own(self) -> None:
        """Cancel every job carrying the run's label, resume every node it drained or downed, and
        record what is still there in left_behind. The cluster itself keeps running."""
        with signals_held():
            try:
                own = self._own_jobs()
                self.client.cancel(own)
                if self.held:
                    self.client.set_nodes(sorted(self.held), "RESUME")
                deadline = time.monotonic() + 30
                while True:
                    own = self._own_jobs()
                    stuck = [x.name for x in self.cluster.nodes()[1] if x.name in self.held
                             and ("drain" in x.state or "down" in x.state)]
                    if (not own and not stuck) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                self.left_behind = {"jobs": len(own), "nodes_not_resumed": len(stuck)}
                if own or stuck:
                    self.left_detail = {"left_behind_jobs": own[:50], "left_behind_nodes": stuck[:50]}
                self.held = {n: s for n, s in self.held.items() if n in stuck}
            except BackendError as e:       # the controller stopped answering: nothing could be counted
                self.left_behind = {"jobs": None, "nodes_not_resumed": None}
                self.left_detail = {"stop_error": str(e)}

    # ---- submission ------------------------------------------------------------------------
    def sbatch_argv(self, job: Job) -> list[str]:
        limit_min = max(1, math.ceil(job.duration_s * float(self.cfg.get("time_limit_factor", 1.5)) / 60))
        opts = ["--requeue", f"--time={limit_min}", f"--nodes={job.members}", "--ntasks-per-node=1",
                f"--gres=gpu:{job.gpus_per_member}"]
        if job.tenant and not self.attached:      # an existing cluster may enforce its own accounts
            opts.append(f"--account={job.tenant}")
        if job.whole_node:
            opts.append("--exclusive")
        elif job.cpus_per_member:
            opts.append(f"--cpus-per-task={job.cpus_per_member}")
        switches = int(self.cfg.get("switches", 0) or 0)
        if switches > 0 and job.members >= int(self.cfg.get("switches_min_members", 8)):
            wait = int(round(float(self.cfg.get("switches_max_wait_s", 300)) / float(self.ctx.time_scale or 1.0)))
            opts.append(f"--switches={switches}@{wait // 60}:{wait % 60:02d}")
        argv = self.client.batch_argv(f"gs-{self.label}-{job.id}", job.duration_s, *self._scope(), *opts)
        if self.prolog_path is not None:    # hold for the duration counted from allocation, pull included
            assert argv[-2] == "--wrap", argv
            argv[-1] = prolog.job_command(self.prolog_path, job.duration_s)
        return argv

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
            if self.ready is not None and sid is not None:      # after put: a report never precedes it
                self.ready.register(sid, workload=tr is not None)
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
        if self.ready is not None:
            self._on_reports(self._early + self.ready.drain())
        for obs, rows in _drained(self._polls):
            self._rows = rows
            self._on_rows(obs, rows)
        due = [n for t, ns in self.resume_at if t <= now for n in ns]
        if due:
            self.resume_at = [(t, ns) for t, ns in self.resume_at if t > now]
            due = sorted({n for n in due if self.held.get(n) == "DRAIN"})   # a node failed since stays down
            for n in due:
                del self.held[n]
            if due:
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
                start = self.clock.from_epoch(row.start)
                nodes = tuple(self.index[n] for n in tr.nodes if n in self.index)
                self._emit(obs, jid, Kind.ADMITTED, tr.job.members, backend_t=start, nodes=nodes)
                self._emit(obs, jid, Kind.STARTED, tr.job.members, backend_t=start)
                tr.admitted_t, tr.ready = obs, False
                self._check_ready(tr)
            if state in PENDING and tr.started:
                tr.started, tr.nodes = False, []
                if not tr.restarting:
                    self._raise_floor(tr)
                if not tr.evicted:      # Slurm requeued it on its own (node not responding, ...)
                    self._emit(obs, jid, Kind.EVICTED, 0, state.lower())
                tr.evicted = False
                if tr.restarting:       # restart() reported the requeue already
                    tr.restarting = False
                else:
                    self._emit(obs, jid, Kind.REQUEUED, reason=state.lower())
            if state in DONE_OK:
                tr.done = True
                self._emit(obs, jid, Kind.FINISHED, tr.job.members, backend_t=end)
            elif state in DONE_BAD:
                tr.done = True
                kind = Kind.FINISHED if state == "TIMEOUT" else Kind.FAILED
                self._emit(obs, jid, kind, reason=state.lower(), backend_t=end)

    # ---- placement-to-ready ----------------------------------------------------------------
    def _on_reports(self, reports: list[Report]) -> None:
        self._early = []
        for r in reports:
            tr = self.by_slurm.get(r.slurm_id)
            if tr is None:
                self._early.append(r)
                continue
            a = tr.attempt
            if r.kind == "start":
                if a is None or r.restart > a.restart:
                    tr.attempt = Attempt(r.restart, r.t, r.gang_ready_t)
            elif a is not None and r.restart == a.restart and r.restart >= tr.floor:
                a.done[r.node] = r.t
            else:               # a prolog of an attempt already requeued (it runs to its end)
                self.stale_dones += 1
            self._check_ready(tr)

    @staticmethod
    def _raise_floor(tr: Tracked) -> None:
        """Once per requeue: Slurm counts it (SLURM_JOB_RESTART_COUNT), so the next attempt's
        count is above the last one the prologs reported and above the floor."""
        tr.floor = max(tr.floor + 1, tr.attempt.restart + 1 if tr.attempt else 0)

    def _check_ready(self, tr: Tracked) -> None:
        """READY once every node of the admitted attempt reported done (at once without a prolog)."""
        if not tr.started or tr.ready or tr.done or tr.evicted or tr.restarting:
            return
        if self.ready is None:
            tr.ready = True
            self._emit(tr.admitted_t, tr.job.id, Kind.READY)
            return
        a = tr.attempt
        if a is None or a.restart < tr.floor or not tr.nodes or not set(tr.nodes) <= a.done.keys():
            return
        last = max(a.done[n] for n in tr.nodes)
        # The squeue poll that saw the allocation lags it; a READY never precedes its ADMITTED.
        t = max(last, tr.admitted_t)
        tr.ready = True
        self.ready_log.append({"job": tr.job.id, "restart": a.restart, "placed": a.placed, "model": a.gang_ready,
                               "done": last, "t": t})
        self._emit(t, tr.job.id, Kind.READY)

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Requeue a running job as a whole (scontrol requeue): EVICTED and REQUEUED now, ADMITTED
        again once Slurm starts it (after its cred_expire hold). Only jobs this run submitted are
        tracked, so an attached run never requeues anyone else's. A job that ended meanwhile is left
        to the watcher."""
        self.clock.sync(now)
        self._observe(now)
        tr = self.jobs.get(job_id)
        if tr is None or not tr.slurm_id or tr.done or not tr.started or tr.evicted or tr.restarting:
            return self._take()
        if self.cluster.run(["scontrol", "requeue", str(tr.slurm_id)], check=False).returncode != 0:
            return self._take()
        self._evict([tr], now, reason)
        self._raise_floor(tr)
        tr.restarting = True
        self.restarts += 1
        self._emit(now, job_id, Kind.REQUEUED, reason=reason)
        return self._take()

    def _ready_figures(self) -> dict[str, Any]:
        if self.ready is None:
            return {"ready_source": "admission" + (" (attached: no gangstorm prolog)" if self.startup else "")}
        late = np.array([r["done"] - r["model"] for r in self.ready_log])     # prolog report vs the model
        # finished jobs whose last allocation never became READY (e.g. a job shorter than its pull)
        missing = sum(1 for tr in self.jobs.values() if tr.done and tr.starts and not tr.ready)
        spread = {"p50": round(float(np.median(late)), 4), "max": round(float(late.max()), 4)} if len(late) else {}
        return {"ready_source": "prolog", **self.ready.image_figures(), **self.ready.figures(),
                "ready_stale_dones": self.stale_dones, "ready_missing": missing,
                "prolog_done_after_model_s": {"n": len(late), **spread}}

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
            if name in self.index:          # attached: foreign jobs may run elsewhere in the cluster
                used[self.index[name]] += gpus
        return used

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        return ((tr.job, 0, tr.started) for tr in self.jobs.values() if not tr.done)

    def live_control_plane(self) -> dict[str, Any]:
        return {"sbatch_inflight": self._inflight, "squeue_calls": self.client.calls("squeue"), **self._sdiag}

    def control_plane(self) -> dict[str, Any]:
        d = self.client.sdiag()
        d["client"] = {**self.client.summary(), "submit_workers": self.workers, "poll_s": self.poll_s}
        d["fleet"] = {"nodes": self.fleet.nodes, "boot_s": getattr(self.cluster, "boot_s", None)}
        d["run_label"] = self.comment
        d.update(self._ready_figures(), restarts_requested=self.restarts)
        if self.attached:
            d["existing"] = {"slurm_conf": str(self.cluster.conf), "partition": self.partition,
                             "nodes": len(self.names), "excluded_nodes": len(self.excluded)}
            d["chaos_skipped"] = self.chaos_skipped
        d["lock_busy_s"], d["busy_s"] = lock_busy(d)
        return d

    # ---- chaos -----------------------------------------------------------------------------
    def _nodes(self, action: ChaosAction) -> tuple[list[int], list[str]]:
        nodes = [int(i) for i in action.params.get("nodes", [])]
        return nodes, [self.names[i] for i in nodes]

    def _spare_foreign(self, nodes: list[int], names: list[str], now: float, kind: str) -> tuple[list[int], list[str]]:
        """Attached: drop the nodes a job without the run's label runs on (a DOWN node would kill it),
        recorded in chaos_skipped; ChaosUnsupported when none is left."""
        busy = {n for j in self.cluster.queued(names) if j.comment != self.comment for n in expand(j.nodelist)}
        busy &= set(names)
        if not busy:
            return nodes, names
        self.chaos_skipped.append({"t": round(now, 3), "kind": kind, "nodes": sorted(busy),
                                   "reason": "a job gangstorm did not create runs there"})
        keep = [(i, n) for i, n in zip(nodes, names) if n not in busy]
        if not keep:
            raise ChaosUnsupported(f"slurm/real: {kind} on {', '.join(sorted(busy))} skipped: a job gangstorm "
                                   f"did not create runs there (never touched on an existing cluster)")
        return [i for i, _ in keep], [n for _, n in keep]

    def _running(self) -> list[Tracked]:
        return [tr for tr in self.active.values() if tr.started and not tr.done]

    def _evict(self, victims: list[Tracked], now: float, reason: str) -> None:
        for tr in victims:
            tr.evicted = True
            self._emit(now, tr.job.id, Kind.EVICTED, 0, reason)

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        if self.attached:       # gangstorm does not own these slurmds: DOWN through scontrol only
            nodes, names = self._spare_foreign(nodes, names, now, "node_fail")
        else:
            self.cluster.kill_slurmds(names)
        self.client.set_nodes(names, "DOWN", "gangstorm-node_fail")
        self.held.update(dict.fromkeys(names, "DOWN"))
        self.down |= set(nodes)
        # Slurm requeues the whole batch job (--requeue): nothing stays bound, as in the sim.
        self._evict([tr for tr in self._running() if set(names) & set(tr.nodes)], now, "node_fail")

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        names = [n for n in names if self.held.get(n) == "DOWN"]      # not those node_fail spared
        if not self.attached:
            for n in names:
                self.cluster.start_slurmd(n)
        if names:
            self.client.set_nodes(names, "RESUME")
        for n in names:
            del self.held[n]
        self.down -= set(nodes)

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
        for n in nodes:
            self.held.setdefault(n, "DRAIN")
        self.client.requeue([tr.slurm_id for tr in victims])
        self.resume_at.append((now + float(action.params.get("drain_s", 10.0)) / float(self.ctx.time_scale or 1.0),
                               nodes))
        self._evict(victims, now, "evict")

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        dur = float(action.params.get("duration_s", 60))        # the runner already scaled it to wall seconds
        for node, gpus in action.params.get("placements", []):
            self._sbatch(None, self.client.batch_argv(
                f"gs-{self.label}-prefill", dur, *self._scope(), f"--nodelist={self.names[int(node)]}", "--nodes=1",
                f"--gres=gpu:{int(gpus)}", f"--time={max(1, math.ceil(dur / 60) + 1)}"), int(gpus))


def _few(items: list, k: int = 10) -> str:
    return ", ".join(map(str, items[:k])) + (f", ... {len(items) - k} more" if len(items) > k else "")


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
