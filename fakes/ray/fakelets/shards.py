"""The parent's side of a fakelet fleet (never imports ray or grpc): the fleet's nodes split over
a few `python -m fakes.ray.fakelets.serve` processes, each in its own session.

One Python process answers about a thousand nodes' health checks and resource-load polls
comfortably; a 10,000-node fleet is split into shards of `per_process` nodes so that no loop
falls behind the GCS's health-check deadline (docs/ray-fakelets.md). Shards boot at once.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fakes.ray.pipe import ChildError, JsonPipe
from fakes.real.procs import session_pids, spawn, stop_child

REPO = Path(__file__).resolve().parents[3]
PORT_BASE = 12000          # node i listens on PORT_BASE + i when free: below the ephemeral range
MEMORY_BYTES = 2 * 1024 ** 4          # declared per node: a typical 8-GPU server's 2 TiB
OBJECT_STORE_BYTES = 75 * 1024 * 1024


class ShardError(RuntimeError):
    pass


def fakelet_specs(node_specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each fake node declares, from fleet.node_specs: the resources a raylet started with
    --num-gpus/--num-cpus/--resources would report, plus its loopback node resource."""
    return [{"index": s["index"], "name": s["name"], "labels": s["labels"], "port": PORT_BASE + s["index"],
             "resources": {"GPU": float(s["num_gpus"]), "CPU": float(s["num_cpus"]), "memory": float(MEMORY_BYTES),
                           "object_store_memory": float(OBJECT_STORE_BYTES), "node:127.0.0.1": 1.0,
                           **{k: float(v) for k, v in s["resources"].items()}}}
            for s in node_specs]


class FakeletShards:
    def __init__(self, gcs_address: str, node_specs: list[dict[str, Any]], syncer: str, per_process: int,
                 workdir: Path, env: dict[str, str], front: str | None = None):
        self.gcs_address, self.syncer, self.workdir, self.env = gcs_address, syncer, Path(workdir), env
        self.front = front          # fakelet-front's path (schedulers.ray.fakelet_front: go), or None
        specs = fakelet_specs(node_specs)
        per = max(1, int(per_process))
        self.slices = [specs[i:i + per] for i in range(0, len(specs), per)]
        self.procs: list[subprocess.Popen] = []
        self.pipes: list[JsonPipe] = []
        self.shard_of: dict[int, int] = {}
        self.nodes: list[dict[str, Any]] = []
        self.boot_s = 0.0
        self.registered_s: list[float] = []

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def all_pids(self) -> list[int]:
        """The shards and what runs in their sessions (fakelet-front with front go): what the
        fleet costs in CPU, memory and file descriptors."""
        return [p for s in self.pids() for p in session_pids(s)]

    def start(self, timeout_s: float = 600.0) -> FakeletShards:
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            for k, part in enumerate(self.slices):
                spec = self.workdir / f"fakelets-{k}.json"
                spec.write_text(json.dumps({"gcs": self.gcs_address, "syncer": self.syncer, "front": self.front,
                                             "nodes": part}))
                log = self.workdir / f"fakelets-{k}.log"
                proc = spawn([sys.executable, "-m", "fakes.ray.fakelets.serve", spec], env=self.env, cwd=REPO,
                             pipes=True, stderr_log=log)
                self.procs.append(proc)
                self.pipes.append(JsonPipe(proc, f"fakelet shard {k}", log))
            for k, pipe in enumerate(self.pipes):
                ready = pipe.read(max(1.0, timeout_s - (time.monotonic() - t0)))
                if ready.get("event") != "ready":
                    raise ShardError(f"fakelet shard {k} failed: {ready.get('error', ready)}")
                self.registered_s.append(ready["registered_s"])
                for n in ready["nodes"]:
                    self.shard_of[n["index"]] = k
                    self.nodes.append({**n, "raylet_pid": ready["pid"]})
        except BaseException:
            self.stop()
            raise
        self.nodes.sort(key=lambda n: n["index"])
        self.boot_s = time.monotonic() - t0
        return self

    def kill(self, index: int) -> dict[str, Any]:
        return self._call(index, {"op": "kill", "node": index})

    def restart(self, index: int) -> dict[str, Any]:
        reply = self._call(index, {"op": "restart", "node": index})
        for n in self.nodes:
            if n["index"] == index:
                n.update(reply["node"])
        return reply

    def stats(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Every shard's counters, summed; loop lag and registration time as the worst shard's."""
        total: dict[str, Any] = {"shards": len(self.pipes), "nodes": 0, "alive": 0, "bundles": 0, "calls": {},
                                 "unimplemented": {}, "views_sent": 0, "syncer_messages_received": 0,
                                 "loop_lag_max_s": 0.0, "registered_s": 0.0, "gc_frozen_objects": None}
        for pipe in self.pipes:
            pipe.send({"op": "stats"})
            s = pipe.read(timeout_s)["stats"]
            for key in ("nodes", "alive", "bundles", "views_sent", "syncer_messages_received"):
                total[key] += s[key]
            for key in ("loop_lag_max_s", "registered_s"):
                total[key] = max(total[key], s[key])
            frozen = s.get("gc_frozen_objects", 0)     # the least frozen shard's
            total["gc_frozen_objects"] = frozen if total["gc_frozen_objects"] is None else \
                min(total["gc_frozen_objects"], frozen)
            for key in ("calls", "unimplemented"):
                for method, n in s[key].items():
                    total[key][method] = total[key].get(method, 0) + n
        return total

    def gpu_slices(self, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Every shard's bundles with the GPU instance each holds (Book.slices), by node."""
        out: list[dict[str, Any]] = []
        for pipe in self.pipes:
            pipe.send({"op": "slices"})
            reply = pipe.read(timeout_s)
            if not reply.get("ok"):
                raise ShardError(f"fakelet slices failed: {reply.get('error')}")
            out.extend(reply["slices"])
        return out

    def stop(self, grace_s: float = 40.0) -> int:
        """Ask every shard to unregister its live nodes and exit; then stop their sessions."""
        procs, pipes, self.procs, self.pipes = self.procs, self.pipes, [], []
        unregistered = 0
        for pipe in pipes:
            try:
                if pipe.proc.poll() is None:
                    pipe.send({"op": "stop"})
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        for pipe in pipes:
            try:
                while True:
                    m = pipe.read(max(0.1, deadline - time.monotonic()))
                    if m.get("event") == "stopped":
                        unregistered += int(m.get("unregistered", 0))
                        break
            except (ChildError, OSError, ValueError):
                pass
        for proc in procs:
            stop_child(proc, 5)
        return unregistered

    def _call(self, index: int, msg: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        if index not in self.shard_of:
            raise ShardError(f"no fakelet node {index}")
        pipe = self.pipes[self.shard_of[index]]
        pipe.send(msg)
        reply = pipe.read(timeout)
        if not reply.get("ok"):
            raise ShardError(f"fakelet {msg['op']} {index} failed: {reply.get('error')}")
        return reply
