"""Serve exposition text on 127.0.0.1 for a Prometheus to scrape, during wall-clock runs.

`MetricsEndpoint(provider)` answers GET /metrics with provider() from a daemon thread; the run's
thread keeps what the provider reads up to date (`Publisher.refresh` after every sample). Two of
them run per scrapeable run: gangstorm's own metrics and the fake fleet's DCGM exporter.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from loadgen.live import exposition
from loadgen.measure.recorder import Recorder
from loadgen.model.fleet import Fleet
from loadgen.model.registry import component
from loadgen.model.startup.spec import ActivitySpec


class MetricsEndpoint:
    def __init__(self, provider: Callable[[], str], port: int = 0):
        self.provider = provider
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = owner.provider().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics-endpoint", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Publisher:
    """What the endpoints serve, rebuilt by the run's thread from its recorders after each sample:
    gangstorm's exposition text, and the allocations the DCGM exporter renders at scrape time."""

    def __init__(self, fleet: Fleet, spec: ActivitySpec):
        self.fleet, self.spec = fleet, spec
        self.text = ""
        self.recorders: dict[str, Recorder] = {}
        self.exporter = component("dcgm")
        self.allocations: list = []
        self.t, self.mono = 0.0, time.monotonic()

    def attach(self, scheduler: str, rec: Recorder) -> None:
        """Publish `rec` from now on (refreshed after each of its samples)."""
        self.recorders[scheduler] = rec
        rec.on_sample.append(lambda r, snap: self.refresh(snap.t))
        self.refresh(0.0)           # every series exists, at zero, before the first observation

    def refresh(self, t: float) -> None:
        recorders = self.recorders
        allocations = []
        for rec in recorders.values():
            for i, nodes in sorted(rec.run_nodes.items()):
                since = rec.train_since[i]
                for n, gpus in sorted(gpus_per_node(rec, i, nodes).items()):
                    allocations.append(self.exporter.Allocation(rec.jobs[i].id, self.fleet.node_name(n), gpus,
                                                       None if since != since else float(since),
                                                       self.fleet.model_names()[int(self.fleet.model_of[n])]))
        self.text = exposition.render(recorders)
        self.allocations, self.t, self.mono = allocations, t, time.monotonic()

    def gangstorm(self) -> str:
        return self.text

    def dcgm(self) -> str:
        return self.exporter.render(self.allocations, self.spec, self.t + (time.monotonic() - self.mono))


def gpus_per_node(rec: Recorder, i: int, nodes) -> dict[int, float]:
    """GPUs job i holds on each of its nodes, one member per entry of `nodes`: a slice at its compute
    share (Recorder.gpm), as summary.json's gpu_sharing counts it."""
    per_node: dict[int, float] = {}
    for n in nodes:
        per_node[n] = per_node.get(n, 0) + rec.gpm[i].item()
    return per_node


class Exposed:
    """The two endpoints of a run: gangstorm's metrics and the fake DCGM exporter (port 0: any)."""

    def __init__(self, fleet: Fleet, spec: ActivitySpec, metrics_port: int = 0, dcgm_port: int = 0):
        self.publisher = Publisher(fleet, spec)
        self.gangstorm = MetricsEndpoint(self.publisher.gangstorm, metrics_port)
        try:
            self.dcgm = MetricsEndpoint(self.publisher.dcgm, dcgm_port)
        except BaseException:
            self.gangstorm.stop()
            raise

    def stop(self) -> None:
        self.gangstorm.stop()
        self.dcgm.stop()
