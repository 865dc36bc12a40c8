"""Scrape jobs and the prometheus.yml they become. Every target must be on loopback."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

import yaml

LOOPBACK_NET = ipaddress.ip_network("127.0.0.0/8")
MAX_SCRAPE_TIMEOUT_S = 10.0       # Prometheus' own default timeout


@dataclass(frozen=True)
class ScrapeJob:
    """One scrape_config: a job name and its "127.0.0.1:PORT" targets."""
    name: str
    targets: list[str] = field(default_factory=list)
    scheme: str = "http"
    metrics_path: str = "/metrics"
    interval_s: float = 1.0
    tls_insecure: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    bearer_token_file: str | None = None

    def __post_init__(self):
        if not self.name:
            raise ValueError("scrape job: name must not be empty")
        if self.scheme not in ("http", "https"):
            raise ValueError(f"scrape job {self.name!r}: scheme {self.scheme!r}, expected http or https")
        if not self.metrics_path.startswith("/"):
            raise ValueError(f"scrape job {self.name!r}: metrics_path {self.metrics_path!r} must start with /")
        if not self.interval_s >= 0.001:
            raise ValueError(f"scrape job {self.name!r}: interval_s {self.interval_s!r}, expected >= 0.001")
        if not self.targets:
            raise ValueError(f"scrape job {self.name!r}: no targets")
        for t in self.targets:
            check_loopback_target(self.name, t)


def check_loopback_target(job: str, target: str) -> None:
    """ValueError unless target is "HOST:PORT" with HOST in 127.0.0.0/8 or "localhost"."""
    host, sep, port = str(target).rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"scrape job {job!r}: target {target!r}, expected 127.0.0.1:PORT")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host) in LOOPBACK_NET
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"scrape job {job!r}: target {target!r} is not on loopback "
                             f"(only 127.0.0.0/8 and localhost are scraped)")


def duration(seconds: float) -> str:
    """A Prometheus duration; it takes no fractions ("0.5s" is invalid), so whole milliseconds."""
    return f"{max(1, round(seconds * 1000))}ms"


def scrape_config(job: ScrapeJob) -> dict:
    cfg: dict = {
        "job_name": job.name,
        "scheme": job.scheme,
        "metrics_path": job.metrics_path,
        "scrape_interval": duration(job.interval_s),
        # Must not exceed the interval, and the default (10s) would for sub-10 s intervals.
        "scrape_timeout": duration(min(job.interval_s, MAX_SCRAPE_TIMEOUT_S)),
        "static_configs": [{"targets": list(job.targets)}],
    }
    tls = {k: v for k, v in (("ca_file", job.ca_file), ("cert_file", job.cert_file), ("key_file", job.key_file))
           if v is not None}
    if job.tls_insecure:
        tls["insecure_skip_verify"] = True
    if tls:
        cfg["tls_config"] = tls
    if job.bearer_token_file is not None:
        cfg["authorization"] = {"type": "Bearer", "credentials_file": job.bearer_token_file}
    return cfg


def render(jobs: list[ScrapeJob], rule_files: list[str | Path] = ()) -> str:
    """prometheus.yml for `jobs` (and the rule files it loads); the global intervals, rule
    evaluation's too, follow the fastest job."""
    names = [j.name for j in jobs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"scrape jobs: duplicate job name(s) {', '.join(dupes)}")
    fastest = min((j.interval_s for j in jobs), default=1.0)
    doc = {
        "global": {"scrape_interval": duration(fastest),
                   "scrape_timeout": duration(min(fastest, MAX_SCRAPE_TIMEOUT_S)),
                   "evaluation_interval": duration(fastest)},
        "scrape_configs": [scrape_config(j) for j in jobs],
    }
    if rule_files:
        doc["rule_files"] = [str(Path(f).resolve()) for f in rule_files]
    return yaml.safe_dump(doc, sort_keys=False)


def write(jobs: list[ScrapeJob], path: Path) -> Path:
    path.write_text(render(jobs))
    return path
