"""The Ray executor of `gangstorm sweep --ray-address`: each cell a Ray task (ray.remote), through
Ray's own scheduler; nothing here decides where a cell runs.

Two sides, as fakes/ray does it: the gangstorm process never imports ray (Locust's gevent
patching hangs the Ray client, and a forked or spawned child of a patched process is patched too),
so `Ray.run` starts `python -m loadgen.drive.sweep_ray` as a plain subprocess in its own session:
the driver, the only process that imports ray. It connects with ray.init (node IP 127.0.0.1 for a
loopback address, so every listener of the driver binds there), submits one task per cell
(num_cpus=1: a cluster runs as many cells at once as it has CPUs), and as each task returns the
cell's folder as an archive (drive/sweep_cell.run_archived) it unpacks it into place and reports
one JSON line. A worker whose gangstorm sources differ from the driver's (code fingerprint) fails
its cell: its results could differ from a local run's.

Driver protocol. stdin: one JSON line {"address", "node_ip", "cells_dir", "executor", "code",
"cells": base64 pickle of the cells}; then nothing until EOF or {"op": "stop"}, either of which
(the parent stopped, or died) cancels every task (force: the worker processes end) and
disconnects. stdout, one JSON object per line:
  {"ev": "hello", "cpus": N, "nodes": M}                   connected
  {"ev": "done", "cell": I, "wall_s": S, "host": H}        the cell's folder is in place
  {"ev": "failed", "cell": I, "status": "user"|"backend"|"crash", "message": M}
  {"ev": "finished"} / {"ev": "error", "message": M}
The first failed cell stops the rest, as on local cores.
"""
from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.drive.seeds import Outcome, SeedsError
from loadgen.model.errors import BackendError, UserError

