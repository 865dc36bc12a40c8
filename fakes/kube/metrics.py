"""Scrape and condense Prometheus text from kube-scheduler, kube-apiserver and etcd.

Only the handful of series the Kubernetes-family backends report: scheduling SLI latency, pending
pods, in-flight requests, 429s, stored objects and etcd database size versus quota. The parser
and `fetch` also serve Volcano's scheduler (fakes/volcano/metrics.py).
"""
from __future__ import annotations

import math
import re
import warnings
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import urllib3

from loadgen.model.lognormal import fit_sigma
from loadgen.model.quantiles import exact_quantile

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def fetch(url: str, condense: Callable[[str], dict], timeout: float = 10) -> dict:
    """condense(the text at a component's /metrics URL), or {"error": ...}: a scrape never raises."""
    http = urllib3.PoolManager(cert_reqs="CERT_NONE", retries=False, timeout=timeout)
    try:
        with warnings.catch_warnings():   # kube-scheduler's self-signed serving cert on 127.0.0.1
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            return condense(http.request("GET", url).data.decode())
    except Exception as e:
        return {"error": type(e).__name__}


def quantiles(values) -> dict[str, float]:
    """n, p50, p99 (nearest rank, as summary.json's) and max of client-side durations (seconds)."""
    if len(values) == 0:
        return {"n": 0}
    a = np.asarray(values, dtype=float)
    return {"n": int(a.size), "p50": round(exact_quantile(a, 0.5), 3),
            "p99": round(exact_quantile(a, 0.99), 3), "max": round(float(a.max()), 3)}


