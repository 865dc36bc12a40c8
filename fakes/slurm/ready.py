"""The ready service: what the prolog of a launched Slurm (fakes/slurm/prolog.py) asks, on 127.0.0.1.

  /start?job=J&restart=R&node=N&nodes=HOSTLIST   job J (attempt R) starts on node N now: the
        seconds N needs before its container runs. The first node of an attempt to ask places the
        whole allocation on the run's one ImageCache at once (loadgen/model/startup/imagecache.py, the
        same call a simulated scheduler makes for a gang), the others read their node's answer.
  /done?job=J&restart=R&node=N                   node N waited its share: the container runs.
  /left?job=J&duration=D                         the job script: seconds left of D since allocation.

Times are the target's run seconds (RunClock.now()). Handlers run on the server's threads; the
model is only touched under the lock, and what the prolog said reaches the target's own thread as
Reports through a queue (drain()). Jobs are registered by the threads that sbatch them: a workload
job places members on the model, any other job (chaos prefill, a job submitted by hand) waits 0 s
and is not reported. A prolog may ask before its sbatch returned, so /start waits a little for the
registration.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from fakes.real.procs import LOOPBACK
from fakes.slurm.hostlist import expand
from loadgen.model.startup.imagecache import ImageCache

REGISTER_WAIT_S = 10.0


@dataclass(frozen=True)
class Report:
    kind: str               # "start" | "done"
    slurm_id: int
    restart: int            # SLURM_JOB_RESTART_COUNT: which attempt of the job
    node: str
    t: float                # run seconds when the service heard it
    ready_t: float = 0.0    # start: when the model says this node's container runs
    gang_ready_t: float = 0.0   # start: ... the last node of the allocation's


@dataclass
class _Placed:
    restart: int
    t: float                        # the first prolog of the attempt asked
    ready: dict[str, float]         # node name -> model ready time


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024       # every node of a large gang connects at once


class ReadyService:
    def __init__(self, images: ImageCache, index: dict[str, int], now: Callable[[], float]):
        self.images, self.index, self.now = images, index, now
        self.reports: queue.SimpleQueue[Report] = queue.SimpleQueue()
        self.counts = {"prolog_starts": 0, "prolog_dones": 0, "prolog_late_starts": 0, "prolog_other_jobs": 0}
        self._workload: dict[int, bool] = {}          # slurm id -> workload (True) or other (False)
        self._placed: dict[int, _Placed] = {}         # slurm id -> its latest attempt's placement
        self._cond = threading.Condition()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> ReadyService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                q = {k: v[-1] for k, v in parse_qs(url.query).items()}
                try:
                    body = service.answer(url.path.strip("/"), q)
                except (KeyError, ValueError) as e:
                    self.send_error(400, f"bad query: {e}")
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._server = _Server((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="slurm-ready", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._cond:
            self._cond.notify_all()

    # ---- the target's side ---------------------------------------------------------------------
    def register(self, slurm_id: int, workload: bool) -> None:
        """A job the run submitted (called right after its sbatch returned, on any thread)."""
        with self._cond:
            self._workload[slurm_id] = workload
            self._cond.notify_all()

    def drain(self) -> list[Report]:
        out = []
        while True:
            try:
                out.append(self.reports.get_nowait())
            except queue.Empty:
                return out

    def figures(self) -> dict[str, int]:
        with self._cond:
            return dict(self.counts)

    # ---- the prolog's side ---------------------------------------------------------------------
    def answer(self, path: str, q: dict[str, str]) -> str:
        if path == "start":
            return f"{self._start(int(q['job']), int(q.get('restart') or 0), q['node'], q.get('nodes', '')):.6f}"
        if path == "done":
            self._done(int(q["job"]), int(q.get("restart") or 0), q["node"])
            return "ok"
        if path == "left":
            return f"{self._left(int(q['job']), float(q['duration'])):.6f}"
        raise KeyError(path)

    def _start(self, sid: int, restart: int, node: str, nodelist: str) -> float:
        with self._cond:
            self._cond.wait_for(lambda: sid in self._workload or self._server is None, timeout=REGISTER_WAIT_S)
            if not self._workload.get(sid, False):
                self.counts["prolog_other_jobs"] += 1
                return 0.0
            t = self.now()
            placed = self._placed.get(sid)
            if placed is None or restart > placed.restart:
                placed = self._placed[sid] = _Placed(restart, t, self._place(t, expand(nodelist) or [node]))
            elif restart < placed.restart:      # cannot happen: an old attempt's prolog started late
                self.counts["prolog_late_starts"] += 1
                return 0.0
            self.counts["prolog_starts"] += 1
            ready = placed.ready.get(node, t)
            self.reports.put(Report("start", sid, restart, node, t, ready, max(placed.ready.values(), default=t)))
            return max(0.0, ready - self.now())

    def _place(self, t: float, names: list[str]) -> dict[str, float]:
        idx = {name: self.index[name] for name in names if name in self.index}
        by_index = self.images.ready_at(t, idx.values())
        return {name: by_index[i] for name, i in idx.items()}

    def _done(self, sid: int, restart: int, node: str) -> None:
        with self._cond:
            if not self._workload.get(sid, False):
                return
            self.counts["prolog_dones"] += 1
            self.reports.put(Report("done", sid, restart, node, self.now()))

    def image_figures(self) -> dict[str, float]:
        """The image model's figures now (under the lock: the prologs' threads move it too)."""
        with self._cond:
            return self.images.figures(self.now())

    def _left(self, sid: int, duration_s: float) -> float:
        with self._cond:
            placed = self._placed.get(sid)
            return duration_s if placed is None else max(0.0, duration_s - (self.now() - placed.t))
