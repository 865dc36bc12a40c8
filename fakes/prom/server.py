"""A Prometheus server of our own: Debian's /usr/bin/prometheus on 127.0.0.1:<free port>, its
config, TSDB and log under one work dir, in its own session, stopped on exit, SIGTERM or failure.

    with PrometheusServer(tmp, [ScrapeJob("gangstorm", ["127.0.0.1:9464"], interval_s=1)]) as prom:
        prom.wait_for_scrapes("gangstorm")
        prom.query_scalar("sum(gangstorm_admitted_total)")
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

from fakes.prom import config
from fakes.prom.client import PromClient, PromQueryError
from fakes.prom.config import ScrapeJob
from fakes.real import procs
from loadgen.model.signals import signals_held

DEFAULT_BINARY = "/usr/bin/prometheus"
# gangstorm's recording and alerting rules (docs/soak.md): every Prometheus of ours loads them
RULES = Path(__file__).parent / "rules" / "gangstorm.rules.yml"
PORT_ATTEMPTS = 3          # free_port() can lose a race with another process before Prometheus binds


class PrometheusMissing(RuntimeError):
    pass


class PrometheusServer:
    """Start with start() or `with`; stop() is idempotent and also runs at interpreter exit."""

    def __init__(self, work_dir: Path | str, jobs: list[ScrapeJob], binary: str = DEFAULT_BINARY,
                 ready_timeout_s: float = 30.0, retention: str = "1d", rule_files: list[str | Path] = (RULES,)):
        self.work_dir = Path(work_dir).resolve()
        self.jobs = list(jobs)
        self.binary = binary
        self.ready_timeout_s = ready_timeout_s
        self.retention = retention
        self.rule_files = [Path(f) for f in rule_files]
        self.config_text = config.render(self.jobs, self.rule_files)  # bad jobs fail here, before anything starts
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.ready_s: float | None = None                # start to /-/ready, in seconds

    # ---- where things are ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{procs.LOOPBACK}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.work_dir / "prometheus.yml"

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "prometheus.log"

    @property
    def client(self) -> PromClient:
        if self.proc is None:
            raise RuntimeError("prometheus: not running (call start() or use `with`)")
        return PromClient(self.url)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> PrometheusServer:
        if self.proc is not None:
            return self
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            raise PrometheusMissing(f"prometheus: {self.binary} not found or not executable "
                                    f"(run `make prometheus-deps`)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(self.config_text)
        procs.stop_at_exit(self.stop)
        t0 = time.monotonic()
        try:
            for attempt in range(PORT_ATTEMPTS):
                self.port = procs.free_port()
                self.proc = procs.spawn(self._argv(), log=self.log_file, cwd=self.work_dir)
                if self._wait_ready(t0 + self.ready_timeout_s):
                    break
                port_taken = "address already in use" in self._log_tail(20)
                self._stop_process()
                if not port_taken or attempt == PORT_ATTEMPTS - 1:
                    raise RuntimeError(f"prometheus: exited before ready (log {self.log_file}): {self._log_tail()}")
            self.ready_s = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _argv(self) -> list[str]:
        # The web listener is Prometheus' only socket; lifecycle, admin and remote-write endpoints
        # stay off (their defaults), so the HTTP API on loopback is all there is.
        return [self.binary,
                f"--config.file={self.config_file}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--storage.tsdb.retention.time={self.retention}",
                f"--web.listen-address={procs.LOOPBACK}:{self.port}",
                "--log.level=info"]

    def _wait_ready(self, deadline: float) -> bool:
        """True once /-/ready answers; False if the process exits first; TimeoutError at deadline."""
        probe = PromClient(self.url)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if probe.ready():
                return True
            time.sleep(0.1)
        raise TimeoutError(f"prometheus: not ready on {self.url} after {self.ready_timeout_s:.0f} s "
                           f"(log {self.log_file}): {self._log_tail()}")

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, wait up to grace_s (Prometheus flushes its head block), then SIGKILL."""
        with signals_held():
            self._stop_process(grace_s)
        atexit.unregister(self.stop)

    def _stop_process(self, grace_s: float = 10.0) -> None:
        if self.proc is None:
            return
        procs.stop(self.proc.pid, grace_s)
        try:
            self.proc.wait(timeout=1)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass
        self.proc = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- queries ---------------------------------------------------------------------------
    def query(self, expr: str, at: float | datetime | None = None) -> list[dict]:
        """Instant query at `at` (unix seconds or datetime; default now): the result vector."""
        return self.client.query(expr, at)

    def query_scalar(self, expr: str, at: float | datetime | None = None) -> float | None:
        """The single value of `expr`; None when it selects nothing."""
        return self.client.query_scalar(expr, at)

    def targets(self) -> list[dict]:
        """Active targets: job, instance, url, health, lastError, lastScrape."""
        return self.client.targets()

    def firing(self) -> list[dict]:
        """The alerts firing now (the ALERTS series, as labels); pending ones are left out."""
        return [r["metric"] for r in self.query('ALERTS{alertstate="firing"}')]

    def wait_for_scrapes(self, job: str, n: int = 2, timeout_s: float = 30.0) -> dict[str, int]:
        """Wait until every target of `job` has been scraped successfully at least n times; return
        the successful-scrape count per target. Each scrape writes one `up` sample (1 on success),
        so sum_over_time(up) over the whole retention is that count."""
        spec = next((j for j in self.jobs if j.name == job), None)
        if spec is None:
            raise ValueError(f"prometheus: no scrape job {job!r} (jobs: {', '.join(j.name for j in self.jobs)})")
        expr = f"sum_over_time(up{{job={json.dumps(job)}}}[{self.retention}])"
        deadline = time.monotonic() + timeout_s
        counts: dict[str, int] = {}
        while True:
            counts = {r["metric"].get("instance", ""): int(float(r["value"][1])) for r in self.query(expr)}
            if all(counts.get(t, 0) >= n for t in spec.targets):
                return {t: counts[t] for t in spec.targets}
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        health = "; ".join(f"{t['url']} {t['health']} {t['lastError']}".rstrip()
                           for t in self.targets() if t["job"] == job)
        raise TimeoutError(f"prometheus: job {job!r}: fewer than {n} successful scrapes per target after "
                           f"{timeout_s:.0f} s (counts {counts}; targets: {health})")

    # ---- diagnostics -----------------------------------------------------------------------
    def _log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "(empty log)"


__all__ = ["PrometheusMissing", "PrometheusServer", "PromQueryError", "ScrapeJob"]