def parse(text: str, wanted: tuple[str, ...]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] for metric names starting with one of `wanted`."""
    out: dict[str, list] = defaultdict(list)
    for line in text.splitlines():
        if not line or line[0] == "#" or not line.startswith(wanted):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out[m.group(1)].append((dict(_LABEL.findall(m.group(2) or "")), value))
    return out


def total(series, **match) -> float:
    return sum(v for labels, v in series if all(labels.get(k) == x for k, x in match.items()))


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus-style quantile from cumulative (le, count) buckets (linear within a bucket)."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0)
        prev_le, prev_c = le, c
    return buckets[-1][0]


def _buckets(series, **match) -> list[tuple[float, float]]:
    acc: dict[float, float] = defaultdict(float)
    for labels, v in series:
        if all(labels.get(k) == x for k, x in match.items()) and "le" in labels:
            acc[float(labels["le"])] += v
    return list(acc.items())


def _mean_ms(m, name: str, **match) -> float | None:
    """Mean of a Prometheus histogram (sum / count) in milliseconds, labels filtered by `match`."""
    count = total(m.get(name + "_count", []), **match)
    return round(total(m.get(name + "_sum", []), **match) / count * 1000.0, 4) if count else None


def _quantile_ms(m, q: float, name: str, **match) -> float | None:
    """A histogram's q-quantile in milliseconds (Prometheus' interpolation within a bucket), labels
    filtered by `match`; None without observations."""
    v = histogram_quantile(q, _buckets(m.get(name + "_bucket", []), **match))
    return round(v * 1000.0, 4) if v is not None else None


def _sigma(m, name: str, **match) -> float | None:
    """The lognormal shape that, with the histogram's exact mean, best explains its buckets
    (loadgen/model/lognormal.py); None without observations or with all of them in one bucket."""
    mean = _mean_ms(m, name, **match)
    return fit_sigma(_buckets(m.get(name + "_bucket", []), **match), mean / 1000.0) if mean else None


# extension points of the serial scheduling cycle and of the asynchronous binding cycle
CYCLE_POINTS = ("PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit")
BINDING_POINTS = ("PreBind", "Bind", "PostBind")
EXTENSION = "scheduler_framework_extension_point_duration_seconds"
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"


def serial_cycle_ms(algorithm_ms: float | None, points_ms: dict) -> float | None:
    """What the scheduling loop spends per pod before it takes the next one: the algorithm
    (snapshot, PreFilter, Filter, PostFilter, PreScore, Score, host selection), then Reserve and
    Permit. Binding (PreBind, Bind, PostBind) runs in its own goroutine."""
    if algorithm_ms is None:
        return None
    return round(algorithm_ms + (points_ms.get("Reserve") or 0.0) + (points_ms.get("Permit") or 0.0), 4)


# the gang series: Permit's wait (both gang schedulers) and kube-scheduler 1.36's pod-group cycle
# (GenericWorkload gate; pkg/scheduler/metrics/metrics.go, v1.36.1)
PERMIT_WAIT = "scheduler_permit_wait_duration_seconds"
PODGROUP_ATTEMPTS = "scheduler_podgroup_schedule_attempts_total"
PODGROUP_ATTEMPT = "scheduler_podgroup_scheduling_attempt_duration_seconds"
PODGROUP_ALGORITHM = "scheduler_podgroup_scheduling_algorithm_duration_seconds"


def gang_figures(m) -> dict:
    """Permit waits (count and mean by result) and pod-group cycles (attempts and mean duration by
    result, the algorithm's mean); empty where the scheduler has no gang plugin."""
    out: dict = {}
    for result in ("Success", "Unschedulable", "Error"):          # the Permit status code (framework.go)
        n = total(m.get(PERMIT_WAIT + "_count", []), result=result)
        if n:
            out[f"permit_wait_{result.lower()}"] = {"n": int(n), "ms_mean": _mean_ms(m, PERMIT_WAIT, result=result)}
    for result in ("scheduled", "unschedulable", "error"):
        n = total(m.get(PODGROUP_ATTEMPTS, []), result=result)
        if n:
            out[f"podgroup_{result}"] = {"n": int(n), "ms_mean": _mean_ms(m, PODGROUP_ATTEMPT, result=result)}
    if total(m.get(PODGROUP_ALGORITHM + "_count", [])):
        out["podgroup_algorithm_ms_mean"] = _mean_ms(m, PODGROUP_ALGORITHM)
    return out


def scheduler_figures(text: str) -> dict:
    m = parse(text, ("scheduler_pod_scheduling_sli_duration_seconds", "scheduler_pending_pods",
                     "scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds",
                     ALGORITHM, EXTENSION, "rest_client_requests_total", "rest_client_rate_limiter_duration_seconds",
                     PERMIT_WAIT, "scheduler_podgroup_"))
    sli = _buckets(m.get("scheduler_pod_scheduling_sli_duration_seconds_bucket", []))
    attempts = m.get("scheduler_schedule_attempts_total", [])
    points = {p: _mean_ms(m, EXTENSION, extension_point=p) for p in CYCLE_POINTS + BINDING_POINTS}
    algorithm = _mean_ms(m, ALGORITHM)
    return {
        # a whole attempt: in 1.36 it ends when the asynchronous binding cycle ends, so it includes
        # the bind's client-limiter wait and apiserver latency and attempts overlap
        "attempt_ms_mean": _mean_ms(m, "scheduler_scheduling_attempt_duration_seconds", result="scheduled"),
        "algorithm_ms_mean": algorithm,
        # each cycle's spread: the lognormal shape of the algorithm's buckets with their mean held
        # (a preempted or stalled cycle holds every pod queued behind it)
        "algorithm_sigma": _sigma(m, ALGORITHM),
        "serial_cycle_ms_mean": serial_cycle_ms(algorithm, points),
        "extension_point_ms_mean": {p: v for p, v in points.items() if v is not None},
        "sli_count": int(total(m.get("scheduler_pod_scheduling_sli_duration_seconds_count", []))),
        "sli_p50_s": histogram_quantile(0.50, sli),
        "sli_p99_s": histogram_quantile(0.99, sli),
        "pending_pods": {labels.get("queue", "?"): v for labels, v in m.get("scheduler_pending_pods", [])},
        "attempts_scheduled": int(total(attempts, result="scheduled")),
        "attempts_unschedulable": int(total(attempts, result="unschedulable")),
        "attempts_error": int(total(attempts, result="error")),
        # busy time of the scheduling loop (every attempt, whatever its result) and of its client
        "attempt_s_total": round(total(m.get("scheduler_scheduling_attempt_duration_seconds_sum", [])), 6),
        "client_requests": int(total(m.get("rest_client_requests_total", []))),
        "client_rate_limiter_wait_s": round(total(m.get("rest_client_rate_limiter_duration_seconds_sum", [])), 6),
        "client_requests_by_method": {v: int(total(m.get("rest_client_requests_total", []), method=v))
                                      for v in ("GET", "POST", "PATCH", "PUT", "DELETE")
                                      if total(m.get("rest_client_requests_total", []), method=v)},
        **gang_figures(m),
    }


# (verb, resource, subresource) of the requests whose latency the simulated control plane uses
REQUESTS = {"create_pod": ("POST", "pods", ""), "bind_pod": ("POST", "pods", "binding"),
            "update_pod_status": ("PATCH", "pods", "status"), "create_podgroup": ("POST", "podgroups", ""),
            "update_podgroup": ("PUT", "podgroups", ""),          # Volcano's job updater, at session close
            # kube-gang: the client's Workload, and the pod-group cycle's condition patch (v1.36.1)
            "create_workload": ("POST", "workloads", ""), "patch_podgroup_status": ("PATCH", "podgroups", "status")}


LATENCY = "apiserver_request_duration_seconds"


def _per_request(figure: Callable[..., float | None]) -> dict[str, float | None]:
    """figure(verb=, resource=, subresource=) for each request kind of REQUESTS."""
    return {k: figure(verb=v, resource=r, subresource=sub) for k, (v, r, sub) in REQUESTS.items()}


def apiserver_figures(text: str) -> dict:
    m = parse(text, ("apiserver_current_inflight_requests", "apiserver_request_total",
                     "apiserver_storage_objects", "apiserver_resource_objects", "apiserver_request_duration_seconds",
                     "apiserver_storage_size_bytes", "apiserver_flowcontrol_rejected_requests_total"))
    reqs = m.get("apiserver_request_total", [])
    objects = m.get("apiserver_resource_objects") or m.get("apiserver_storage_objects", [])
    return {
        "request_ms_mean": _per_request(lambda **match: _mean_ms(m, LATENCY, **match)),
        "request_count": _per_request(lambda **match: int(total(m.get(LATENCY + "_count", []), **match))),
        # the spread of each request's latency (the twin's are constants; issue 32's held-out p99s)
        "request_ms_p50": _per_request(lambda **match: _quantile_ms(m, 0.5, LATENCY, **match)),
        "request_ms_p99": _per_request(lambda **match: _quantile_ms(m, 0.99, LATENCY, **match)),
        # what the twin draws each request's latency from: the shape of a lognormal with the exact mean
        "request_sigma": _per_request(lambda **match: _sigma(m, LATENCY, **match)),
        "inflight": {labels.get("request_kind", "?"): v
                     for labels, v in m.get("apiserver_current_inflight_requests", [])},
        "requests_total": int(total(reqs)),
        "requests_429": int(total(reqs, code="429")),
        "requests_5xx": int(sum(v for labels, v in reqs if labels.get("code", "").startswith("5"))),
        "flowcontrol_rejected": int(total(m.get("apiserver_flowcontrol_rejected_requests_total", []))),
        "objects": {labels.get("resource", "?"): int(v) for labels, v in objects
                    if labels.get("resource") in ("pods", "nodes", "configmaps", "leases", "events")},
        "storage_size_bytes": int(max((v for _, v in m.get("apiserver_storage_size_bytes", [])), default=0)),
    }


def apiserver_requests(text: str) -> dict[str, tuple[float, float]]:
    """The apiserver's request latency histogram, as (sum s, count) per "VERB resource[/sub]"."""
    m = parse(text, ("apiserver_request_duration_seconds",))
    out: dict[str, list[float]] = {}
    for suffix, i in (("_sum", 0), ("_count", 1)):
        for labels, value in m.get("apiserver_request_duration_seconds" + suffix, []):
            key = f"{labels.get('verb', '')} {labels.get('resource', '')}"
            if labels.get("subresource"):
                key += "/" + labels["subresource"]
            out.setdefault(key, [0.0, 0.0])[i] += value
    return {k: (v[0], v[1]) for k, v in out.items()}


def requests_during(before: dict, after: dict) -> dict:
    """Requests the apiserver answered over an interval: count and mean ms per "VERB resource"."""
    out = {}
    for k, (s1, c1) in sorted(after.items()):
        s0, c0 = before.get(k, (0.0, 0.0))
        if c1 - c0 > 0:
            out[k] = {"n": int(c1 - c0), "mean_ms": round((s1 - s0) / (c1 - c0) * 1000.0, 3)}
    return out


def etcd_figures(text: str) -> dict:
    m = parse(text, ("etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes",
                     "etcd_server_quota_backend_bytes", "etcd_server_has_leader"))
    return {
        "db_size_bytes": int(total(m.get("etcd_mvcc_db_total_size_in_bytes", []))),
        "db_in_use_bytes": int(total(m.get("etcd_mvcc_db_total_size_in_use_in_bytes", []))),
        "quota_bytes": int(total(m.get("etcd_server_quota_backend_bytes", []))),
    }
