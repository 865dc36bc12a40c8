"""RealRay: gangs as Ray placement groups on a local fleet of fake-GPU raylets.

A gang is one placement group of `members` bundles {GPU: gpus_per_member, CPU: cpus_per_member},
strategy multi_node_strategy for multi-member gangs, single_node_strategy for 1-member jobs (the
same ctx.config keys the simulated ray reads). Admission = job.submit_s to the moment pg.ready()
resolves; the group is held for job.duration_s and then removed.

Placement-to-ready (ctx.startup.image with an image or a container start): once a group is CREATED,
the target's image model (fakes/ray/readiness.py) gives each bundle's ready time and the driver
starts one actor per bundle that is up no earlier than that (fakes/ray/members.py); READY is when
the last one answers. Without it no actor runs and READY is the ADMITTED instant. restart() sends a
running gang back as a whole: its actors and group are removed and the group created again.

This module never imports ray: the fleet's launcher (fakes/ray/serve.py, through RayFleet) and the
driver (fakes/ray/driver.py) each run in their own session, so the target works from a
gevent-patched Locust process too. All I/O here is non-blocking pipe reads in advance().

Fakelets (ctx.config nodes: fakelet, fakes/ray/fakelets/): the fleet's nodes are fake raylets
that the real GCS schedules groups on, up to fleet_settings.MAX_FAKELETS on one machine; the driver, the head and
everything above stay as they are. Nothing can run on a fakelet, so a startup section with an image
(one actor per bundle) is refused there.

Attached (ctx.existing.ray_address, fakes/ray/attach.py): no fleet is launched; the driver connects
to that GCS, scenario node i is the i-th alive GPU node by name, every group is named
gs-<run label>-<id>, stop() removes them all and never stops the cluster, and preflight() (a
read-only survey subprocess) refuses foreign workloads unless allowed. node_fail/node_recover
raise ChaosUnsupported there (gangstorm does not own the raylets).
"""
from __future__ import annotations

import itertools
import os
import queue
import sys
import threading
import time
from collections import deque
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from fakes.ray import attach
from fakes.ray.fleet import RAY_ENV, REPO, RayFleet, node_resource
from fakes.ray.fleet_settings import fleet_settings
from fakes.ray.pipe import ChildError, JsonPipe
from fakes.ray.readiness import Readiness
from fakes.ray.survey import SurveyError, classify, pg_prefix, survey
from fakes.real.base import RealTarget
from fakes.real.procfs import mem_available_mib
from fakes.real.procs import spawn, stop_child
from loadgen.model.errors import UserError
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, ClusterRefused, TargetContext, run_label

COUNTERS = ("submitted", "groups_ready", "finished", "evicted", "failed", "rescheduled", "prefill_groups",
            "prefill_misplaced", "restarted", "members_misplaced")


class RayTargetError(RuntimeError):
    pass