ROOT = Path(__file__).resolve().parents[2]
STOP_WAIT_S = 30.0
CANCEL_GRACE_S = 10.0     # a cancelled cell's cleanup: well inside STOP_WAIT_S
# the driver's Ray settings: no usage reporting; a loopback cluster keeps the driver's node IP on
# 127.0.0.1 (Ray otherwise resolves 127.0.0.1 to the machine's routable address)
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def is_loopback(address: str) -> bool:
    import ipaddress
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Ray:
    """Cells as Ray tasks on the cluster at `address` (host:port of its GCS)."""
    address: str
    log: Path | None = None           # the driver's stderr (default: ray-driver.log in the sweep folder)

    kind = "ray"

    def detail(self) -> str:
        return f"--ray-address {self.address}"

    def label(self) -> str:
        return f"ray {self.address}"

    def run(self, cells: list, store, on_event) -> None:
        if not cells:
            return
        from loadgen.drive.sweep_cell import code_fingerprint
        loop = is_loopback(self.address)
        env = {**os.environ, **RAY_ENV, **(LOOPBACK_ENV if loop else {}),
               "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.log = self.log or store.dir / "ray-driver.log"
        log = open(self.log, "ab")
        proc = subprocess.Popen([sys.executable, "-m", "loadgen.drive.sweep_ray"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT, start_new_session=True,
                                preexec_fn=_die_with_parent)
        job = {"address": self.address, "node_ip": "127.0.0.1" if loop else None,
               "cells_dir": str(store.cells_dir.resolve()),
               "executor": self.label(), "code": code_fingerprint(),
               "cells": base64.b64encode(pickle.dumps(cells)).decode()}
        failed: Outcome | None = None
        try:
            proc.stdin.write((json.dumps(job) + "\n").encode())
            proc.stdin.flush()
            finished = False
            for line in proc.stdout:
                msg = _message(line)
                if msg is None:
                    continue
                ev = msg.get("ev")
                if ev == "hello":
                    on_event("connected", -1, msg)
                elif ev == "done":
                    on_event("done", msg["cell"], Outcome(msg["cell"], "done", "", msg.get("wall_s") or 0.0))
                elif ev == "failed":
                    failed = Outcome(msg["cell"], msg.get("status") or "crash", msg.get("message") or "")
                    on_event("stopped", msg["cell"], failed)
                elif ev == "error":
                    raise BackendError(f"the Ray driver for {self.address} failed: {msg.get('message')}"
                                       + (f"; log in {self.log}" if self.log else ""))
                elif ev == "finished":
                    finished = True
                    break
            if not finished and failed is None:
                raise BackendError(f"the Ray driver for {self.address} ended without finishing (exit status "
                                   f"{proc.wait()})" + (f"; log in {self.log}" if self.log else ""))
        finally:
            _stop(proc)          # cells it never reported stay pending (Ray does not say which had started)
            log.close()
        if failed is not None:
            if failed.status == "user":
                raise SeedsError(f"cell {failed.seed}: {failed.message}")
            if failed.status == "backend":
                raise BackendError(f"cell {failed.seed}: {failed.message}")
            raise RuntimeError(f"cell {failed.seed} failed on Ray:\n{failed.message}")

    def check(self) -> None:
        """The GCS answers at the address (a connect, no Ray client)."""
        host, _, port = self.address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
        except (OSError, ValueError) as e:
            raise BackendError(f"--ray-address {self.address}: no Ray GCS answers there "
                               f"({getattr(e, 'strerror', None) or e})") from None


def _message(line: bytes) -> dict | None:
    text = line.decode(errors="replace").strip()
    if not text.startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _die_with_parent() -> None:
    """The driver gets SIGTERM if gangstorm dies (kill -9): Linux only, a no-op elsewhere."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)          # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop(proc: subprocess.Popen) -> None:
    """Close the driver's stdin (it cancels its tasks and disconnects), then its process group is
    ended: SIGTERM, SIGKILL, whatever it still runs."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    if proc.stdout:
        proc.stdout.close()


# -- the driver (imports ray) ---------------------------------------------------------------------
def _emit(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if '"stop"' in line:
            break
    stop.set()


def drive(job: dict) -> None:
    import ray

    from loadgen.drive.sweep_cell import place, run_archived
    cells = pickle.loads(base64.b64decode(job["cells"]))
    cells_dir = Path(job["cells_dir"])
    kwargs: dict[str, Any] = {"address": job["address"], "log_to_driver": False, "logging_level": "WARNING",
                              "namespace": "gangstorm-sweep"}
    if job.get("node_ip"):
        kwargs["_node_ip_address"] = job["node_ip"]
    ray.init(**kwargs)
    stop = threading.Event()
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    _emit({"ev": "hello", "cpus": ray.cluster_resources().get("CPU", 0), "nodes": len(alive), "pid": os.getpid()})
    task = ray.remote(num_cpus=1, max_retries=1)(run_archived)
    pending = {task.remote(c, job["executor"]): c for c in cells}
    try:
        while pending and not stop.is_set():
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                c = pending.pop(ref)
                t0 = time.monotonic()
                try:
                    res = ray.get(ref)
                except Exception as e:          # noqa: BLE001 (a task's error: reported, the sweep stops)
                    cause = getattr(e, "cause", None) or e
                    status = "user" if isinstance(cause, UserError) else "backend" if isinstance(cause, BackendError) \
                        else "crash"
                    text = str(cause) if status != "crash" else f"{type(cause).__name__}: {cause}"
                    _emit({"ev": "failed", "cell": c.index, "status": status, "message": text})
                    return
                if res["code"] != job["code"]:
                    _emit({"ev": "failed", "cell": c.index, "status": "backend",
                           "message": f"the Ray worker on {res['host']} runs other gangstorm sources (code "
                                      f"{res['code']}, the driver's {job['code']}): install the same checkout on "
                                      "every node"})
                    return
                place(res["archive"], c.name, cells_dir / c.name)
                _emit({"ev": "done", "cell": c.index, "wall_s": res["wall_s"], "host": res["host"],
                       "worker_pid": res["pid"], "place_s": round(time.monotonic() - t0, 3)})
        if not pending:
            _emit({"ev": "finished"})
    finally:
        _cancel(ray, list(pending))
        ray.shutdown()


def _cancel(ray, refs: list) -> None:
    """Stop the tasks still out. A plain cancel raises KeyboardInterrupt in a running task, so its
    own cleanup runs (run_archived removes its temporary folder; a forced cancel kills the worker
    before it can, which left one /tmp/gangstorm-cell-* per running task); what has not stopped
    within CANCEL_GRACE_S is then killed."""
    for force in (False, True):
        for ref in refs:
            try:
                ray.cancel(ref, force=force)
            except Exception:           # noqa: BLE001 (already finished or gone)
                pass
        if not force and refs:
            try:
                _, refs = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
            except Exception:           # noqa: BLE001 (the cluster went away: nothing left to stop)
                return


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent decides when to stop (stdin)
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        drive(json.loads(line))
    except Exception as e:              # noqa: BLE001 (one line to the parent; the trace to the log)
        import traceback
        traceback.print_exc()
        _emit({"ev": "error", "message": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
