"""Real Slurm target: sbatch into a slurmctld driving one slurmd per emulated node.

Submission: the sbatch CLI from a small thread pool (see docs/slurm.md for why, and the rate it
sustains). Observation: one watcher thread runs one `squeue` per poll cycle, never one per job,
and a light `sdiag` every few seconds. A job holds its allocation with `sleep <duration>`;
admission is the first poll that sees it RUNNING (client observation, Event.t) and Slurm's own
StartTime (Event.backend_t). Slurm allocates a gang atomically, so partial gangs are always 0.

GPU sharing (a fleet with node pools): each pool's mode is advertised as GRES (fakes/slurm/gres.py:
gres/shard, typed MIG gpu GRES, whole GPUs), a job's share becomes its --gres and --constraint,
and the GPU each slice landed on is read back from slurmctld (fakes/slurm/real/slices.py).

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

Several Locust processes on one attached cluster (ctx.role): a "submit" process only runs sbatch
(SUBMITTED when it returns, REJECTED when it fails) and polls nothing; the one "observe" process
runs the run's only squeue poller, adopts every job named gs-<label>-<id> of the jobs it expects
(expect()), runs the chaos plan and, at stop(), cancels every job of the run, whoever submitted it."""
from __future__ import annotations

import queue
import random
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fakes.real.base import RealTarget
from fakes.slurm import prolog
from fakes.slurm.client import Row, SlurmClient
from fakes.slurm.conf import PROLOG_KEY
from fakes.slurm.existing import ExistingSlurm
from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.ready import ReadyService, Report
from fakes.slurm.real.chaos import SlurmChaos
from fakes.slurm.real.cluster import SlurmCluster
from fakes.slurm.real.slices import SlurmSlices
from fakes.slurm.real.submit import SlurmSubmit
from fakes.slurm.real.tracked import Tracked
from fakes.slurm.real.usage import SlurmUsage
from fakes.slurm.real.watch import SlurmWatch
from fakes.slurm.traits import SlurmTraits
from loadgen.model.job import Job
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.target import RUN_LABEL, TargetContext, run_label


class RealSlurm(SlurmTraits, SlurmCluster, SlurmSubmit, SlurmWatch, SlurmSlices, SlurmUsage, SlurmChaos, RealTarget):
    name = "slurm"

    def __init__(self, ctx: TargetContext, workers: int | None = None, poll_s: float | None = None):
        super().__init__(ctx)
        self.workers = int(workers or self.cfg.get("submit_workers", 4))
        self.poll_s = float(poll_s or self.cfg.get("poll_s", 0.5))
        self.rng = random.Random(ctx.seed)
        self.label = run_label(ctx.run_id)
        self.comment = f"{RUN_LABEL}={self.label}"        # on every job this run submits
        self.prefix = f"gs-{self.label}-"                  # ... and gs-<label>-<job id> as its name
        self.role = ctx.role
        self.expected: dict[int, Job] = {}                 # observe role: the jobs other processes submit
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
        self._init_slices()
