"""Condense vc-scheduler's Prometheus text: session and action latency, attempts, preemption.

Parsed with the Kubernetes backends' parser (fakes/kube/metrics.py). Volcano's latency histograms
are in milliseconds; a quantile is reported as the upper bound of the bucket it falls in.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from fakes.kube.metrics import parse, total

Series = dict[str, list[tuple[dict[str, str], float]]]


def histogram(series: Series, name: str, **match: str) -> dict[str, Any]:
    """count, mean, p50, p99 (bucket upper bounds) of one Prometheus histogram, labels summed."""
    def rows(suffix: str):
        return ((labels, v) for labels, v in series.get(name + suffix, [])
                if all(labels.get(k) == want for k, want in match.items()))
    buckets: dict[float, float] = defaultdict(float)
    for labels, v in rows("_bucket"):
        buckets[float(labels["le"])] += v
    total = sum(v for _, v in rows("_sum"))
    count = sum(v for _, v in rows("_count"))
    if not count:
        return {"count": 0}
    les = sorted(buckets)

    def q(p: float) -> float | str:
        for le in les:
            if buckets[le] >= p * count and le != float("inf"):
                return round(le, 3)
        finite = [le for le in les if le != float("inf")]
        return f">{finite[-1]:g}" if finite else "+Inf"   # JSON has no Infinity
    return {"count": int(count), "mean": round(total / count, 3), "p50_le": q(0.5), "p99_le": q(0.99)}


def scheduler_figures(text: str) -> dict[str, Any]:
    """vc-scheduler figures: session (e2e) latency, per-action latency, attempts, preemption."""
    m = parse(text, ("volcano_",))
    if not m:
        return {}
    fig: dict[str, Any] = {
        "session_ms": histogram(m, "volcano_e2e_scheduling_latency_milliseconds"),
        "open_session_ms": histogram(m, "volcano_open_session_duration_milliseconds"),
        "job_scheduling_ms": histogram(m, "volcano_e2e_job_scheduling_latency_milliseconds"),
    }
    action = "volcano_action_scheduling_latency_milliseconds"
    actions = sorted({labels["action"] for labels, _ in m.get(action + "_count", []) if labels.get("action")})
    fig["action_ms"] = {a: histogram(m, action, action=a) for a in actions}
    # each plugin's session open and close: with the actions, what of a session is not the snapshot
    plugin = "volcano_plugin_scheduling_latency_milliseconds"
    hooks = sorted({(labels["plugin"], labels["OnSession"]) for labels, _ in m.get(plugin + "_count", [])
                    if labels.get("plugin") and labels.get("OnSession")})
    fig["plugin_ms"] = {f"{p}.{on}": {k: h[k] for k in ("count", "mean") if k in h}
                        for p, on in hooks for h in [histogram(m, plugin, plugin=p, OnSession=on)]}
    attempts: dict[str, float] = defaultdict(float)
    for labels, v in m.get("volcano_schedule_attempts_total", []):
        attempts[labels.get("result", "")] += v
    fig["schedule_attempts"] = dict(attempts)
    for key, name in (("preemption_attempts", "volcano_total_preemption_attempts"),
                      ("preemption_victims", "volcano_pod_preemption_victims")):
        if name in m:
            fig[key] = m[name][-1][1]
    return fig


def controller_figures(text: str) -> dict[str, Any]:
    """vc-controller-manager's client: requests sent and time spent waiting in its rate limiter
    (client-go's rest_client metrics; None where this build does not register them)."""
    m = parse(text, ("rest_client_requests_total", "rest_client_rate_limiter_duration_seconds"))
    if "rest_client_requests_total" not in m:
        return {"client_requests": None,
                "note": "rest_client_requests_total not exported by this vc-controller-manager"}
    return {"client_requests": int(total(m["rest_client_requests_total"])),
            "client_rate_limiter_wait_s": round(total(m.get("rest_client_rate_limiter_duration_seconds_sum", [])), 6)}
