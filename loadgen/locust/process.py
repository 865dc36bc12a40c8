"""Everything one Locust process (local runner or worker) runs for a gangstorm test.

It owns the shard's targets (one Lane per scheduler), the tenant pool users draw from, the
open-loop sender and the driver greenlet that advances the targets on the wall clock.
"""
from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import gevent

from loadgen.drive.lifecycle import Lifecycle
from loadgen.drive.timescale import scaled_chaos, scaled_job
from loadgen.locust.lanes import Fire, Lane, OpenLoop
from loadgen.locust.options import Settings
from loadgen.locust.plan import Plan, build, shard
from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext

log = logging.getLogger("gangstorm.locust")
LEAD_IN_S = 1.0     # the schedule starts this long after test start, so users are spawned in time


class Process:
    @staticmethod
    def run_id(run_dir: Path | None) -> str:
        """The run label of what this process creates on an existing cluster: the run folder's name
        and a random suffix (two runs never share one)."""
        import secrets
        return f"{Path(run_dir).name if run_dir else 'locust'}-{secrets.token_hex(3)}"

    def __init__(self, settings: Settings, fire: Fire, shard_index: int = 0, shard_count: int = 1,
                 run_dir: Path | None = None, plan: Plan | None = None,
                 on_pump: Callable[[Process], None] | None = None, role: str = "all",
                 t0_epoch: float | None = None, run_id: str | None = None):
        """role "all": this process sends its shard and observes its own targets (split-fleet
        mode: each process drives its own share of the fleet). On one existing cluster shared by
        several processes, "submit" (workers) sends its tenants' jobs to the whole fleet and
        observes nothing, and "observe" (the master) sends nothing, watches the cluster once,
        runs the chaos plan and cleans up. t0_epoch: the schedule's common start (time.time())."""
        self.settings = settings
        self.plan = plan or build(settings)
        self.role = role
        self.shard = shard(self.plan, shard_index, shard_count)
        if role == "submit":
            self.shard = replace(self.shard, fleet=self.plan.fleet, chaos=[])
        elif role == "observe":
            self.shard = replace(shard(self.plan, 0, 1), tenants=[], jobs=[])
        self.on_pump = on_pump
        sc = settings.scenario
        real = settings.wall
        k = 1.0 if real else settings.time_scale
        sent = self.plan.jobs if role == "observe" else self.shard.jobs
        jobs = {j.id: (scaled_job(j, settings.time_scale) if real else j) for j in sent}
        chaos = scaled_chaos(self.shard.chaos, settings.time_scale) if real else list(self.shard.chaos)
        sample_wall = max(sc.data["sample_every_s"] / settings.time_scale, 0.5)
        self.lanes: list[Lane] = []
        try:
            for name in settings.schedulers:
                ctx = TargetContext(fleet=self.shard.fleet, config=sc.scheduler_config(name),
                                    control_plane=sc.section("control_plane"), seed=sc.seed,
                                    run_dir=(Path(run_dir) / f"{name}-{settings.backend}-shard{shard_index}"
                                             if run_dir else None),
                                    time_scale=settings.time_scale if real else 1.0,
                                    existing=settings.existing, run_id=run_id or self.run_id(run_dir),
                                    role=role, startup=sc.startup().scaled(settings.time_scale if real else 1.0))
                if ctx.run_dir is not None and real:
                    ctx.run_dir.mkdir(parents=True, exist_ok=True)
                target = Lifecycle(target_class(name, settings.backend)(ctx), ctx.startup, ctx.fleet, sc.seed)
                if role == "observe":
                    target.expect(jobs)
                target.start()
                self.lanes.append(Lane(name, target, k, jobs, chaos, sample_wall, fire, observes=role != "submit"))
        except BaseException:
            for lane in self.lanes:
                lane.target.stop()
            raise
        # The workload and the targets' state live for the whole run: move them out of the cyclic
        # GC's sight so full collections (pauses of 100+ ms with many objects) stay short.
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 50, 100)   # young collections rarer: per-job garbage is acyclic anyway
        t0 = time.monotonic() + LEAD_IN_S if t0_epoch is None else time.monotonic() + (t0_epoch - time.time())
        for lane in self.lanes:
            lane.t0 = t0
        self.loop = OpenLoop(self.lanes, settings.time_scale)
        self.loop_t0 = t0
        self.by_tenant: dict[str, list[Job]] = {t: [] for t in self.shard.tenants}
        for j in self.shard.jobs:
            self.by_tenant.setdefault(j.tenant, []).append(j)
        self.unclaimed = [t for t in self.shard.tenants if self.by_tenant.get(t)]
        self.helpers: list[gevent.Greenlet] = []
        self.finished = False
        self.tick = 0.05 if real else 0.02
        self.driver = gevent.spawn(self._drive)
        # Users spawned by then have claimed their tenants; the process sends the rest. (Locust's
        # spawning_complete also triggers this, but a worker does not always get that message.)
        self.helpers.append(gevent.spawn_later(LEAD_IN_S, self.adopt_leftovers))

    def start_at(self, t0_epoch: float) -> None:
        """Move the schedule's start to t0_epoch (time.time()), shared with other processes."""
        t0 = time.monotonic() + (t0_epoch - time.time())
        for lane in self.lanes:
            lane.t0 = t0
        self.loop_t0 = t0

    @property
    def scenario_over(self) -> bool:
        """Arrivals and drain are behind us (wall clock from this process's schedule start)."""
        return time.monotonic() - self.loop_t0 >= self.plan.wall_duration_s

    # --- tenants ------------------------------------------------------------------------------
    def claim(self) -> str | None:
        return self.unclaimed.pop(0) if self.unclaimed else None

    def run_tenant(self, tenant: str) -> None:
        """The open-loop schedule of one tenant; blocks until its last job is sent."""
        self.loop.run(self.by_tenant.get(tenant, []))

    def adopt_leftovers(self) -> None:
        """Fewer users than tenants: the process sends the rest itself, on the same schedule."""
        while self.unclaimed and not self.finished:
            tenant = self.unclaimed.pop(0)
            log.info("gangstorm: no user left for tenant %s; the process sends its jobs", tenant)
            self.helpers.append(gevent.spawn(self.run_tenant, tenant))

    # --- driver -------------------------------------------------------------------------------
    def _drive(self) -> None:
        failing: set[str] = set()
        while not self.finished:
            for lane in self.lanes:
                try:
                    lane.pump()
                except Exception as e:  # keep measuring the other lanes; say it once
                    if lane.name not in failing:
                        failing.add(lane.name)
                        log.exception("gangstorm: %s target failed in advance/snapshot: %s", lane.name, e)
            if self.on_pump:
                self.on_pump(self)
            gevent.sleep(self.tick)

    def take(self) -> dict:
        return {lane.name: lane.take() for lane in self.lanes}

    def finalize(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.loop.stop()
        for g in self.helpers:
            g.kill(block=False)
        if gevent.getcurrent() is not self.driver:
            self.driver.kill(block=True)
        for lane in self.lanes:
            try:
                lane.finish()
            except Exception:
                log.exception("gangstorm: %s target failed while stopping", lane.name)
