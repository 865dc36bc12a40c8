"""Real Slurm target: sbatch into a slurmctld driving one slurmd per emulated node.

Submission: the sbatch CLI from a small thread pool (see docs/slurm.md for why, and the rate it
sustains). Observation: one `squeue` call per poll cycle in a background thread, never one per
job. A job holds its allocation with `sleep <duration>`; admission is the first poll that sees
it RUNNING (client observation, Event.t) and Slurm's own StartTime (Event.backend_t). Slurm
allocates a gang atomically, so partial gangs are always 0.
"""
from __future__ import annotations

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
from typing import Any

import numpy as np

from loadgen.model.fleet import stranded_gpus
from fakes.slurm.fleet import SlurmFleet, expand, require_slurm
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}
PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "CONFIGURING", "RESV_DEL_HOLD"}
DONE_OK = {"COMPLETED"}
DONE_BAD = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}
TRANSIENT = ("temporarily", "Socket timed out", "Unable to contact", "Connection refused", "Zero Bytes")
SQUEUE_FMT = "%i|%T|%V|%S|%e|%N"


@dataclass
class Tracked:
    job: Job
    slurm_id: int = 0
    submitted_t: float = 0.0            # client: sbatch returned
    seen: bool = False
    state: str = ""
    started: bool = False
    done: bool = False
    evicted: bool = False               # chaos already reported the eviction of this allocation
    submit_epoch: int | None = None     # Slurm SubmitTime
    start_epoch: int | None = None      # Slurm StartTime of the current allocation
    end_epoch: int | None = None
    nodes: list[str] = field(default_factory=list)
    starts: list[tuple[float, int | None, list[str]]] = field(default_factory=list)   # (obs t, StartTime, nodes)


