"""Bringing the fleet and the driver up (launched, or attached to a Ray cluster's GCS), the read-only
preflight survey, and stopping: the driver's last figures and, attached, the groups left behind."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from fakes.ray import attach
from fakes.ray.fleet import RAY_ENV, REPO
from fakes.ray.pipe import ChildError, JsonPipe
from fakes.ray.real.common import RayTargetError
from fakes.ray.survey import SurveyError, classify, survey
from fakes.real.procfs import mem_available_mib
from fakes.real.procs import spawn, stop_child
from loadgen.model.target import ClusterRefused


class RayCluster:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

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
        if self.role != "all" and not self.existing:
            raise ValueError(f"ray: the {self.role} role needs an existing cluster (--ray-address)")
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
        """Drive an existing cluster: checks as preflight, then only the driver process. A submitter
        only needs the address: the observer surveyed, maps the nodes and counts what is left."""
        self.address = self.existing.ray_address
        if self.role == "submit":
            self._start_driver(self.run_dir, {})
            return
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
        self.proc = spawn([sys.executable, "-m", "fakes.ray.driver", self.address, "--label", self.label,
                           "--role", self.role],
                          env={**os.environ, **RAY_ENV, **env}, cwd=REPO, pipes=True, stderr_log=log)
        self.driver = JsonPipe(self.proc, "ray driver process", log)
        hello = self.driver.read(120)
        if hello.get("ev") != "hello":
            raise RayTargetError(f"ray driver process failed: {hello.get('error', hello)} (log: {log})")

    def stop(self) -> None:
        proc, driver, self.proc, self.driver = self.proc, self.driver, None, None
        if proc is not None:
            self._stop_driver(proc, driver)
        self._close_slices()
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

    def _send(self, **msg: Any) -> None:
        if self.driver is None:
            raise RayTargetError("ray target is not started")
        self.driver.send(msg)
