"""A real Prometheus server (Debian's /usr/bin/prometheus) that gangstorm starts on 127.0.0.1,
points at loopback scrape targets and queries over the HTTP API (docs/prometheus.md)."""
from fakes.prom.client import PromClient, PromQueryError
from fakes.prom.config import ScrapeJob
from fakes.prom.server import RULES, PrometheusMissing, PrometheusServer

__all__ = ["PromClient", "PromQueryError", "PrometheusMissing", "PrometheusServer", "RULES", "ScrapeJob"]
