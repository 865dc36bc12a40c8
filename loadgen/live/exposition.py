"""gangstorm's own metrics in Prometheus exposition format, from a Recorder. Pure.

Per scheduler (and job class for the budgets): histograms of the three budgets after submission
(admission, placement-to-ready, rendezvous), submissions, pending jobs, GPUs allocated and held
by partial gangs, and the generator's lateness. Bucket bounds grow by BUCKET_GROWTH, so a
histogram_quantile() over them is within that factor of the exact quantile gangstorm reports.
"""
from __future__ import annotations

import numpy as np

from loadgen.measure.recorder import Recorder
from loadgen.measure.statistics import budget_spans

BUCKET_GROWTH = 1.25
BUCKETS = tuple(round(0.001 * BUCKET_GROWTH ** k, 9) for k in range(0, 80))    # 1 ms .. ~ 50 h
BUDGET_METRICS = {"admission": "gangstorm_admission_seconds",
                  "placement_to_ready": "gangstorm_placement_to_ready_seconds",
                  "rendezvous": "gangstorm_rendezvous_seconds"}
HELP = {
    "gangstorm_admission_seconds": "Intended submit to the last required member bound (open loop).",
    "gangstorm_placement_to_ready_seconds": "Admission to every member's container running (image pull, start).",
    "gangstorm_rendezvous_seconds": "Every member running to the first all-reduce (failed attempts included).",
    "gangstorm_generator_lateness_seconds": "Actual minus intended submit time of the load generator.",
}


def _labels(d: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in d.items())


def histogram(name: str, labels: dict[str, str], values: np.ndarray) -> list[str]:
    v = np.sort(values[~np.isnan(values)])
    counts = np.searchsorted(v, np.array(BUCKETS), side="right")
    out = [f'{name}_bucket{{{_labels({**labels, "le": repr(float(b))})}}} {int(c)}' for b, c in zip(BUCKETS, counts)]
    out.append(f'{name}_bucket{{{_labels({**labels, "le": "+Inf"})}}} {len(v)}')
    out.append(f"{name}_sum{{{_labels(labels)}}} {float(v.sum()):.6f}")
    out.append(f"{name}_count{{{_labels(labels)}}} {len(v)}")
    return out


def render(recorders: dict[str, Recorder]) -> str:
    """Exposition text for every scheduler's recorder (name -> Recorder)."""
    lines: list[str] = []
    spans = {sched: budget_spans(rec) for sched, rec in recorders.items()}
    classes = {sched: np.array([j.cls for j in rec.jobs]) for sched, rec in recorders.items()}
    for key, metric in BUDGET_METRICS.items():
        lines += [f"# HELP {metric} {HELP[metric]}", f"# TYPE {metric} histogram"]
        for sched in recorders:
            for cls in sorted(set(classes[sched].tolist())):
                lines += histogram(metric, {"scheduler": sched, "class": cls}, spans[sched][key][classes[sched] == cls])
    metric = "gangstorm_generator_lateness_seconds"
    lines += [f"# HELP {metric} {HELP[metric]}", f"# TYPE {metric} histogram"]
    for sched, rec in recorders.items():
        lines += histogram(metric, {"scheduler": sched}, rec.sent - rec.submit)
    gauges = {"gangstorm_jobs_submitted_total": ("counter", "Jobs the target accepted.",
                                                 lambda r, s: int(r.accepted.sum())),
              "gangstorm_jobs_pending": ("gauge", "Jobs accepted and not running.", lambda r, s: s.pending_jobs),
              "gangstorm_gpus_allocated": ("gauge", "GPUs held by anything.", lambda r, s: s.gpus_allocated),
              "gangstorm_gpus_partial": ("gauge", "GPUs held by gangs not fully bound.", lambda r, s: s.gpus_partial),
              "gangstorm_start_failures_total": ("counter", "Rendezvous attempts that timed out.",
                                                 lambda r, s: int(r.start_failures.sum()))}
    for metric, (kind, text, get) in gauges.items():
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
        for sched, rec in recorders.items():
            if rec.samples:
                lines.append(f'{metric}{{scheduler="{sched}"}} {get(rec, rec.samples[-1])}')
    return "\n".join(lines) + "\n"
