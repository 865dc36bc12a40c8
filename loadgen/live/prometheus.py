"""A real Prometheus beside one scheduler's wall-clock run (`gangstorm run --backend real
--prometheus`): it scrapes gangstorm's metrics, the fake DCGM exporter and the backend's own
endpoints (kube-apiserver, kube-scheduler, etcd, Volcano), and at the end the seed's harness
queries run against it, next to gangstorm's exact figures for the same quantities.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadgen.model.registry import component, target_class

SCRAPE_S = 1.0


def queries(scheduler: str, range_s: int) -> dict[str, str]:
    r = f"{max(range_s, 60)}s"

    def own(metric: str) -> str:
        return f'histogram_quantile(0.99, sum(rate({metric}_bucket{{scheduler="{scheduler}"}}[{r}])) by (le))'

    out = {
        "admission_p99_s": own("gangstorm_admission_seconds"),
        "placement_to_ready_p99_s": own("gangstorm_placement_to_ready_seconds"),
        "rendezvous_p99_s": own("gangstorm_rendezvous_seconds"),
        "active_util": f"sum(sum_over_time(DCGM_FI_PROF_SM_ACTIVE[{r}])) / "
                       f"sum(count_over_time(DCGM_FI_PROF_SM_ACTIVE[{r}]))",
        "apiserver_requests_per_s": f"sum(rate(apiserver_request_total[{r}]))",
        "etcd_db_bytes": "max(etcd_mvcc_db_total_size_in_bytes)",
    }
    out.update(target_class(scheduler, "real").prometheus_queries(r))
    return out


def exact(result: dict[str, Any]) -> dict[str, Any]:
    """gangstorm's own figures for the quantities the queries estimate."""
    b = result.get("budgets") or {}

    def p99(key: str) -> float | None:
        return ((b.get(key) or {}).get("all") or {}).get("p99")

    return {"admission_p99_s": result["admission_s"]["p99"], "placement_to_ready_p99_s": p99("placement_to_ready"),
            "rendezvous_p99_s": p99("rendezvous"), "active_util": (result.get("activity") or {}).get("active_util")}


class RunPrometheus:
    def __init__(self, work_dir: Path, gangstorm: str, dcgm: str, backend_endpoints: list[dict[str, Any]]):
        prom = component("prometheus")
        jobs = [prom.ScrapeJob("gangstorm", [gangstorm], interval_s=SCRAPE_S),
                prom.ScrapeJob("dcgm", [dcgm], interval_s=SCRAPE_S)]
        for e in backend_endpoints:
            u = urlsplit(e["url"])
            jobs.append(prom.ScrapeJob(e["name"], [u.netloc], scheme=u.scheme, metrics_path=u.path or "/metrics",
                                       interval_s=SCRAPE_S, tls_insecure=bool(e.get("tls_insecure")),
                                       cert_file=e.get("cert_file"), key_file=e.get("key_file")))
        self.server = prom.PrometheusServer(work_dir, jobs)
        self.t0 = time.monotonic()

    def start(self) -> RunPrometheus:
        """Started, and gangstorm's series scraped once at zero, so that rate() over the run sees
        every observation (a counter's increase before its first scrape is invisible to it)."""
        self.server.start()
        self.t0 = time.monotonic()
        self.server.wait_for_scrapes("gangstorm", n=1, timeout_s=30)
        self.server.wait_for_scrapes("dcgm", n=1, timeout_s=30)
        return self

    def harvest(self, scheduler: str) -> dict[str, Any]:
        """Wait for two more scrapes of the final state, then run the queries (before the backend
        stops: its series go stale once its endpoints are gone)."""
        time.sleep(2.5 * SCRAPE_S)
        answers: dict[str, Any] = {}
        for name, expr in queries(scheduler, int(time.monotonic() - self.t0) + 30).items():
            try:
                v = self.server.query_scalar(expr)
            except Exception as e:         # noqa: BLE001 (one bad query is recorded, not fatal)
                answers[name] = {"query": expr, "error": str(e).splitlines()[0][:200]}
                continue
            answers[name] = {"query": expr, "value": None if v is None or v != v else round(float(v), 6)}
        targets = {t.get("job") or t.get("scrapePool"): t.get("health") for t in self.server.targets()}
        return {"url": self.server.url, "targets": targets, "queries": answers}

    def stop(self) -> None:
        self.server.stop()