class RealSlurm(Target):
    name = "slurm"
    backend = "real"

    def __init__(self, ctx: TargetContext, workers: int | None = None, poll_s: float | None = None):
        super().__init__(ctx)
        cfg = ctx.config or {}
        self.workers = int(workers or cfg.get("submit_workers", 4))
        self.poll_s = float(poll_s or cfg.get("poll_s", 0.5))
        self.rng = random.Random(ctx.seed)
        self._tmp: str | None = None
        run_dir = Path(ctx.run_dir) / "slurm" if ctx.run_dir else None
        if run_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="gangstorm-slurm-")
            run_dir = Path(self._tmp)
        # Scheduler timers (sched/bf intervals, cred_expire = the 120 s hold on a requeued job) stay
        # in Slurm's own wall seconds, like the latencies measured: only the workload is time-scaled.
        self.cluster = SlurmFleet(ctx.fleet, run_dir, config=dict(cfg))
        self.jobs: dict[int, Tracked] = {}          # by job.id
        self.by_slurm: dict[int, Tracked] = {}
        self.active: dict[int, Tracked] = {}        # by slurm id, not yet finished/failed
        self.prefill: dict[int, int] = {}           # slurm id -> GPUs (chaos fill, not workload)
        self.down: set[str] = set()
        self.resume_at: list[tuple[float, list[str]]] = []
        self._epoch0: float | None = None           # wall clock (time.time()) at run time 0
        self._results: queue.Queue = queue.Queue()  # (Tracked, slurm_id | None, t, error)
        self._polls: queue.Queue = queue.Queue(maxsize=4)
        self._inflight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._poller: threading.Thread | None = None
        self._last_rows: dict[int, tuple] = {}
        self._sdiag_cache: tuple[float, dict[str, Any]] = (-1e9, {})
        self.stats = {"sbatch_calls": 0, "sbatch_retries": 0, "sbatch_s_total": 0.0, "sbatch_s_max": 0.0,
                      "squeue_calls": 0, "squeue_s_total": 0.0, "squeue_s_max": 0.0}

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        require_slurm()
        self.cluster.start(timeout_s=float(self.ctx.config.get("boot_timeout_s", 1200)))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sbatch")
        self._poller = threading.Thread(target=self._poll_loop, name="squeue", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._poller is not None:
            self._poller.join(timeout=30)
        self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- clock -----------------------------------------------------------------------------
    def _sync(self, now: float) -> None:
        if self._epoch0 is None:
            self._epoch0 = time.time() - now

    def _now(self) -> float:
        return time.time() - (self._epoch0 if self._epoch0 is not None else time.time())

    def _rel(self, epoch: int | None) -> float | None:
        return None if epoch is None or self._epoch0 is None else epoch - self._epoch0

    # ---- submission ------------------------------------------------------------------------
    def sbatch_argv(self, job: Job) -> list[str]:
        cfg = self.ctx.config
        scale = float(self.ctx.time_scale or 1.0)
        limit_min = max(1, math.ceil(job.duration_s * float(cfg.get("time_limit_factor", 1.5)) / 60))
        argv = ["sbatch", "--parsable", f"--job-name=gs-{job.id}", f"--chdir={self.cluster.run_dir}/jobs",
                "--output=/dev/null", "--error=/dev/null", "--requeue", f"--time={limit_min}",
                f"--nodes={job.members}", "--ntasks-per-node=1", f"--gres=gpu:{job.gpus_per_member}"]
        if job.tenant:
            argv.append(f"--account={job.tenant}")
        if job.whole_node:
            argv.append("--exclusive")
        elif job.cpus_per_member:
            argv.append(f"--cpus-per-task={job.cpus_per_member}")
        switches = int(cfg.get("switches", 0) or 0)
        if switches > 0 and self.large_gang(job):
            wait = int(round(float(cfg.get("switches_max_wait_s", 300)) / scale))
            argv.append(f"--switches={switches}@{wait // 60}:{wait % 60:02d}")
        argv += ["--wrap", f"sleep {max(0.0, job.duration_s):.3f}"]
        return argv

    @staticmethod
    def large_gang(job: Job) -> bool:
        """Gangs that ask for --switches: the scenario's large class, as in the simulated slurm."""
        return job.cls == "large" and job.members > 1

    def submit(self, job: Job, now: float) -> list[Event]:
        self._sync(now)
        tr = Tracked(job)
        self.jobs[job.id] = tr
        with self._lock:
            self._inflight += 1
        self._pool.submit(self._sbatch, tr, self.sbatch_argv(job))
        return []

    def _sbatch(self, tr: Tracked | None, argv: list[str], gpus: int = 0) -> None:
        err = ""
        sid = None
        for attempt in range(6):
            t0 = time.monotonic()
            try:
                r = subprocess.run(argv, env=self.cluster.env(), capture_output=True, text=True, timeout=120)
                out, err, rc = r.stdout.strip(), r.stderr.strip(), r.returncode
            except subprocess.TimeoutExpired:
                out, err, rc = "", "sbatch timed out after 120 s", 1
            dt = time.monotonic() - t0
            with self._lock:
                self.stats["sbatch_calls"] += 1
                self.stats["sbatch_s_total"] += dt
                self.stats["sbatch_s_max"] = max(self.stats["sbatch_s_max"], dt)
            if rc == 0 and out:
                sid = int(out.split(";")[0])
                break
            if self._stop.is_set() or not any(s in err for s in TRANSIENT):
                break
            with self._lock:
                self.stats["sbatch_retries"] += 1
            time.sleep(0.5 * (attempt + 1))
        self._results.put((tr, sid, self._now(), err.splitlines()[-1] if err else "", gpus))

    # ---- observation -----------------------------------------------------------------------
    def _poll_loop(self) -> None:
        env = self.cluster.env()
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                r = subprocess.run(["squeue", "-h", "--states=all", "-o", SQUEUE_FMT], env=env,
                                   capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                continue
            dt = time.monotonic() - t0
            self.stats["squeue_calls"] += 1
            self.stats["squeue_s_total"] += dt
            self.stats["squeue_s_max"] = max(self.stats["squeue_s_max"], dt)
            if r.returncode == 0:
                rows = {}
                for line in r.stdout.splitlines():
                    p = line.split("|")
                    if len(p) == 6 and p[0].isdigit():
                        rows[int(p[0])] = (p[1], _epoch(p[2]), _epoch(p[3]), _epoch(p[4]), p[5])
                obs = self._now()
                try:
                    self._polls.put((obs, rows), timeout=1)
                except queue.Full:
                    pass
            # At least as long as the call took: under load the observer never takes more than
            # half of slurmctld's job-lock time.
            self._stop.wait(max(self.poll_s - dt, dt))

    def advance(self, now: float) -> list[Event]:
        self._sync(now)
        events: list[Event] = []
        while True:
            try:
                tr, sid, t, err, gpus = self._results.get_nowait()
            except queue.Empty:
                break
            with self._lock:
                self._inflight -= 1
            if tr is None:                       # prefill submission
                if sid is not None:
                    self.prefill[sid] = gpus
                continue
            if sid is None:
                tr.done = True
                events.append(Event(t, tr.job.id, Kind.REJECTED, reason=err or "sbatch failed"))
                continue
            tr.slurm_id, tr.submitted_t = sid, t
            self.by_slurm[sid] = self.active[sid] = tr
        while True:
            try:
                obs, rows = self._polls.get_nowait()
            except queue.Empty:
                break
            self._last_rows = rows
            events += self._diff(obs, rows)
        if self.resume_at:
            due = [n for t, ns in self.resume_at if t <= now for n in ns]
            self.resume_at = [(t, ns) for t, ns in self.resume_at if t > now]
            if due:
                self._scontrol_nodes(due, "RESUME")
        return events

    def _diff(self, obs: float, rows: dict[int, tuple]) -> list[Event]:
        ev: list[Event] = []
        for sid, tr in list(self.active.items()):
            if tr.done:
                del self.active[sid]
                continue
            row = rows.get(sid)
            if row is None:
                if tr.seen:        # aged out of squeue between polls (MinJobAge): it ended
                    tr.done = True
                    ev.append(Event(obs, tr.job.id, Kind.FINISHED, members=tr.job.members))
                continue
            state, submit_e, start_e, end_e, nodelist = row
            if not tr.seen:
                tr.seen, tr.submit_epoch = True, submit_e
                ev.append(Event(tr.submitted_t, tr.job.id, Kind.SUBMITTED, backend_t=self._rel(submit_e)))
            tr.state = state
            if state in RUNNING or (state in DONE_OK | DONE_BAD and start_e and not tr.started
                                    and nodelist and state != "CANCELLED"):
                if not tr.started:
                    tr.started, tr.start_epoch = True, start_e
                    tr.nodes = expand(nodelist)
                    tr.starts.append((obs, start_e, tr.nodes))
                    bt = self._rel(start_e)
                    ev.append(Event(obs, tr.job.id, Kind.ADMITTED, members=tr.job.members, backend_t=bt))
                    ev.append(Event(obs, tr.job.id, Kind.STARTED, members=tr.job.members, backend_t=bt))
            if state in PENDING and tr.started:
                tr.started, tr.nodes = False, []
                if not tr.evicted:      # Slurm requeued it on its own (node not responding, ...)
                    ev.append(Event(obs, tr.job.id, Kind.EVICTED, members=0, reason=state.lower()))
                tr.evicted = False
                ev.append(Event(obs, tr.job.id, Kind.REQUEUED, reason=state.lower()))
            if state in DONE_OK:
                tr.done, tr.end_epoch = True, end_e
                ev.append(Event(obs, tr.job.id, Kind.FINISHED, members=tr.job.members, backend_t=self._rel(end_e)))
            elif state in DONE_BAD:
                tr.done, tr.end_epoch = True, end_e
                kind = Kind.FINISHED if state == "TIMEOUT" else Kind.FAILED
                ev.append(Event(obs, tr.job.id, kind, reason=state.lower(), backend_t=self._rel(end_e)))
        return ev

    # ---- state -----------------------------------------------------------------------------
    def _node_usage(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for sid, row in self._last_rows.items():
            if row[0] not in RUNNING:
                continue
            tr = self.by_slurm.get(sid)
            per = tr.job.gpus_per_member if tr else self.prefill.get(sid, 0)
            for n in expand(row[4]):
                used[n] = used.get(n, 0) + per
        return used

    def snapshot(self, now: float) -> Snapshot:
        fleet = self.ctx.fleet
        used = self._node_usage()
        pending = [tr for tr in self.jobs.values() if not tr.done and not tr.started]
        running = sum(1 for tr in self.jobs.values() if tr.started and not tr.done)
        free = np.array([0 if (n := fleet.node_name(i)) in self.down else
                         max(0, fleet.gpus_per_node - used.get(n, 0)) for i in range(fleet.nodes)])
        smallest = min((tr.job.gpus_per_member for tr in pending), default=None)
        cp = {"sbatch_inflight": self._inflight, "squeue_calls": self.stats["squeue_calls"]}
        cp.update(self._sdiag_light(now))
        return Snapshot(t=now, gpus_allocated=int(sum(used.values())), gpus_partial=0,
                        gpus_stranded=stranded_gpus(free, smallest), pending_jobs=len(pending),
                        partial_gangs=0, running_jobs=running, control_plane=cp)

    def _sdiag_light(self, now: float) -> dict[str, Any]:
        t, cached = self._sdiag_cache
        if now - t >= 5.0:
            d = self.sdiag()
            cached = {k: d.get(k) for k in ("main_last_cycle_us", "main_mean_cycle_us", "bf_last_cycle_us",
                                            "server_thread_count", "agent_queue_size", "jobs_pending")}
            self._sdiag_cache = (now, cached)
        return cached

    def sdiag(self) -> dict[str, Any]:
        try:
            r = self.cluster.run(["sdiag"], check=False, timeout=60)
        except subprocess.TimeoutExpired:
            return {}
        return parse_sdiag(r.stdout) if r.returncode == 0 else {}

    def control_plane(self) -> dict[str, Any]:
        d = self.sdiag()
        calls = max(1, self.stats["sbatch_calls"])
        d["client"] = {
            "sbatch_calls": self.stats["sbatch_calls"], "sbatch_retries": self.stats["sbatch_retries"],
            "sbatch_mean_s": round(self.stats["sbatch_s_total"] / calls, 4),
            "sbatch_max_s": round(self.stats["sbatch_s_max"], 4),
            "squeue_calls": self.stats["squeue_calls"],
            "squeue_mean_s": round(self.stats["squeue_s_total"] / max(1, self.stats["squeue_calls"]), 4),
            "squeue_max_s": round(self.stats["squeue_s_max"], 4),
            "submit_workers": self.workers, "poll_s": self.poll_s,
        }
        d["fleet"] = {"nodes": self.ctx.fleet.nodes, "boot_s": self.cluster.boot_s}
        return d

    # ---- chaos -----------------------------------------------------------------------------
    def _names(self, nodes) -> list[str]:
        return [self.ctx.fleet.node_name(int(i)) for i in nodes]

    def _scontrol_nodes(self, names: list[str], state: str, reason: str = "") -> None:
        for k in range(0, len(names), 500):
            argv = ["scontrol", "update", f"NodeName={','.join(names[k:k + 500])}", f"State={state}"]
            if reason:
                argv.append(f"Reason={reason}")
            self.cluster.run(argv, check=False)

    def _running_on(self, names: set[str]) -> list[Tracked]:
        return [tr for tr in self.active.values() if tr.started and not tr.done and names & set(tr.nodes)]

    @staticmethod
    def _evicted(victims: list[Tracked], now: float, reason: str) -> list[Event]:
        for tr in victims:
            tr.evicted = True
        return [Event(now, tr.job.id, Kind.EVICTED, members=0, reason=reason) for tr in victims]

    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        self._sync(now)
        p = action.params
        if action.kind == "node_fail":
            names = self._names(p.get("nodes", []))
            self.cluster.kill_slurmds(names)
            self._scontrol_nodes(names, "DOWN", "gangstorm-node_fail")
            self.down |= set(names)
            # Slurm requeues the whole batch job (--requeue): nothing stays bound, as in the sim.
            return self._evicted(self._running_on(set(names)), now, "node_fail")
        if action.kind == "node_recover":
            names = self._names(p.get("nodes", []))
            for n in names:
                self.cluster.start_slurmd(n)
            self._scontrol_nodes(names, "RESUME")
            self.down -= set(names)
            return []
        if action.kind == "evict":
            want = int(p.get("members", 1))
            running = [tr for tr in self.active.values() if tr.started and not tr.done]
            self.rng.shuffle(running)
            victims, got = [], 0
            for tr in running:
                if got >= want:
                    break
                victims.append(tr)
                got += tr.job.members
            if not victims:
                return []
            nodes = sorted({n for tr in victims for n in tr.nodes})
            self._scontrol_nodes(nodes, "DRAIN", "gangstorm-evict")
            self.cluster.run(["scontrol", "requeue", ",".join(str(tr.slurm_id) for tr in victims)], check=False)
            drain_s = float(p.get("drain_s", 10.0)) / float(self.ctx.time_scale or 1.0)
            self.resume_at.append((now + drain_s, nodes))
            return self._evicted(victims, now, "evict")
        if action.kind == "prefill":
            dur = float(p.get("duration_s", 60))        # the runner already scaled it to wall seconds
            for node, gpus in p.get("placements", []):
                name = self.ctx.fleet.node_name(int(node))
                argv = ["sbatch", "--parsable", "--job-name=gs-prefill", f"--chdir={self.cluster.run_dir}/jobs",
                        "--output=/dev/null", "--error=/dev/null", f"--nodelist={name}", "--nodes=1",
                        f"--gres=gpu:{int(gpus)}", f"--time={max(1, math.ceil(dur / 60) + 1)}",
                        "--wrap", f"sleep {dur:.3f}"]
                with self._lock:
                    self._inflight += 1
                self._pool.submit(self._sbatch, None, argv, int(gpus))
            return []
        raise ChaosUnsupported(f"slurm/real does not support chaos kind {action.kind!r}")


def _epoch(s: str) -> int | None:
    return int(s) if s.isdigit() and int(s) > 0 else None


def parse_sdiag(text: str) -> dict[str, Any]:
    """sdiag text -> main/backfill cycle figures (microseconds) and per-RPC counts and times."""
    out: dict[str, Any] = {}
    section = "top"
    rpcs: dict[str, dict[str, int]] = {}
    keys = {
        ("top", "Server thread count"): "server_thread_count",
        ("top", "Agent queue size"): "agent_queue_size",
        ("top", "Jobs submitted"): "jobs_submitted",
        ("top", "Jobs started"): "jobs_started",
        ("top", "Jobs completed"): "jobs_completed",
        ("top", "Jobs failed"): "jobs_failed",
        ("top", "Jobs pending"): "jobs_pending",
        ("top", "Jobs running"): "jobs_running",
        ("main", "Last cycle"): "main_last_cycle_us",
        ("main", "Max cycle"): "main_max_cycle_us",
        ("main", "Total cycles"): "main_cycles",
        ("main", "Mean cycle"): "main_mean_cycle_us",
        ("main", "Mean depth cycle"): "main_mean_depth",
        ("main", "Cycles per minute"): "main_cycles_per_min",
        ("main", "Last queue length"): "main_last_queue_length",
        ("bf", "Total backfilled jobs (since last slurm start)"): "bf_backfilled_jobs",
        ("bf", "Total cycles"): "bf_cycles",
        ("bf", "Last cycle"): "bf_last_cycle_us",
        ("bf", "Max cycle"): "bf_max_cycle_us",
        ("bf", "Mean cycle"): "bf_mean_cycle_us",
        ("bf", "Last depth cycle"): "bf_last_depth",
        ("bf", "Last queue length"): "bf_last_queue_length",
    }
    rpc_section = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Main schedule statistics"):
            section = "main"
            continue
        if line.startswith("Backfilling stats"):
            section = "bf"
            continue
        if line.startswith("Remote Procedure Call statistics by message type"):
            rpc_section = True
            continue
        if line.startswith("Remote Procedure Call statistics by user") or line.startswith("Pending RPC"):
            rpc_section = False
            section = "other"
            continue
        if rpc_section and "count:" in line:
            name = line.split("(")[0].strip()
            rpcs[name] = _rpc_fields(line)
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            key = keys.get((section, k.strip()))
            if key:
                try:
                    out[key] = int(v.split()[0])
                except (ValueError, IndexError):
                    pass
    out["rpc"] = rpcs
    out["rpc_total_count"] = sum(r.get("count", 0) for r in rpcs.values())
    return out


def _rpc_fields(line: str) -> dict[str, int]:
    fields = {}
    for part in line.split(")", 1)[-1].split():
        if ":" in part:
            k, v = part.split(":", 1)
            try:
                fields[k] = int(v)
            except ValueError:
                pass
    return fields
