"""The Ray fleet launcher: `python -m fakes.ray.serve SPEC.json [--detach READY.json]`, in its own session.

The only side of the fleet that imports ray. It builds the cluster with ray.cluster_utils.Cluster:
a resource-less head (GCS, API server, autoscaler monitor) plus one raylet per fleet node declaring
num_gpus, num_cpus, the node's custom resource (fleet.node_resource) and the fleet's leaf/spine/GPU
model labels. It replies {"event":"ready",...} once every raylet registered, then answers one JSON
command per stdin line (kill, restart, stop); EOF on stdin (the parent died) also stops it.

Detached (`--detach READY.json`, what `gangstorm cluster up ray` starts, fakes/ray/launch.py): no
commands; the ready (or error) message is written to READY.json (atomically, by rename), then the
launcher runs until SIGTERM/SIGINT/SIGHUP and shuts the cluster down (Cluster.shutdown) on it.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from fakes.ray.detached import run_detached
from fakes.ray.fleet import HEAD_NAME
from fakes.real.procfs import processes
from fakes.real.procs import session_pids

BOOT_GRACE_S = 180.0      # extra wait for a raylet on a loaded machine
ADD_ATTEMPTS = 3


class Launcher:
    def __init__(self, spec: dict[str, Any]):
        from ray.cluster_utils import Cluster
        self.cluster = Cluster(shutdown_at_exit=True)
        self.store = int(spec["object_store_bytes"])
        self.specs = {s["index"]: s for s in spec["nodes"]}
        self.handles: dict[int, dict[str, Any]] = {}
        self.tmpdir = os.environ.get("RAY_TMPDIR", "")

    def boot(self) -> dict[str, Any]:
        head = self.add_head()
        head_info = {"node_id": head.node_id, "raylet_pid": self.raylet_pid(HEAD_NAME)}
        nodes = [self.add(s) for s in self.specs.values()]
        return {"event": "ready", "address": self.cluster.address, "head": head_info, "nodes": nodes}

    def add_head(self):
        """The head node, retried like a fleet node: on a loaded machine the head raylet too can
        abort waiting for its agents' port files (NodeManager::WaitForDashboardAgentPorts; seen
        once in 32-node calibration runs). What a failed attempt started is killed first: every
        other process of this launcher's session."""
        for attempt in range(1, ADD_ATTEMPTS + 1):
            try:
                return self.cluster.add_node(num_cpus=0, num_gpus=0, include_dashboard=False,
                                             object_store_memory=self.store, node_name=HEAD_NAME)
            except Exception as e:  # noqa: BLE001
                if "timed out during startup" not in str(e) or attempt == ADD_ATTEMPTS:
                    raise
                print(f"ray_fleet: head attempt {attempt} failed ({e}); retrying", file=sys.stderr)
                for pid in session_pids(os.getsid(0)):
                    if pid != os.getpid():
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                time.sleep(1.0)

    def raylet_pid(self, name: str) -> int | None:
        found = [pid for pid, cmd in processes(("raylet",), self.tmpdir) if f"--node-name={name} " in cmd + " "]
        return max(found) if found else None

    def add(self, s: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(1, ADD_ATTEMPTS + 1):
            try:
                try:
                    node_id = self.cluster.add_node(
                        num_cpus=s["num_cpus"], num_gpus=s["num_gpus"], resources=s["resources"],
                        labels=s["labels"], node_name=s["name"], object_store_memory=self.store).node_id
                except Exception as e:  # noqa: BLE001
                    # Node() gives a raylet 30 s to register; a loaded machine can need longer.
                    if "timed out during startup" not in str(e):
                        raise
                    node_id = self.registered(s["name"], BOOT_GRACE_S)
                break
            except Exception as e:  # noqa: BLE001
                # Under heavy load the raylet can abort waiting for its agents' port files
                # (NodeManager::WaitForDashboardAgentPorts): kill what is left and start it again.
                pid = self.raylet_pid(s["name"])
                if pid:
                    os.kill(pid, signal.SIGKILL)
                if attempt == ADD_ATTEMPTS:
                    raise
                print(f"ray_fleet: {s['name']} attempt {attempt} failed ({e}); retrying", file=sys.stderr)
        h = {"index": s["index"], "name": s["name"], "node_id": node_id, "raylet_pid": self.raylet_pid(s["name"])}
        self.handles[s["index"]] = h
        return h

    def registered(self, name: str, timeout: float) -> str:
        """The node id once the GCS lists `name` alive; raises if its raylet is gone for 5 s."""
        deadline = time.monotonic() + timeout
        gone_since = None
        while time.monotonic() < deadline:
            for row in self.cluster.global_state.node_table():
                if row.get("NodeName") == name and row.get("Alive"):
                    return row["NodeID"]
            if self.raylet_pid(name) is None:
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > 5:
                    raise RuntimeError(f"raylet {name} exited before registering (see its raylet.*.out)")
            else:
                gone_since = None
            time.sleep(0.5)
        raise TimeoutError(f"raylet {name} did not register with the GCS in {timeout:.0f} s")

    # -- commands (op_<op>), each returning its reply ------------------------------------------
    def op_kill(self, msg: dict[str, Any]) -> dict[str, Any]:
        h = self.handles[int(msg["node"])]
        os.kill(h["raylet_pid"], signal.SIGKILL)
        return {"ok": True, "node_id": h["node_id"], "raylet_pid": h["raylet_pid"], "t": time.time()}

    def op_restart(self, msg: dict[str, Any]) -> dict[str, Any]:
        i = int(msg["node"])
        old = self.handles.get(i)
        if old and old.get("raylet_pid"):
            try:
                os.kill(old["raylet_pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        return {"ok": True, "node": self.add(self.specs[i])}


def serve_detached(spec_path: str, ready_path: str) -> int:
    """Boot, write the ready message to ready_path, run until a stop signal, shut down."""
    launcher = None

    def boot() -> dict[str, Any]:
        nonlocal launcher
        launcher = Launcher(json.loads(Path(spec_path).read_text()))
        return launcher.boot()

    def shutdown() -> None:
        if launcher is not None:
            launcher.cluster.shutdown()
        print("ray_fleet: stopped", file=sys.stderr)
    return run_detached(ready_path, boot, shutdown)


def serve(spec_path: str) -> int:
    # Replies go to the original stdout; anything Ray prints goes to the log (stderr).
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")

    try:
        launcher = Launcher(json.loads(Path(spec_path).read_text()))
        reply(launcher.boot())
    except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the session
        reply({"event": "error", "error": f"{type(e).__name__}: {e}"})
        return 1
    for line in sys.stdin:
        try:
            msg = json.loads(line)
            if msg["op"] == "stop":
                break
            handler = getattr(launcher, f"op_{msg['op']}", None)
            reply(handler(msg) if handler else {"ok": False, "error": f"unknown op {msg['op']!r}"})
        except Exception as e:  # noqa: BLE001
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    try:
        launcher.cluster.shutdown()
    finally:
        try:
            reply({"event": "stopped"})
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--detach":
        sys.exit(serve_detached(sys.argv[1], sys.argv[3]))
    if len(sys.argv) != 2:
        print("usage: python -m fakes.ray.serve SPEC.json [--detach READY.json]", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1]))