class RealRay(RealTarget):
    name = "ray"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.n = ctx.fleet.nodes
        self.run_dir = Path(ctx.run_dir) if ctx.run_dir else None
        self.settings = fleet_settings(self.cfg, self.n)
        self.nodes_kind, self.fakelet_syncer = self.settings.kind, self.settings.syncer
        self.gcs_load_poll_ms = self.settings.gcs_load_poll_ms
        self.fleet = RayFleet(ctx.fleet, workdir=self.run_dir, kind=self.nodes_kind, syncer=self.fakelet_syncer,
                              per_process=self.settings.per_process, gcs_config=self.settings.gcs_config,
                              front=self.settings.front_binary(),
                              boot_timeout_s=max(600.0, self.n * 0.1))   # the nodes of the base's fleet model
        self.existing = ctx.existing if ctx.existing and ctx.existing.ray_address else None
        self.label = run_label(ctx.run_id)
        self.address = ""                                        # the GCS the driver connects to
        self.left_behind: dict[str, int | None] | None = None   # attached: what stop() could not remove
        self.node_ids: list[str] = []                            # attached: cluster node per scenario node
        self.proc = None                                         # the driver process
        self.driver: JsonPipe | None = None
        self.dead = self.down                                    # nodes whose raylet chaos killed
        self.jobs: dict[int, Job] = {}                 # submitted, not finished or failed
        self.pending: dict[int, Job] = {}              # submitted, not (or no longer) ready
        self.running: dict[int, list[int]] = {}        # job id -> node index per bundle
        self.partial: dict[int, int] = {}              # job id -> members still bound while rescheduling
        self.placed: dict[int, list[int]] = {}         # job id -> node index per bundle, first admission
        self.prefill: dict[int, tuple[int, int]] = {}  # prefill id -> (node, gpus), held
        self._prefill_wanted: dict[int, tuple[int, int]] = {}
        self._prefill_ids = itertools.count(-1, -1)
        self.node_index: dict[str, int] = {}
        self._restarted: queue.SimpleQueue = queue.SimpleQueue()   # (node, node id or None, error)
        self.ready_t: deque[float] = deque(maxlen=100_000)
        self.sched_ms: list[float] = []                # GCS's own per-group scheduling latency
        self.e2e_ms: list[float] = []                  # GCS: creation request to created (incl. retries)
        self.attempts: list[int] = []
        self.cp: dict[str, Any] = {}
        self.errors: list[str] = []
        self.node_fail_log: list[dict[str, Any]] = []
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.readiness = Readiness(ctx.startup.image, self.n, ctx.seed)
        if self.nodes_kind == "fakelet" and self.readiness.active:
            raise UserError("schedulers.ray.nodes: fakelet cannot start members (no worker runs on a fake raylet); "
                            "drop startup.image or use nodes: raylet")
        self.member_pids: dict[int, list[int]] = {}    # job id -> pid of each member's actor worker, once READY

    # -- lifecycle ---------------------------------------------------------------------------
    def preflight(self) -> list[str]:
        """Attached: read-only survey of the GCS (nodes, foreign workloads); [] otherwise."""
        if not self.existing:
            return []
        found = self._survey()
        nodes = attach.fleet_nodes(found, self.existing, self.ctx.fleet)
        attach.members_check(nodes, self.existing, self.readiness.active)
        return attach.found_lines(found, self.existing, nodes, attach.foreign_check(found, self.existing, self.label))

    def _survey(self) -> dict[str, Any]:
        try:
            return survey(self.existing.ray_address)
        except SurveyError as e:
            raise ClusterRefused(f"--ray-address {self.existing.ray_address}: {e}") from None

    def start(self) -> None:
        if self.existing:
            self._attach()
            return
        refused = self.settings.capacity_error(self.n, mem_available_mib())
        if refused:
            raise RayTargetError(f"ray real backend: fleet.nodes={refused}")
        if self.run_dir:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.fleet.start()
            self.node_index = {n["node_id"]: n["index"] for n in self.fleet.nodes}
            self.address = self.fleet.address
            self._start_driver(self.run_dir or Path(self.fleet.ray_tmpdir), self.fleet.env())
        except BaseException:
            self.stop()
            raise

    def _attach(self) -> None:
        """Drive an existing cluster: checks as preflight, then only the driver process."""
        found = self._survey()
        nodes = attach.fleet_nodes(found, self.existing, self.ctx.fleet)
        attach.members_check(nodes, self.existing, self.readiness.active)
        attach.foreign_check(found, self.existing, self.label)
        self.node_ids = [n["node_id"] for n in nodes]
        self.node_index = {nid: i for i, nid in enumerate(self.node_ids)}
        self.address = self.existing.ray_address
        self.left_behind = {"placement_groups": None}      # until stop() has counted
        if self.run_dir:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_driver(self.run_dir, {})
            self._send(op="fleet", node_ids=self.node_ids)
        except BaseException:
            self.stop()
            raise

    def _start_driver(self, logdir: Path | None, env: dict[str, str]) -> None:
        log = logdir / "ray-worker.log" if logdir else None
        self.proc = spawn([sys.executable, "-m", "fakes.ray.driver", self.address, "--label", self.label],
                          env={**os.environ, **RAY_ENV, **env}, cwd=REPO, pipes=True, stderr_log=log)
        self.driver = JsonPipe(self.proc, "ray driver process", log)
        hello = self.driver.read(120)
        if hello.get("ev") != "hello":
            raise RayTargetError(f"ray driver process failed: {hello.get('error', hello)} (log: {log})")

    def stop(self) -> None:
        proc, driver, self.proc, self.driver = self.proc, self.driver, None, None
        final = self._stop_driver(proc, driver) if proc is not None else {}
        if self.existing:
            if self.left_behind is not None:
                self.left_behind = {"placement_groups": self._count_left()}
            return                                   # never stop a cluster gangstorm did not start
        self.fleet.stop()

    def _stop_driver(self, proc, driver: JsonPipe | None) -> dict[str, Any]:
        """Ask the driver to stop (it removes every group it created) and keep its last message."""
        final: dict[str, Any] = {}
        try:
            if driver is not None and proc.poll() is None:
                driver.send({"op": "stop"})
                deadline = time.monotonic() + 60
                while not final:
                    m = driver.read(max(0.1, deadline - time.monotonic()))
                    if m.get("ev") == "stopped":
                        final = m
        except (ChildError, OSError, ValueError):
            pass
        stop_child(proc, 10)
        return final

    def _count_left(self, settle_s: float = 15.0) -> int | None:
        """Groups named with the run's prefix the GCS still holds, read independently of the driver
        (the GCS removes a dead driver's groups on its own: wait a little for that)."""
        deadline = time.monotonic() + settle_s
        while True:
            try:
                own = classify(survey(self.existing.ray_address, timeout=30), self.label)["own"]
                left = sum(1 for w in own if w["kind"] == "placement group")
            except SurveyError as e:
                self.errors.append(f"stop: {e}")
                return None
            if left == 0 or time.monotonic() >= deadline:
                return left
            time.sleep(1.0)

    def after_stop(self) -> dict[str, Any]:
        return {} if self.left_behind is None else {"left_behind": self.left_behind}

    # -- workload ----------------------------------------------------------------------------
    def strategy(self, job: Job) -> str:
        return self.cfg.get("multi_node_strategy", "STRICT_SPREAD") if job.members > 1 \
            else self.cfg.get("single_node_strategy", "PACK")

    def bundles(self, job: Job) -> list[dict[str, float]]:
        b: dict[str, float] = {"GPU": float(job.gpus_per_member)}
        if job.cpus_per_member:
            b["CPU"] = float(job.cpus_per_member)
        return [dict(b) for _ in range(job.members)]

    def submit(self, job: Job, now: float) -> list[Event]:
        self.clock.sync(now)
        self.jobs[job.id] = self.pending[job.id] = job
        self.counters["submitted"] += 1
        self._send(op="submit", id=job.id, bundles=self.bundles(job), strategy=self.strategy(job),
                   hold_s=job.duration_s)
        self._emit(now, job.id, Kind.SUBMITTED)
        return self._take()

    # -- what the driver and the restart threads report -------------------------------------------
    def _observe(self, now: float) -> None:
        while not self._restarted.empty():
            i, node_id, error = self._restarted.get()
            if error:
                self.errors.append(error)
            else:
                self.node_index[node_id] = i
                self.dead.discard(i)
        for m in self.driver.drain() if self.driver else ():
            if (m.get("id") or 0) < 0:
                self._prefill_report(m)
            elif handler := getattr(self, f"_on_{m.get('ev')}", None):
                handler(m)

    def _on_ready(self, m: dict[str, Any]) -> None:
        gid, t = m["id"], self.clock.at(m["t"])
        job = self.jobs.get(gid)
        if job is None:
            return
        self.pending.pop(gid, None)
        self.running[gid] = [self.node_index.get(n, -1) for n in m["nodes"]]
        if self.partial.pop(gid, None) is not None:
            self.counters["rescheduled"] += 1
            for entry in self.node_fail_log:
                if gid in entry["groups"]:
                    entry.setdefault("rescheduled_after_s", {})[gid] = round(t - entry["t"], 3)
            self._emit(t, gid, Kind.BOUND, job.members, "rescheduled")
        else:
            self.counters["groups_ready"] += 1
            self.ready_t.append(t)
            self.placed.setdefault(gid, list(self.running[gid]))
            if m.get("sched_ms") is not None:
                self.sched_ms.append(float(m["sched_ms"]))
                self.e2e_ms.append(float(m.get("e2e_ms") or 0.0))
                self.attempts.append(int(m.get("attempts") or 0))
        self._emit(t, gid, Kind.ADMITTED, job.members, nodes=tuple(n for n in self.running[gid] if n >= 0))
        self._emit(t, gid, Kind.STARTED, job.members)
        if not self.readiness.active:
            self._emit(t, gid, Kind.READY)
        else:
            ready_at = self.readiness.plan(gid, m["placement"], m["t"], self.running[gid], self.clock.origin)
            self._send(op="start", id=gid, placement=m["placement"], ready_at=ready_at)

    def _on_members_ready(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        if gid in self.running and gid not in self.partial and self.readiness.ready(gid, m):
            self.member_pids[gid] = list(m.get("pids", []))
            self.counters["members_misplaced"] += int(m.get("misplaced", 0))
            self._emit(self.clock.at(m["t"]), gid, Kind.READY)

    def _forget_members(self, gid: int) -> None:
        self.readiness.drop(gid)
        self.member_pids.pop(gid, None)

    def _on_finished(self, m: dict[str, Any]) -> None:
        self._forget_members(m["id"])
        self.running.pop(m["id"], None)
        self.pending.pop(m["id"], None)
        self.jobs.pop(m["id"], None)
        self.counters["finished"] += 1
        self._emit(self.clock.at(m["t"]), m["id"], Kind.FINISHED)

    def _on_lost(self, m: dict[str, Any]) -> None:
        gid, t, reason = m["id"], self.clock.at(m["t"]), m.get("reason", "")
        job = self.jobs.get(gid)
        if job is None:
            return
        self._forget_members(gid)
        nodes = self.running.pop(gid, [])
        if reason == "evicted":
            self.counters["evicted"] += 1
            still = 0
        else:       # a raylet died: its bundles wait for the GCS, the others stay reserved
            lost = set(m.get("lost", []))
            still = job.members - len(lost)
            self.partial[gid] = still
            self.running[gid] = [n for i, n in enumerate(nodes) if i not in lost]
        self._emit(t, gid, Kind.EVICTED, still, reason)
        self._emit(t, gid, Kind.REQUEUED, still, reason)
        self.pending[gid] = job

    def _on_failed(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        self._forget_members(gid)
        for held in (self.pending, self.running, self.partial, self.jobs):
            held.pop(gid, None)
        self.counters["failed"] += 1
        self._emit(self.clock.at(m["t"]), gid, Kind.FAILED, 0, m.get("reason", ""))

    def _on_cp(self, m: dict[str, Any]) -> None:
        self.cp = m

    def _on_node_marked_dead(self, m: dict[str, Any]) -> None:
        for entry in self.node_fail_log:
            if entry["node_id"] == m["node_id"]:
                entry["gcs_marked_dead_after_s"] = round(self.clock.at(m["t"]) - entry["t"], 3)

    def _on_error(self, m: dict[str, Any]) -> None:
        self.errors.append(m.get("error", ""))
        if len(self.errors) > 100:
            del self.errors[:50]

    def _on_eof(self, m: dict[str, Any]) -> None:
        self.errors.append(f"driver exited (rc={m['rc']})")

    def _prefill_report(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        if m.get("ev") == "ready" and gid in self._prefill_wanted:
            node, _ = self.prefill[gid] = self._prefill_wanted.pop(gid)
            if [self.node_index.get(n) for n in m.get("nodes", [])] != [node]:
                self.counters["prefill_misplaced"] += 1
        elif m.get("ev") in ("finished", "failed", "lost"):
            self.prefill.pop(gid, None)
            self._prefill_wanted.pop(gid, None)

    # -- chaos -------------------------------------------------------------------------------
    def _nodes(self, action: ChaosAction) -> set[int]:
        return {int(n) % self.n for n in action.params["nodes"]}

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        if self.existing:
            raise ChaosUnsupported(attach.NODE_CHAOS_UNSUPPORTED)
        for i in sorted(self._nodes(action) - self.dead):
            node_id = self.fleet.kill_raylet(i)["node_id"]
            killed = time.monotonic()
            self.dead.add(i)
            self.node_fail_log.append({"t": round(self.clock.at(killed), 3), "node": i, "node_id": node_id,
                                       "groups": sorted(j for j, ns in self.running.items() if i in ns)})
            self._send(op="node_dead", node_id=node_id, t=killed)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        if self.existing:
            raise ChaosUnsupported(attach.NODE_CHAOS_UNSUPPORTED)
        # A raylet takes seconds to boot: do not stall the open-loop driver meanwhile.
        threading.Thread(target=self._restart, args=(sorted(self._nodes(action) & self.dead),), daemon=True).start()

    def _restart(self, nodes: list[int]) -> None:
        for i in nodes:
            try:
                self._restarted.put((i, self.fleet.restart_node(i)["node"]["node_id"], None))
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                self._restarted.put((i, None, f"node_recover {i}: {e}"))

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        model = self.ctx.fleet
        cpus_per_gpu = max(1, model.cpus_per_node // model.gpus_per_node)
        for node, gpus in action.params["placements"]:
            node, gpus = int(node) % self.n, int(gpus)
            if node in self.dead or gpus <= 0:
                continue
            gid = next(self._prefill_ids)
            self._prefill_wanted[gid] = (node, gpus)
            self.counters["prefill_groups"] += 1
            bundle = {"GPU": float(gpus), "CPU": float(gpus * cpus_per_gpu)}
            if self.existing:    # pinned by the node's ray.io/node-id label: no custom resource there
                self._send(op="prefill", id=gid, hold_s=action.params.get("duration_s"), bundles=[bundle],
                           pin=self.node_ids[node])
            else:
                self._send(op="prefill", id=gid, hold_s=action.params.get("duration_s"),
                           bundles=[{**bundle, node_resource(node): 0.001}])

    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        # Ray cannot take one bundle away from a group: eviction removes the whole group and
        # creates it again (a gang restart), the way an operator would preempt it.
        rng = np.random.default_rng([self.ctx.seed, len(self.jobs), self.counters["evicted"]])
        running = sorted(j for j in self.running if j not in self.partial)
        for j in rng.permutation(running)[:int(action.params.get("members", 1))] if running else []:
            self._send(op="evict", id=int(j))

    # -- whole-gang requeue (loadgen/drive/lifecycle.py: a failed start under the requeue policy) -----
    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Like evict, for one gang and reported at once: its actors and group are removed and the
        group created again (ADMITTED when it is). A gang that is not running is left alone."""
        self._observe(now)          # a finish or a loss already reported wins over the restart
        job = self.jobs.get(job_id)
        if job is None or job_id not in self.running or job_id in self.partial:
            return self._take()
        self._forget_members(job_id)
        self.running.pop(job_id)
        self.pending[job_id] = job
        self.counters["restarted"] += 1
        self._send(op="requeue", id=job_id)
        self._emit(now, job_id, Kind.EVICTED, 0, reason)
        self._emit(now, job_id, Kind.REQUEUED, 0, reason)
        return self._take()

    # -- observation -------------------------------------------------------------------------
    def used_per_node(self) -> np.ndarray:
        used = np.zeros(self.n, dtype=np.int64)
        for gid, nodes in self.running.items():
            job = self.jobs.get(gid)
            for n in nodes:
                if job and 0 <= n < self.n:
                    used[n] += job.gpus_per_member
        for node, gpus in self.prefill.values():
            used[node] += gpus
        used[sorted(self.dead)] = 0        # a killed raylet's reservations are gone with it
        return np.minimum(used, self.ctx.fleet.gpus_per_node)

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        return ((job, self.partial.get(gid, 0), gid not in self.pending) for gid, job in self.jobs.items())

    def live_control_plane(self) -> dict[str, Any]:
        gcs = self.cp.get("gcs_groups", {})
        since = self.clock.now() - 10.0
        return {"pending_groups": len(self.pending),
                "groups_per_s": round(sum(1 for t in reversed(self.ready_t) if t >= since) / 10.0, 3),
                "raylets_alive": self.cp.get("raylets_alive"),
                "gcs_pending_groups": gcs.get("PENDING", 0) + gcs.get("RESCHEDULING", 0),
                "infeasible_groups": gcs.get("INFEASIBLE", 0)}

    def control_plane(self) -> dict[str, Any]:
        self._observe(self.clock.now())
        rt = np.array(self.ready_t)
        span = float(rt.max() - rt.min()) if len(rt) > 1 else 0.0
        return {
            "model": "real", "ray_version": _ray_version(),
            "nodes_kind": "attached" if self.existing else self.nodes_kind,
            "raylets": self.n, "raylets_alive": self.cp.get("raylets_alive"),
            **self._fakelet_figures(),
            "gcs_groups_by_state": self.cp.get("gcs_groups", {}),
            **self.counters,
            "groups_created": self.counters["groups_ready"],      # the simulated Ray's name for it
            "infeasible_groups": self.cp.get("gcs_groups", {}).get("INFEASIBLE", 0),
            "groups_per_s_mean": round(len(rt) / span, 3) if span > 0 else None,
            "gcs_scheduling_ms_p50": _pct(self.sched_ms, 50), "gcs_scheduling_ms_p99": _pct(self.sched_ms, 99),
            "gcs_creation_ms_p50": _pct(self.e2e_ms, 50), "gcs_creation_ms_p99": _pct(self.e2e_ms, 99),
            "scheduling_attempts_max": max(self.attempts) if self.attempts else None,
            "node_failures": self.node_fail_log,
            "fleet_boot_s": round(self.fleet.boot_s, 2) if self.fleet.boot_s else None,
            "attached": self.address if self.existing else None,
            "placement_group_prefix": pg_prefix(self.label),
            "errors": self.errors[-10:],
            **self.readiness.figures(),
            # the GCS's own scheduling latency of every created group, summed: its busy time
            "busy_s": {"gcs-placement-groups": round(sum(self.sched_ms) / 1000.0, 6)},
        }

    def _fakelet_figures(self) -> dict[str, Any]:
        shards = self.fleet.fakelets
        if shards is None:
            return {}
        try:
            stats = shards.stats()
        except Exception as e:  # noqa: BLE001 - the figures are best effort at the end of a run
            stats = {"error": f"{type(e).__name__}: {e}"}
        alive = self.cp.get("raylets_alive")
        if isinstance(stats.get("alive"), int) and alive is not None:
            # nodes the GCS declared dead while their fakelet was answering: the fleet fell behind
            stats["false_deaths"] = max(0, stats["alive"] - alive)
        return {"fakelets": {"syncer": self.fakelet_syncer, "front": self.settings.front, "processes": len(shards.procs),
                             "gcs_load_poll_ms": self.gcs_load_poll_ms,
                             "boot_s": round(shards.boot_s, 2), "head_boot_s": round(self.fleet.head_boot_s, 2),
                             **stats}}

    def _send(self, **msg: Any) -> None:
        if self.driver is None:
            raise RayTargetError("ray target is not started")
        self.driver.send(msg)


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _ray_version() -> str | None:
    try:
        return version("ray")
    except PackageNotFoundError:
        return None
