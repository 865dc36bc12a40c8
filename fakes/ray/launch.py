"""`gangstorm cluster up|down|status ray`: a Ray fleet of fake-GPU raylets that outlives the command.

With schedulers.ray.nodes: fakelet (`--ray-nodes fakelet`), the nodes are fakelets instead: the
holder `python -m fakes.ray.hold` (the same RayFleet a run starts) replaces the detached launcher
below, and stopping it stops the head and the fakelet shards alike.

up() starts the fleet launcher (`python -m fakes.ray.serve SPEC --detach READY.json`) in its own
session, with every Ray listener on 127.0.0.1 (fleet.RAY_ENV) and a short RAY_TMPDIR under /tmp,
waits for its ready file and returns the state loadgen/cli/cluster.py keeps: the GCS address (the
`--ray-address` a run attaches with), the launcher's pid (leader of its process group and session)
and the RAY_TMPDIR every raylet and gcs_server command line carries (how down() finds stragglers).
down() SIGTERMs the launcher (Cluster.shutdown), SIGKILLs its session after a grace period, kills
every process still naming the tmpdir or carrying it in its environment (the agents of a launcher
that was SIGKILLed outlive it) and removes it. status() never imports ray here: the GCS is asked
through a short-lived `python -m fakes.ray.survey` subprocess.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

from fakes.ray.fleet import OBJECT_STORE_BYTES, RAY_ENV, REPO, node_specs, ray_processes
from fakes.ray.fleet_settings import fleet_settings
from fakes.ray.hold import fleet_fields
from fakes.ray.survey import SurveyError, survey
from fakes.real.procfs import mem_available_mib
from fakes.real.procs import alive, session_pids, spawn, stop
from loadgen.model.errors import BackendError, UserError
from loadgen.model.target import TargetContext

BOOT_TIMEOUT_S = 900.0
STOP_GRACE_S = 60.0


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    n = ctx.fleet.nodes
    settings = fleet_settings(ctx.config, n)
    refused = settings.capacity_error(n, mem_available_mib())
    if refused:
        raise UserError(f"--nodes {n}: {refused}")
    folder = ctx.run_dir
    ready, log = folder / "ray-ready.json", folder / "ray-fleet.log"
    if settings.fake:
        spec = folder / "ray-fakelets-spec.json"
        spec.write_text(json.dumps({"fleet": fleet_fields(ctx.fleet), "workdir": str(folder), "syncer": settings.syncer,
                                    "per_process": settings.per_process, "gcs_config": settings.gcs_config,
                                    "front": settings.front_binary(),
                                    "boot_timeout_s": max(600.0, n * 0.1)}))
        argv = [sys.executable, "-m", "fakes.ray.hold", spec, ready]
    else:
        spec = folder / "ray-fleet-spec.json"
        spec.write_text(json.dumps({"nodes": node_specs(ctx.fleet), "object_store_bytes": OBJECT_STORE_BYTES}))
        argv = [sys.executable, "-m", "fakes.ray.serve", spec, "--detach", ready]
    tmp = tempfile.mkdtemp(prefix="gsray-", dir="/tmp")     # short: Ray's unix socket paths live here
    state: dict[str, Any] = {"launcher_pid": 0, "pids": [], "ray_tmpdir": tmp, "log": str(log),
                             "nodes_kind": settings.kind}
    try:
        os.makedirs(os.path.join(tmp, "ray"))
        proc = spawn(argv, log=log, env={**os.environ, **RAY_ENV, "RAY_TMPDIR": tmp}, cwd=REPO)
        state.update(launcher_pid=proc.pid, pids=[proc.pid])
        msg = _wait_ready(proc, ready, log)
    except BaseException:
        down(state)
        raise
    if settings.fake:
        state.update(shard_pids=msg["shard_pids"],
                     fakelets={"syncer": settings.syncer, "per_process": settings.per_process,
                                                             "gcs_load_poll_ms": settings.gcs_load_poll_ms,
                                                             "front": settings.front})
    return {**state, "connect": {"--ray-address": msg["address"]}, "gcs_address": msg["address"],
            "fleet": [{"index": n["index"], "name": n["name"], "node_id": n["node_id"]} for n in msg["nodes"]]}


def _wait_ready(proc, ready, log) -> dict[str, Any]:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists():
            msg = json.loads(ready.read_text())
            if msg.get("event") != "ready":
                raise BackendError(f"ray cluster did not start: {msg.get('error', msg)} (log: {log})")
            return msg
        if proc.poll() is not None:
            raise BackendError(f"ray cluster did not start: the launcher exited (rc={proc.returncode}); see {log}")
        time.sleep(0.5)
    raise BackendError(f"ray cluster did not start within {BOOT_TIMEOUT_S:.0f} s; see {log}")


def down(state: dict[str, Any]) -> list[str]:
    """Stop the launcher (graceful Cluster.shutdown first), then its session and every process
    still naming the tmpdir; what is still running afterwards ("pid cmdline"), empty when clean."""
    pid, tmp = int(state["launcher_pid"]), state.get("ray_tmpdir") or ""
    ours = bool(pid) and _is_launcher(pid)       # else its pid (and session id) may be someone else's
    if ours:
        try:
            os.kill(pid, signal.SIGTERM)         # the launcher alone: it shuts its raylets down
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + STOP_GRACE_S
        while _is_launcher(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        stop(pid, grace_s=2.0)                   # whatever is left in its group and session
    for _ in range(2):
        for p in marked_processes(tmp):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while marked_processes(tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
    session = set(session_pids(pid)) if ours else set()
    left = [f"{p} {_cmdline(p)[:120]}" for p in sorted(set(marked_processes(tmp)) | session)]
    if not left and tmp and os.path.isdir(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
    return left


def status(state: dict[str, Any]) -> dict[str, Any]:
    pid, tmp = int(state["launcher_pid"]), state.get("ray_tmpdir") or ""
    procs = ray_processes(tmp) if tmp else []
    comps = {"launcher": "running" if _is_launcher(pid) else "exited",
             "gcs_server": "running" if any("gcs_server" in c.split()[0] for _, c in procs) else "exited"}
    if state.get("nodes_kind") == "fakelet":
        for k, shard in enumerate(state.get("shard_pids", [])):
            comps[f"fakelet shard {k}"] = "running" if "fakes.ray.fakelets.serve" in _cmdline(shard) else "exited"
    for n in state.get("fleet", []) if state.get("nodes_kind") != "fakelet" else []:
        comps[f"raylet {n['name']}"] = "running" if any(f"--node-name={n['name']} " in c + " " for _, c in procs) \
            else "exited"
    out: dict[str, Any] = {"components": comps, "raylet_processes": sum(1 for _, c in procs if "gcs_server" not in c)}
    try:
        found = survey(state["gcs_address"], timeout=60)
        gpu = [n for n in found["nodes"] if n["alive"] and n["gpus"] > 0]
        out.update(gcs="answering", nodes_alive=len(gpu), gpus_alive=sum(n["gpus"] for n in gpu),
                   placement_groups_live=len(found["placement_groups"]))
    except SurveyError as e:
        out.update(gcs=f"not answering ({e})")
    out["up"] = comps["launcher"] == "running" and out["gcs"] == "answering"
    return out


def _is_launcher(pid: int) -> bool:
    """pid is alive and still a detached fleet launcher (not a reused pid)."""
    cmd = _cmdline(pid) if alive(pid) else ""
    return ("fakes.ray.serve" in cmd and "--detach" in cmd) or "fakes.ray.hold" in cmd


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def marked_processes(tmp: str) -> list[int]:
    """Live processes of this cluster: their command line names its RAY_TMPDIR (raylets, gcs_server),
    they inherited it, or they hold a file under it open (the agents, which rename themselves
    ray::DashboardAgent over their own environment, keep their logs there). The tmpdir is unique
    to the cluster, so these are safe to kill."""
    if not tmp:
        return []
    env = f"RAY_TMPDIR={tmp}\0".encode()
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid() and alive(int(d)):
            if tmp in _cmdline(int(d)) or env in _environ(int(d)) or _holds_open(int(d), tmp):
                found.append(int(d))
    return found


def _holds_open(pid: int, tmp: str) -> bool:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(tmp + "/"):
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return False


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read() + b"\0"
    except OSError:
        return b""
