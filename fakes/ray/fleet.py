"""A local Ray cluster of fake-GPU raylets, all on 127.0.0.1: the client side (never imports ray).

`RayFleet` spawns `python -m fakes.ray.serve SPEC` (the launcher, which builds the cluster) in its
own session and sends it one JSON command per line: kill a raylet, restart a node, stop.

Why not `ray start`: Ray resolves 127.0.0.1 given as --node-ip-address or --address to the
machine's routable address (services.resolve_ip_for_localhost), so clients dial the GCS on the
other interface. Ray keeps the loopback address only when RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
and with that setting the `ray start` CLI refuses to add worker nodes; the launcher builds nodes
with ray.cluster_utils.Cluster, through the same Node class without that check. With a loopback
node IP every Ray listener (GCS, raylets, dashboard/runtime-env agents, metrics servers) binds to
127.0.0.1.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fakes.ray.fakelets.shards import FakeletShards
from fakes.ray.pipe import JsonPipe
from fakes.ray.share import accelerator_resource
from fakes.real.procfs import processes
from fakes.real.procs import spawn, stop_child
from loadgen.model.fleet import Fleet

REPO = Path(__file__).resolve().parents[2]
HEAD_NAME = "ray-head"                    # the resource-less head node: GCS, API server, monitor
FAKELET_LABEL = "gangstorm.io/fakelet"   # "true" on every fakelet node (nothing can run there)
OBJECT_STORE_BYTES = 75 * 1024 * 1024    # Ray's minimum; no objects are stored here

# Inherited by every Ray process the launcher starts, and by the driver.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",   # keep the node IP on loopback (see module doc)
    "RAY_USAGE_STATS_ENABLED": "0",              # no usage reporting to the internet
    "RAY_enable_worker_prestart": "0",           # no idle Python workers: groups need none
    "RAY_prestart_worker_first_driver": "0",
    "RAY_enable_metrics_collection": "0",        # less periodic CPU per raylet and agent
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    "RAY_BACKEND_LOG_LEVEL": "warning",
    "RAY_agent_register_timeout_ms": "120000",   # slow agent start on a loaded machine
}


class FleetError(RuntimeError):
    pass


def node_resource(i: int) -> str:
    """The custom resource only node i declares (prefill bundles ask for it to be pinned there)."""
    return f"gs_node_{i:05d}"


def node_specs(fleet: Fleet) -> list[dict[str, Any]]:
    """What each node declares: its GPUs, CPUs, pinning resource and labels; on a fleet with node
    pools also its GPU model as Ray's accelerator type (fakes/ray/share.py)."""
    return [{"index": i, "name": fleet.node_name(i), "num_gpus": int(fleet.gpus_of[i]),
             "num_cpus": fleet.cpus_per_node,
             "resources": {node_resource(i): 1, **({accelerator_resource(fleet.pool(i).model().name): 1}
                                                    if fleet.pools else {})},
             "labels": fleet.node_labels(i)} for i in range(fleet.nodes)]


def ray_processes(marker: str | None = None) -> list[tuple[int, str]]:
    """(pid, cmdline) of live raylet / gcs_server processes, optionally only those whose command
    line contains `marker` (a fleet's RAY_TMPDIR)."""
    return processes(("raylet", "gcs_server"), marker)


