"""Simulator parameters read straight off the real components' own metrics, and the ones left to fit.

Each extractor takes the fitting runs of one scheduler ((case, result) pairs, result being the
scheduler's part of summary.json, control-plane figures included) and returns
{(profile section, key): (value, what it was measured from)}.
"""
from __future__ import annotations

from collections.abc import Callable
from statistics import median

import numpy as np

from loadgen.calibration.cases import Case
from loadgen.calibration.fit import Free

Runs = list[tuple[Case, dict]]
Measured = dict[tuple[str, str], tuple[float, str]]
Extractor = Callable[[Runs], Measured]

# What no component metric gives: fitted to the twins' admission tails.
FREE: dict[str, list[Free]] = {
    "kube": [Free("kube", "observe_ms", 0.1, 5000.0), Free("kube", "release_ms", 0.1, 20000.0)],
    # a session's costs are measured on the cost curve at 500-10,000 nodes (fakes/volcano/costcurve.py,
    # loadgen/calibration/volcano_curve.py), where the per-node, per-task and walk terms separate; in
    # these runs the tasks a session handles grow with the fleet, so they cannot be told apart here
    "volcano": [Free("volcano", "observe_ms", 0.1, 5000.0), Free("volcano", "release_ms", 0.1, 20000.0)],
    # the GCS's per-bundle costs are measured by the placement-group benchmark (fakes/ray/pgperf.py)
    "ray": [Free("ray", "observe_ms", 0.1, 5000.0), Free("ray", "release_ms", 0.1, 20000.0)],
    "slurm": [Free("slurm", "observe_ms", 0.1, 5000.0), Free("slurm", "release_ms", 0.1, 20000.0)],
}


def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope, both kept >= 0 (a cost is never negative)."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return float(max(y.mean(), 0.0)), 0.0
    slope, icpt = np.polyfit(x, y, 1)
    if icpt < 0:
        return 0.0, float(max((x * y).sum() / (x * x).sum(), 0.0))
    if slope < 0:
        return float(max(y.mean(), 0.0)), 0.0
    return float(icpt), float(slope)


def slurm(runs: Runs) -> Measured:
    """Nothing: slurmctld's submit-RPC and cycle costs are measured on the cost curve at 500-10,000
    nodes (python -m fakes.slurm.costcurve, then python -m loadgen.calibration.slurm_curve), where
    their per-node, per-job and per-start terms separate. At the 32-128 nodes of these runs they do
    not (the old fit put 5.5 us per job and node into the main cycle, 16 us into backfill, and the
    twin carried them to 10,000 nodes), so a calibration keeps the profile's values and fits only
    the observation and release lags."""
    return {}


def _points(runs: Runs, path: tuple[str, ...]) -> list[tuple[int, float]]:
    """(fleet nodes, figure) of every run whose control_plane holds a positive number at `path`."""
    pts = []
    for c, r in runs:
        v = r.get("control_plane", {})
        for key in path:
            v = v.get(key) if isinstance(v, dict) else None
        if isinstance(v, (int, float)) and v > 0:
            pts.append((c.nodes, float(v)))
    return pts


def _median(runs: Runs, *path: str) -> tuple[float | None, int]:
    vals = [v for _, v in _points(runs, path)]
    return (median(vals) if vals else None), len(vals)


def _control_plane(runs: Runs, out: Measured, component: str) -> None:
    """What both Kubernetes-family schedulers read off the apiserver and etcd they share."""
    for key, path, what in (("create_ms", ("apiserver", "request_ms_mean", "create_pod"),
                             "apiserver_request_duration_seconds POST pods, mean"),
                            ("write_ms", ("apiserver", "request_ms_mean", "bind_pod"),
                             "apiserver_request_duration_seconds POST pods/binding, mean"),
                            ("create_sigma", ("apiserver", "request_sigma", "create_pod"),
                             "apiserver_request_duration_seconds POST pods, lognormal shape fitted to its "
                             "buckets with the mean held (loadgen/model/lognormal.py)"),
                            ("write_sigma", ("apiserver", "request_sigma", "bind_pod"),
                             "apiserver_request_duration_seconds POST pods/binding, lognormal shape fitted to "
                             "its buckets with the mean held (loadgen/model/lognormal.py)"),
                            ("object_bytes.pod", ("etcd_object_bytes", "pod"), "stored Pod size read from etcd"),
                            ("object_bytes.podgroup", ("etcd_object_bytes", "podgroup"),
                             "stored PodGroup size read from etcd"),
                            ("node_bytes", ("etcd_object_bytes", "node"), "stored Node size read from etcd"),
                            ("lease_bytes", ("etcd_object_bytes", "lease"), "stored node Lease size read from etcd")):
        v, n = _median(runs, *path)
        if v is not None:
            out[("control_plane", key)] = (v, f"{what}, median of {n} real {component} runs")


