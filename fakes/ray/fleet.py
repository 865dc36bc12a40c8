"""A local Ray cluster of fake-GPU raylets, all on 127.0.0.1.

`RayFleet` (this side never imports ray) spawns `python -m fakes.ray.fleet serve SPEC` in its own
session. That launcher builds the cluster with ray.cluster_utils.Cluster: a resource-less head
(GCS, API server, autoscaler monitor) plus one raylet per fleet node declaring num_gpus, num_cpus,
a per-node custom resource `gs_node_<i>` (to pin prefill bundles) and the fleet's leaf/spine/GPU
model labels. It then answers one JSON command per stdin line (kill a raylet, restart a node, stop).

Why not `ray start`: Ray resolves 127.0.0.1 given as --node-ip-address or --address to the
machine's routable address (services.resolve_ip_for_localhost), so clients dial the GCS on the
other interface. Ray keeps the loopback address only when RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
and with that setting the `ray start` CLI refuses to add worker nodes; Cluster builds nodes
through the same Node class without that check. With a loopback node IP every Ray listener (GCS,
raylets, dashboard/runtime-env agents, metrics servers) binds to 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.model.fleet import Fleet

OBJECT_STORE_BYTES = 75 * 1024 * 1024   # Ray's minimum; no objects are stored here
BOOT_GRACE_S = 180.0                      # extra wait for a raylet on a loaded machine

# Inherited by every Ray process the launcher starts.
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
    return f"gs_node_{i:05d}"


def node_specs(fleet: Fleet, nodes: int | None = None) -> list[dict[str, Any]]:
    n = fleet.nodes if nodes is None else nodes
    return [{
        "index": i,
        "name": fleet.node_name(i),
        "num_gpus": fleet.gpus_per_node,
        "num_cpus": fleet.cpus_per_node,
        "resources": {node_resource(i): 1},
        "labels": fleet.node_labels(i),
    } for i in range(n)]


def ray_missing_message() -> str | None:
    """None when ray is importable by the venv python; else how to get it."""
    try:
        import importlib.util
        if importlib.util.find_spec("ray") is not None:
            return None
    except Exception:
        pass
    return "ray is not installed in this Python: run `make venv` (pyproject depends on ray[default])"


@dataclass
class RayFleet:
    """Client side of the launcher. Use as a context manager, or call start()/stop()."""
    specs: list[dict[str, Any]]
    workdir: Path | None = None          # logs; Ray's own temp dir is short (unix socket paths)
    boot_timeout_s: float = 600.0
    object_store_bytes: int = OBJECT_STORE_BYTES
    address: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)   # index, name, node_id, raylet_pid
    head: dict[str, Any] = field(default_factory=dict)
    boot_s: float = 0.0
    _proc: subprocess.Popen | None = None
    _tmp: str = ""
    _log: Any = None
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_fleet(cls, fleet: Fleet, nodes: int | None = None, **kw) -> "RayFleet":
        return cls(node_specs(fleet, nodes), **kw)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "RayFleet":
        msg = ray_missing_message()
        if msg:
            raise FleetError(msg)
        self._tmp = tempfile.mkdtemp(prefix="gsray-", dir="/tmp")
        os.makedirs(os.path.join(self._tmp, "ray"))
        logdir = Path(self.workdir or self._tmp)
        logdir.mkdir(parents=True, exist_ok=True)
        spec_path = logdir / "ray-fleet-spec.json"
        spec_path.write_text(json.dumps({
            "nodes": self.specs, "object_store_bytes": self.object_store_bytes}))
        env = {**os.environ, **RAY_ENV, "RAY_TMPDIR": self._tmp}
        self._log = open(logdir / "ray-fleet.log", "ab")
        t0 = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "fakes.ray.fleet", "serve", str(spec_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
            start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))
        try:
            ready = self._read(self.boot_timeout_s)
            if ready.get("event") != "ready":
                raise FleetError(f"ray fleet launcher failed: {ready}")
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.monotonic() - t0
        self.address = ready["address"]
        self.head = ready["head"]
        self.nodes = ready["nodes"]
        return self

    def __enter__(self) -> "RayFleet":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pgid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def ray_tmpdir(self) -> str:
        return self._tmp

    def env(self) -> dict[str, str]:
        """Environment a Ray driver needs to reach this fleet on loopback."""
        return {**RAY_ENV, "RAY_TMPDIR": self._tmp}

    def stop(self, grace_s: float = 20.0) -> None:
        """Graceful Cluster.shutdown, then SIGTERM and SIGKILL to the launcher's whole session."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_child(proc, grace_s)
        if self._log:
            self._log.close()
            self._log = None
        if self._tmp:
            # Ray's session dir (logs) is copied next to our own logs when a workdir was given.
            if self.workdir:
                try:
                    shutil.copytree(os.path.join(self._tmp, "ray"), Path(self.workdir) / "ray-session",
                                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("sockets", "*.sock"),
                                    symlinks=True)
                except (OSError, shutil.Error):
                    pass
            shutil.rmtree(self._tmp, ignore_errors=True)

    # -- commands ----------------------------------------------------------------------------
    def kill_raylet(self, index: int) -> dict[str, Any]:
        return self._call({"op": "kill", "node": index})

    def restart_node(self, index: int) -> dict[str, Any]:
        reply = self._call({"op": "restart", "node": index}, timeout=120)
        for n in self.nodes:
            if n["index"] == index:
                n.update(reply["node"])
        return reply

    def info(self) -> dict[str, Any]:
        return self._call({"op": "info"})

    def pids(self) -> list[int]:
        """Every live process in the launcher's session (raylets, agents, GCS, the launcher)."""
        return session_pids(self.pgid) if self.pgid else []

    # -- plumbing ----------------------------------------------------------------------------
    def _call(self, msg: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        # One request/reply at a time: node_recover calls this from a background thread.
        with self._lock:
            if self._proc is None:
                raise FleetError("ray fleet is not running")
            self._send(self._proc, msg)
            reply = self._read(timeout)
        if not reply.get("ok"):
            raise FleetError(f"ray fleet {msg['op']} failed: {reply.get('error')}")
        return reply

    @staticmethod
    def _send(proc: subprocess.Popen, msg: dict[str, Any]) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        out = self._proc.stdout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FleetError(f"ray fleet launcher did not answer within {timeout:.0f} s")
            r, _, _ = select.select([out], [], [], min(left, 1.0))
            if r:
                line = out.readline()
                if not line:
                    raise FleetError(f"ray fleet launcher exited (rc={self._proc.poll()}); "
                                     f"see {getattr(self._log, 'name', 'its log')}")
                return json.loads(line)
            if self._proc.poll() is not None:
                raise FleetError(f"ray fleet launcher exited (rc={self._proc.returncode}); "
                                 f"see {getattr(self._log, 'name', 'its log')}")


# -- process bookkeeping (shared with tests) ---------------------------------------------------
def session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is `sid`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        state, session = rest[0], int(rest[3])
        if session == sid and state != "Z":
            found.append(int(d))
    return found


def stop_child(proc: subprocess.Popen, grace_s: float) -> None:
    """Ask a JSON-lines child to stop, wait up to grace_s, then end its session and close its pipes."""
    try:
        if proc.poll() is None:
            proc.stdin.write(b'{"op":"stop"}\n')
            proc.stdin.flush()
            proc.wait(timeout=grace_s)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    kill_session(proc.pid)
    for f in (proc.stdin, proc.stdout):
        try:
            f and f.close()
        except OSError:
            pass


def kill_session(sid: int, grace_s: float = 5.0) -> None:
    """SIGTERM the process group `sid`, then SIGKILL whatever is left; reap the leader if ours."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(sid, sig)
        except ProcessLookupError:
            pass
        # Stragglers that left the group but not the session get signalled one by one.
        for pid in session_pids(sid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(sid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not session_pids(sid):
                return
            time.sleep(0.1)


def ray_processes(marker: str | None = None) -> list[tuple[int, str]]:
    """(pid, cmdline) of live raylet / gcs_server processes, optionally only those whose command
    line contains `marker` (a fleet's RAY_TMPDIR)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        exe = cmd.split(" ", 1)[0]
        if exe.endswith("/raylet") or exe.endswith("/gcs_server"):
            if marker is None or marker in cmd:
                found.append((int(d), cmd))
    return found


def listeners(pids: list[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket owned by `pids` (from /proc, like
    `ss -ltnp`)."""
    return [(la, lp, pid) for proto, state, la, lp, _, _, pid in sockets(pids)
            if proto == "tcp" and state == "0A"]


def peers(pids: list[int]) -> list[tuple[str, str, int, int]]:
    """(proto, remote address, remote port, pid) of every connected TCP/UDP socket of `pids`."""
    return [(proto, ra, rp, pid) for proto, state, _, _, ra, rp, pid in sockets(pids)
            if not (proto == "tcp" and state == "0A") and rp != 0]


def sockets(pids: list[int]) -> list[tuple[str, str, str, int, str, int, int]]:
    """(proto, state, local addr, local port, remote addr, remote port, pid) for the inet sockets
    owned by `pids`, read from /proc/net/{tcp,tcp6,udp,udp6}."""
    inode_pid: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inode_pid[link[8:-1]] = pid
        except OSError:
            continue
    out = []
    for proto, v6 in (("tcp", False), ("tcp6", True), ("udp", False), ("udp6", True)):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[9] not in inode_pid:
                continue
            la, lp = cols[1].split(":")
            ra, rp = cols[2].split(":")
            out.append((proto.rstrip("6"), cols[3], _decode_addr(la, v6), int(lp, 16),
                        _decode_addr(ra, v6), int(rp, 16), inode_pid[cols[9]]))
    return out


def _decode_addr(hexaddr: str, v6: bool) -> str:
    import ipaddress
    raw = bytes.fromhex(hexaddr)
    if not v6:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    ip = ipaddress.IPv6Address(words)
    return str(ip.ipv4_mapped) if ip.ipv4_mapped else str(ip)


def memory_kib(pids: list[int]) -> dict[str, int]:
    """Summed RSS and PSS (KiB) of `pids` (PSS splits shared pages fairly between processes)."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return {"rss_kib": rss, "pss_kib": pss}


# -- launcher (runs in its own session; the only side that imports ray) -----------------------
def _serve(spec_path: str) -> int:
    # Replies go to the original stdout; anything Ray prints goes to the log (stderr).
    reply_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(**msg: Any) -> None:
        reply_out.write(json.dumps(msg) + "\n")

    spec = json.loads(Path(spec_path).read_text())
    store = int(spec.get("object_store_bytes", OBJECT_STORE_BYTES))
    from ray.cluster_utils import Cluster

    tmpdir = os.environ.get("RAY_TMPDIR", "")

    def raylet_pid(name: str) -> int | None:
        found = [pid for pid, cmd in ray_processes(tmpdir)
                 if f"--node-name={name} " in cmd + " " and "/raylet " in cmd]
        return max(found) if found else None

    cluster = Cluster(shutdown_at_exit=True)
    handles: dict[int, dict[str, Any]] = {}
    specs = {s["index"]: s for s in spec["nodes"]}

    def registered(name: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        gone_since = None
        while time.monotonic() < deadline:
            for row in cluster.global_state.node_table():
                if row.get("NodeName") == name and row.get("Alive"):
                    return row["NodeID"]
            if raylet_pid(name) is None:
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > 5:
                    raise RuntimeError(f"raylet {name} exited before registering (see its raylet.*.out)")
            else:
                gone_since = None
            time.sleep(0.5)
        raise TimeoutError(f"raylet {name} did not register with the GCS in {timeout:.0f} s")

    def add(s: dict[str, Any], attempts: int = 3) -> dict[str, Any]:
        for attempt in range(1, attempts + 1):
            try:
                try:
                    node_id = cluster.add_node(
                        num_cpus=s["num_cpus"], num_gpus=s["num_gpus"], resources=s["resources"],
                        labels=s["labels"], node_name=s["name"], object_store_memory=store).node_id
                except Exception as e:  # noqa: BLE001
                    # Node() gives a raylet 30 s to register; a loaded machine can need longer.
                    if "timed out during startup" not in str(e):
                        raise
                    node_id = registered(s["name"], BOOT_GRACE_S)
                break
            except Exception as e:  # noqa: BLE001
                # Under heavy load the raylet can abort waiting for its agents' port files
                # (NodeManager::WaitForDashboardAgentPorts): kill what is left and start it again.
                pid = raylet_pid(s["name"])
                if pid:
                    os.kill(pid, signal.SIGKILL)
                if attempt == attempts:
                    raise
                print(f"ray_fleet: {s['name']} attempt {attempt} failed ({e}); retrying", file=sys.stderr)
        h = {"index": s["index"], "name": s["name"], "node_id": node_id, "raylet_pid": raylet_pid(s["name"])}
        handles[s["index"]] = h
        return h

    try:
        head = cluster.add_node(num_cpus=0, num_gpus=0, include_dashboard=False,
                                object_store_memory=store, node_name="ray-head")
        head_info = {"node_id": head.node_id, "raylet_pid": raylet_pid("ray-head")}
        nodes = [add(s) for s in spec["nodes"]]
    except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the session
        reply(event="error", error=f"{type(e).__name__}: {e}")
        return 1
    reply(event="ready", address=cluster.address,
          head=head_info, nodes=nodes)

    for line in sys.stdin:
        try:
            msg = json.loads(line)
            op = msg["op"]
            if op == "stop":
                break
            if op == "kill":
                h = handles[int(msg["node"])]
                os.kill(h["raylet_pid"], signal.SIGKILL)
                reply(ok=True, node_id=h["node_id"], raylet_pid=h["raylet_pid"], t=time.time())
            elif op == "restart":
                i = int(msg["node"])
                old = handles.get(i)
                if old and old.get("raylet_pid"):
                    try:
                        os.kill(old["raylet_pid"], signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                reply(ok=True, node=add(specs[i]))
            elif op == "info":
                reply(ok=True, address=cluster.address, nodes=[handles[i] for i in sorted(handles)])
            else:
                reply(ok=False, error=f"unknown op {op!r}")
        except Exception as e:  # noqa: BLE001
            reply(ok=False, error=f"{type(e).__name__}: {e}")
    try:
        cluster.shutdown()
    finally:
        try:
            reply(event="stopped")
        except OSError:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "serve":
        return _serve(argv[1])
    print("usage: python -m fakes.ray.fleet serve SPEC.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