class RayFleet:
    """The raylets of a Fleet model, started by start() and all stopped by stop()."""

    def __init__(self, model: Fleet, workdir: Path | None = None, boot_timeout_s: float = 600.0,
                 kind: str = "raylet", syncer: str = "node", per_process: int = 2000,
                 gcs_config: dict[str, str] | None = None, ray_tmpdir: str | None = None,
                 front: str | None = None, extra_resources: dict[int, dict[str, float]] | None = None):
        self.model = model
        self.extra_resources = extra_resources or {}     # node index -> more custom resources it declares
        self.front = front                # fakelets: fakelet-front's path, or None (Python servers)
        self.given_tmpdir = ray_tmpdir    # `cluster up`'s own (fakes/ray/launch.py finds stragglers by it)
        self.kind, self.syncer, self.per_process = kind, syncer, per_process
        self.fakelets: FakeletShards | None = None
        self.gcs_config = dict(gcs_config or {})     # RAY_<setting> for the head's processes only
        self.head_boot_s = 0.0
        self.workdir = workdir           # logs; Ray's own temp dir stays short (unix socket paths)
        self.boot_timeout_s = boot_timeout_s
        self.address = ""
        self.nodes: list[dict[str, Any]] = []     # index, name, node_id, raylet_pid
        self.boot_s = 0.0
        self.ray_tmpdir = ""
        self._proc: subprocess.Popen | None = None
        self._pipe: JsonPipe | None = None
        self._lock = threading.Lock()

    @property
    def pgid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def env(self) -> dict[str, str]:
        """Environment a Ray driver needs to reach this fleet on loopback."""
        return {**RAY_ENV, "RAY_TMPDIR": self.ray_tmpdir}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> RayFleet:
        if importlib.util.find_spec("ray") is None:
            raise FleetError("ray is not installed in this Python: run `make venv` "
                             "(pyproject depends on ray[default])")
        self.ray_tmpdir = self.given_tmpdir or tempfile.mkdtemp(prefix="gsray-", dir="/tmp")
        os.makedirs(os.path.join(self.ray_tmpdir, "ray"), exist_ok=True)
        logdir = Path(self.workdir or self.ray_tmpdir)
        logdir.mkdir(parents=True, exist_ok=True)
        spec = logdir / "ray-fleet-spec.json"
        specs = node_specs(self.model)
        for s in specs:
            s["resources"].update(self.extra_resources.get(s["index"], {}))
        spec.write_text(json.dumps({"nodes": specs if self.kind == "raylet" else [],
                                    "object_store_bytes": OBJECT_STORE_BYTES}))
        log = logdir / "ray-fleet.log"
        t0 = time.monotonic()
        self._proc = spawn([sys.executable, "-m", "fakes.ray.serve", spec],
                           env={**os.environ, **self.env(), **self.gcs_config},
                           cwd=REPO, pipes=True, stderr_log=log)
        self._pipe = JsonPipe(self._proc, "ray fleet launcher", log)
        try:
            ready = self._pipe.read(self.boot_timeout_s)
            if ready.get("event") != "ready":
                raise FleetError(f"ray fleet launcher failed: {ready}")
        except BaseException:
            self.stop()
            raise
        self.address, self.nodes = ready["address"], ready["nodes"]
        self.head_boot_s = time.monotonic() - t0
        if self.kind == "fakelet":
            try:
                self.fakelets = FakeletShards(self.address, specs, self.syncer, self.per_process, logdir,
                                              {**os.environ, **self.env()}, self.front).start(self.boot_timeout_s)
            except BaseException:
                self.stop()
                raise
            self.nodes = self.fakelets.nodes
        self.boot_s = time.monotonic() - t0
        return self

    def gcs_pid(self) -> int | None:
        found = processes(("gcs_server",), self.ray_tmpdir) if self.ray_tmpdir else []
        return found[0][0] if found else None

    def stop(self, grace_s: float = 20.0) -> None:
        """Graceful Cluster.shutdown, then the launcher's whole session is stopped."""
        shards, self.fakelets = self.fakelets, None
        if shards is not None:
            shards.stop()
        proc, self._proc, self._pipe = self._proc, None, None
        if proc is not None:
            stop_child(proc, grace_s)
        tmp, self.ray_tmpdir = self.ray_tmpdir, ""
        if tmp:
            if self.workdir:     # Ray's session logs go next to our own
                try:
                    shutil.copytree(os.path.join(tmp, "ray"), Path(self.workdir) / "ray-session",
                                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("sockets", "*.sock"),
                                    symlinks=True)
                except (OSError, shutil.Error):
                    pass
            shutil.rmtree(tmp, ignore_errors=True)

    # -- commands ----------------------------------------------------------------------------
    def kill_raylet(self, index: int) -> dict[str, Any]:
        if self.fakelets is not None:
            with self._lock:
                return self.fakelets.kill(index)
        return self._call({"op": "kill", "node": index})

    def restart_node(self, index: int) -> dict[str, Any]:
        if self.fakelets is not None:
            with self._lock:
                return self.fakelets.restart(index)
        reply = self._call({"op": "restart", "node": index}, timeout=120)
        for n in self.nodes:
            if n["index"] == index:
                n.update(reply["node"])
        return reply

    def gpu_slices(self, timeout_s: float = 10.0) -> list[dict[str, Any]] | None:
        """Fakelets: which GPU each bundle holds, from their books (None with raylets). Under the
        fleet's lock: a node_recover thread may be talking to the same shard."""
        if self.fakelets is None:
            return None
        with self._lock:
            return self.fakelets.gpu_slices(timeout_s)

    def _call(self, msg: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        # One request/reply at a time: node_recover calls this from a background thread.
        with self._lock:
            if self._pipe is None:
                raise FleetError("ray fleet is not running")
            self._pipe.send(msg)
            reply = self._pipe.read(timeout)
        if not reply.get("ok"):
            raise FleetError(f"ray fleet {msg['op']} failed: {reply.get('error')}")
        return reply