def _per_node(runs: Runs, out: Measured, path: tuple[str, ...], base: tuple[str, str], per: tuple[str, str],
              what: str) -> None:
    """A cost the component reports per operation, split by least squares over the fleet sizes into a
    fixed part (ms) and a per-node part (us)."""
    pts = _points(runs, path)
    if pts:
        icpt, slope = line([n for n, _ in pts], [y for _, y in pts])
        src = f"{what} against nodes, least squares over {len(pts)} runs at {sorted({n for n, _ in pts})} nodes"
        out[base] = (icpt, src)
        out[per] = (slope * 1000.0, src)


def kube(runs: Runs) -> Measured:
    """The apiserver and etcd costs, and the spread of the scheduling cycle (a shape, read off the
    algorithm histogram's buckets). Not the cycle's mean: its per-node costs only show at the cost
    curve's 500-10,000 nodes (python -m fakes.kube.costcurve measures them from the scheduler's
    algorithm and Filter/Score histograms), and scheduler_scheduling_attempt_duration_seconds, what
    earlier profiles used, ends with the asynchronous binding cycle in 1.36: it holds the
    bind's client-limiter wait and apiserver latency, which the twin models apart."""
    out: Measured = {}
    _control_plane(runs, out, "kube")
    v, n = _median(runs, "scheduler", "algorithm_sigma")
    if v is not None:
        out[("kube", "cycle_sigma")] = (v, "scheduler_scheduling_algorithm_duration_seconds, lognormal shape "
                                           "fitted to its buckets with the mean held (loadgen/model/lognormal.py), "
                                           f"median of {n} real kube runs")
    v, n = _median(runs, "client_pace_ms")
    if v is not None:
        out[("kube", "client_create_ms")] = (v, f"the real adapter's client: median gap between a gang's pod "
                                                f"creates returning, median of {n} real kube runs")
    return out


def volcano(runs: Runs) -> Measured:
    """The apiserver and etcd costs, and what a PodGroup update costs: vc-scheduler's job updater
    writes each changed PodGroup whole (PUT podgroups) at session close, a custom resource the
    apiserver validates against its schema, slower than a pod's write."""
    out: Measured = {}
    _control_plane(runs, out, "volcano")
    v, n = _median(runs, "apiserver", "request_ms_mean", "update_podgroup")
    if v is not None:
        out[("volcano", "podgroup_update_ms")] = (v, "apiserver_request_duration_seconds PUT podgroups, mean, "
                                                     f"median of {n} real volcano runs")
    return out


def ray(runs: Runs) -> Measured:
    """Nothing: Ray's costs come from its own benchmarks, not from these runs. The per-node costs are
    measured on fakelets from 500 to 10,000 nodes (fakes/ray/costcurve.py), far beyond the few
    raylets a calibration run has; the per-group and per-bundle costs, the round trip and the removal
    cost from Ray's placement-group release test replicated on 5 raylets (fakes/ray/pgperf.py);
    loadgen/calibration/raycurve.py writes both into the profile. The GCS's scheduling latency in a
    calibration run (its p50 a group of one or two bundles) also carries the contention of 8-24
    raylets and their agents on two cores: what the fitted lags absorb."""
    return {}


EXTRACTORS: dict[str, Extractor] = {"slurm": slurm, "kube": kube, "volcano": volcano, "ray": ray}


def extract(scheduler: str, runs: Runs) -> Measured:
    fn = EXTRACTORS.get(scheduler)
    return fn(runs) if fn else {}
