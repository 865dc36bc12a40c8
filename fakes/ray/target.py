"""RealRay: gangs as Ray placement groups on a local fleet of fake-GPU raylets.

A gang is one placement group of `members` bundles {GPU: gpus_per_member, CPU: cpus_per_member},
strategy multi_node_strategy for multi-member gangs, single_node_strategy for 1-member jobs (the
same ctx.config keys the simulated ray reads). Admission = job.submit_s to the moment pg.ready()
resolves; the group is held for job.duration_s and then removed.

This module never imports ray: the fleet runs in its own session (fakes/ray/fleet.py) and the
driver in its own process (fakes/ray/driver.py), so the target works from a
gevent-patched Locust process too. All I/O here is non-blocking pipe reads in advance().
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.model.fleet import stranded_gpus
from fakes.ray.fleet import RayFleet, node_resource, stop_child
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

MIB_PER_RAYLET = 200          # measured PSS per raylet with its two agents: ~150 MiB (docs/ray.md)
MAX_RAYLETS = 256


class RayTargetError(RuntimeError):
    pass


class RealRay(Target):
    name = "ray"
    backend = "real"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cfg = ctx.config
        self.fleet_model = ctx.fleet
        self.n = ctx.fleet.nodes
        self.fleet: RayFleet | None = None
        self.proc: subprocess.Popen | None = None
        self._buf = b""
        self._origin: float | None = None
        self._events: list[Event] = []
        self.jobs: dict[int, Job] = {}
        self.pending: dict[int, Job] = {}              # submitted, not (or no longer) ready
        self.running: dict[int, list[int]] = {}        # job id -> node index per bundle
        self.partial: dict[int, int] = {}              # job id -> members still bound while rescheduling
        self.prefill: dict[int, tuple[int, int]] = {}  # prefill id -> (node, gpus), held
        self._prefill_wanted: dict[int, tuple[int, int]] = {}
        self._prefill_next = -1
        self.node_index: dict[str, int] = {}
        self.placed: dict[int, list[int]] = {}         # job id -> node index per bundle, first admission
        self.dead: set[int] = set()
        self.ready_t: deque[float] = deque(maxlen=100_000)
        self.sched_ms: list[float] = []                # GCS's own per-group scheduling latency
        self.e2e_ms: list[float] = []                  # GCS: creation request to created (incl. retries)
        self.attempts: list[int] = []
        self.cp: dict[str, Any] = {}
        self.errors: list[str] = []
        self.node_fail_log: list[dict[str, Any]] = []
        self.counters = {"submitted": 0, "groups_ready": 0, "finished": 0, "evicted": 0, "failed": 0,
                         "rescheduled": 0, "prefill_groups": 0, "prefill_misplaced": 0}
        self._worker_log = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.n > MAX_RAYLETS:
            raise RayTargetError(f"ray real backend: fleet.nodes={self.n} raylets is beyond what one machine "
                                 f"holds (max {MAX_RAYLETS}); pass e.g. --nodes 32")
        need_mib = (self.n + 2) * MIB_PER_RAYLET
        avail = _mem_available_mib()
        if avail is not None and need_mib > avail:
            raise RayTargetError(f"ray real backend: {self.n} raylets need ~{need_mib} MiB, {avail} MiB "
                                 f"available; pass a smaller --nodes")
        run_dir = Path(self.ctx.run_dir) if self.ctx.run_dir else None
        if run_dir:
            run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.fleet = RayFleet.for_fleet(self.fleet_model, workdir=run_dir).start()
            self.node_index = {n["node_id"]: n["index"] for n in self.fleet.nodes}
            self._start_worker(run_dir)
        except BaseException:
            self.stop()
            raise

    def _start_worker(self, run_dir: Path | None) -> None:
        assert self.fleet is not None
        log = (run_dir or Path(self.fleet.ray_tmpdir)) / "ray-worker.log"
        self._worker_log = open(log, "ab")
        env = {**os.environ, **self.fleet.env()}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fakes.ray.driver", self.fleet.address],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._worker_log, env=env,
            start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))
        hello = self._read_one(timeout=120)
        if hello.get("ev") != "hello":
            raise RayTargetError(f"ray driver process failed: {hello.get('error', hello)} (log: {log})")
        os.set_blocking(self.proc.stdout.fileno(), False)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_child(proc, 30)
        if self._worker_log:
            self._worker_log.close()
            self._worker_log = None
        fleet, self.fleet = self.fleet, None
        if fleet is not None:
            fleet.stop()

    # -- workload ----------------------------------------------------------------------------
    def _now_origin(self, now: float) -> None:
        """Run start on the shared monotonic clock; a jump of seconds means a new run began."""
        origin = time.monotonic() - now
        if self._origin is None or abs(origin - self._origin) > 5.0:
            self._origin = origin
            self._send({"op": "origin", "mono": origin})

    def strategy(self, job: Job) -> str:
        return self.cfg.get("multi_node_strategy", "STRICT_SPREAD") if job.members > 1 \
            else self.cfg.get("single_node_strategy", "PACK")

    def bundles(self, job: Job) -> list[dict[str, float]]:
        b: dict[str, float] = {"GPU": float(job.gpus_per_member)}
        if job.cpus_per_member:
            b["CPU"] = float(job.cpus_per_member)
        return [dict(b) for _ in range(job.members)]

    def submit(self, job: Job, now: float) -> list[Event]:
        self._now_origin(now)
        self.jobs[job.id] = job
        self.pending[job.id] = job
        self.counters["submitted"] += 1
        self._send({"op": "submit", "id": job.id, "bundles": self.bundles(job),
                    "strategy": self.strategy(job), "hold_s": job.duration_s})
        return [Event(now, job.id, Kind.SUBMITTED)]

    def advance(self, now: float) -> list[Event]:
        self._now_origin(now)
        self._drain()
        out, self._events = self._events, []
        return out

    # -- worker messages ---------------------------------------------------------------------
    def _drain(self) -> None:
        if self.proc is None:
            return
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                if not self.errors or not self.errors[-1].startswith("driver exited"):
                    self.errors.append(f"driver exited (rc={self.proc.poll()})")
                break
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if line.strip():
                self._handle(json.loads(line))

    def _handle(self, m: dict[str, Any]) -> None:
        ev = m.get("ev")
        gid = m.get("id")
        if gid is not None and gid < 0:
            self._handle_prefill(m)
            return
        if ev == "ready":
            job = self.jobs.get(gid)
            if job is None:
                return
            self.pending.pop(gid, None)
            was_partial = self.partial.pop(gid, None) is not None
            self.running[gid] = [self.node_index.get(n, -1) for n in m["nodes"]]
            t = float(m["t"])
            if was_partial:
                self.counters["rescheduled"] += 1
                for entry in self.node_fail_log:
                    if gid in entry["groups"]:
                        entry.setdefault("rescheduled_after_s", {})[gid] = round(float(m["t"]) - entry["t"], 3)
                self._events.append(Event(t, gid, Kind.BOUND, job.members, "rescheduled"))
            else:
                self.counters["groups_ready"] += 1
                self.ready_t.append(t)
                self.placed.setdefault(gid, list(self.running[gid]))
                if m.get("sched_ms") is not None:
                    self.sched_ms.append(float(m["sched_ms"]))
                    self.e2e_ms.append(float(m.get("e2e_ms") or 0.0))
                    self.attempts.append(int(m.get("attempts") or 0))
            self._events.append(Event(t, gid, Kind.ADMITTED, job.members))
            self._events.append(Event(t, gid, Kind.STARTED, job.members))
        elif ev == "finished":
            self.running.pop(gid, None)
            self.jobs.pop(gid, None)
            self.counters["finished"] += 1
            self._events.append(Event(float(m["t"]), gid, Kind.FINISHED))
        elif ev == "lost":
            job = self.jobs.get(gid)
            if job is None:
                return
            nodes = self.running.pop(gid, [])
            t = float(m["t"])
            if m.get("reason") == "evicted":
                self.counters["evicted"] += 1
                self._events.append(Event(t, gid, Kind.EVICTED, 0, "evicted"))
                self._events.append(Event(t, gid, Kind.REQUEUED, 0, "evicted"))
            else:
                still = job.members - len(m.get("lost", []))
                self.partial[gid] = still
                self.running[gid] = [n for i, n in enumerate(nodes) if i not in set(m.get("lost", []))]
                self._events.append(Event(t, gid, Kind.EVICTED, still, m.get("reason", "")))
                self._events.append(Event(t, gid, Kind.REQUEUED, still, m.get("reason", "")))
            self.pending[gid] = job
        elif ev == "failed":
            self.pending.pop(gid, None)
            self.running.pop(gid, None)
            self.partial.pop(gid, None)
            self.jobs.pop(gid, None)
            self.counters["failed"] += 1
            self._events.append(Event(float(m["t"]), gid, Kind.FAILED, 0, m.get("reason", "")))
        elif ev == "cp":
            self.cp = m
        elif ev == "node_marked_dead":
            for entry in self.node_fail_log:
                if entry["node_id"] == m["node_id"]:
                    entry["gcs_marked_dead_after_s"] = round(float(m["t"]) - entry["t"], 3)
        elif ev == "error":
            self.errors.append(m.get("error", ""))
            if len(self.errors) > 100:
                del self.errors[:50]

    def _handle_prefill(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        if m.get("ev") == "ready" and gid in self._prefill_wanted:
            node, gpus = self._prefill_wanted.pop(gid)
            self.prefill[gid] = (node, gpus)
            if [self.node_index.get(n) for n in m.get("nodes", [])] != [node]:
                self.counters["prefill_misplaced"] += 1
        elif m.get("ev") in ("finished", "failed", "lost"):
            self.prefill.pop(gid, None)
            self._prefill_wanted.pop(gid, None)

    # -- chaos -------------------------------------------------------------------------------
    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        self._now_origin(now)
        self._drain()
        kind = action.kind
        if kind == "node_fail":
            self._node_fail([int(n) % self.n for n in action.params["nodes"]], now)
        elif kind == "node_recover":
            self._node_recover([int(n) % self.n for n in action.params["nodes"]], now)
        elif kind == "prefill":
            self._prefill(action.params["placements"], action.params.get("duration_s"))
        elif kind == "evict":
            self._evict(int(action.params.get("members", 1)))
        else:
            raise ChaosUnsupported(f"ray/real does not support chaos kind {kind!r} (no etcd in Ray)")
        out, self._events = self._events, []
        return out

    def _node_fail(self, nodes: list[int], now: float) -> None:
        assert self.fleet is not None
        for i in sorted(set(nodes) - self.dead):
            info = self.fleet.kill_raylet(i)
            t = time.monotonic() - (self._origin or 0.0)
            self.dead.add(i)
            held = sorted(j for j, ns in self.running.items() if i in ns)
            self.node_fail_log.append({"t": round(t, 3), "node": i, "node_id": info["node_id"],
                                       "groups": held})
            self._send({"op": "node_dead", "node_id": info["node_id"], "t": t})

    def _node_recover(self, nodes: list[int], now: float) -> None:
        assert self.fleet is not None
        fleet = self.fleet

        def restart(todo=sorted(set(nodes) & self.dead)):
            for i in todo:
                try:
                    reply = fleet.restart_node(i)
                    with self._lock:
                        self.node_index[reply["node"]["node_id"]] = i
                        self.dead.discard(i)
                except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                    self.errors.append(f"node_recover {i}: {e}")
        # A raylet takes seconds to boot: do not stall the open-loop driver meanwhile.
        threading.Thread(target=restart, daemon=True).start()

    def _prefill(self, placements: list, duration_s: float | None) -> None:
        cpg = max(1, self.fleet_model.cpus_per_node // self.fleet_model.gpus_per_node)
        for node, gpus in placements:
            node = int(node) % self.n
            if node in self.dead or int(gpus) <= 0:
                continue
            gid = self._prefill_next
            self._prefill_next -= 1
            self._prefill_wanted[gid] = (node, int(gpus))
            self.counters["prefill_groups"] += 1
            self._send({"op": "prefill", "id": gid, "hold_s": duration_s, "bundles": [
                {"GPU": float(gpus), "CPU": float(int(gpus) * cpg), node_resource(node): 0.001}]})

    def _evict(self, count: int) -> None:
        # Ray cannot take one bundle away from a group: eviction removes the whole group and
        # creates it again (a gang restart), the way an operator would preempt it.
        rng = np.random.default_rng([self.ctx.seed, len(self.jobs), self.counters["evicted"]])
        running = sorted(j for j in self.running if j not in self.partial)
        for j in rng.permutation(running)[:count] if running else []:
            self._send({"op": "evict", "id": int(j)})

    # -- observation -------------------------------------------------------------------------
    def _free_per_node(self) -> np.ndarray:
        free = np.full(self.n, self.fleet_model.gpus_per_node, dtype=np.int64)
        for gid, nodes in self.running.items():
            g = self.jobs[gid].gpus_per_member if gid in self.jobs else 0
            for n in nodes:
                if 0 <= n < self.n:
                    free[n] -= g
        for node, gpus in self.prefill.values():
            free[node] -= gpus
        if self.dead:
            free[sorted(self.dead)] = 0
        return np.maximum(free, 0)

    def snapshot(self, now: float) -> Snapshot:
        self._drain()
        free = self._free_per_node()
        alive = self.n - len(self.dead)
        allocated = alive * self.fleet_model.gpus_per_node - int(free.sum())
        smallest = min((j.gpus_per_member for j in self.pending.values()), default=None)
        partial_gpus = sum(b * self.jobs[j].gpus_per_member for j, b in self.partial.items() if j in self.jobs)
        return Snapshot(
            t=now, gpus_allocated=allocated, gpus_partial=partial_gpus,
            gpus_stranded=stranded_gpus(np.delete(free, sorted(self.dead)) if self.dead else free, smallest),
            pending_jobs=len(self.pending), partial_gangs=len(self.partial),
            running_jobs=len(self.running) - len(self.partial),
            control_plane=self._live_cp(now))

    def _create_rate(self, now: float, window_s: float = 10.0) -> float:
        lo = now - window_s
        n = sum(1 for t in reversed(self.ready_t) if t >= lo)
        return round(n / window_s, 3)

    def _live_cp(self, now: float) -> dict[str, Any]:
        gcs = self.cp.get("gcs_groups", {})
        return {"pending_groups": len(self.pending), "groups_per_s": self._create_rate(now),
                "raylets_alive": self.cp.get("raylets_alive"),
                "gcs_pending_groups": gcs.get("PENDING", 0) + gcs.get("RESCHEDULING", 0),
                "infeasible_groups": gcs.get("INFEASIBLE", 0)}

    def control_plane(self) -> dict[str, Any]:
        self._drain()
        rt = np.array(self.ready_t) if self.ready_t else None
        span = float(rt.max() - rt.min()) if rt is not None and len(rt) > 1 else 0.0
        out: dict[str, Any] = {
            "model": "real", "ray_version": _ray_version(),
            "raylets": self.n, "raylets_alive": self.cp.get("raylets_alive"),
            "gcs_groups_by_state": self.cp.get("gcs_groups", {}),
            **self.counters,
            "groups_created": self.counters["groups_ready"],      # the simulated Ray's name for it
            "infeasible_groups": self.cp.get("gcs_groups", {}).get("INFEASIBLE", 0),
            "groups_per_s_mean": round(len(rt) / span, 3) if span > 0 else None,
            "gcs_scheduling_ms_p50": _pct(self.sched_ms, 50), "gcs_scheduling_ms_p99": _pct(self.sched_ms, 99),
            "gcs_creation_ms_p50": _pct(self.e2e_ms, 50), "gcs_creation_ms_p99": _pct(self.e2e_ms, 99),
            "scheduling_attempts_max": max(self.attempts) if self.attempts else None,
            "node_failures": self.node_fail_log,
            "fleet_boot_s": round(self.fleet.boot_s, 2) if self.fleet else None,
            "errors": self.errors[-10:],
        }
        return out

    # -- pipes -------------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        if self.proc is None:
            raise RayTargetError("ray target is not started")
        self._send_to(self.proc, msg)

    @staticmethod
    def _send_to(proc: subprocess.Popen, msg: dict[str, Any]) -> None:
        proc.stdin.write((json.dumps(msg, separators=(",", ":")) + "\n").encode())
        proc.stdin.flush()

    def _read_one(self, timeout: float) -> dict[str, Any]:
        """First message from the driver, read with the same buffer _drain uses."""
        import select
        assert self.proc is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if time.monotonic() >= deadline:
                return {"ev": "error", "error": f"no answer from the driver in {timeout:.0f} s"}
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return {"ev": "error", "error": f"driver exited rc={self.proc.wait()}"}
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _mem_available_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _ray_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ray")
    except PackageNotFoundError:
        return None
