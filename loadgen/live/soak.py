"""A soak's metrics in Prometheus format: what fakes/prom/rules/gangstorm.rules.yml is written for.

The histograms are cumulative over the whole soak (Prometheus' rate() needs counters that only
grow): every job of every window so far, each observed when it happens, so a job of window 3
admitted during window 4 is counted then. Beside them, gauges: the current window and its churn,
the scenario's admission SLO (the admission alert's threshold), the fleet's GPUs (the partial-gang
alert's denominator), the latest snapshot (pending jobs, GPUs allocated and held by partial
gangs), and the exact p99 of the last closed window per class.

Windows whose jobs have all settled are folded into plain arrays and their recorders let go, so a
long soak holds one float per job per histogram and the recorders of the last few windows only.
"""
from __future__ import annotations

import numpy as np

from loadgen.live.exposition import BUDGET_METRICS, HELP, histogram
from loadgen.measure.recorder import Recorder
from loadgen.measure.statistics import budget_spans
from loadgen.model.target import Snapshot

LATENESS = "gangstorm_generator_lateness_seconds"


def _settled(rec: Recorder) -> bool:
    return bool((~np.isnan(rec.finish) | rec.failed | rec.rejected).all())


class SoakExposition:
    """Built by the soak's thread (add, sample, close_window); text() is read by the endpoint's."""

    def __init__(self, scheduler: str, classes: list[str], slo_p99_s: float, fleet_gpus: int):
        self.scheduler, self.classes = scheduler, list(classes)
        self.slo, self.fleet_gpus = float(slo_p99_s), int(fleet_gpus)
        self.live: list[Recorder] = []
        self.folded: dict[str, list[np.ndarray]] = {k: [] for k in BUDGET_METRICS}
        self.folded_cls: list[np.ndarray] = []
        self.folded_lateness: list[np.ndarray] = []
        self.folded_accepted = 0
        self.window, self.churn = 0, 0.0
        self.snap: Snapshot | None = None
        self.last_p99: dict[str, float | None] = {}
        self.text = ""
        self.refresh()

    def add(self, rec: Recorder, window: int, churn: float) -> None:
        self.live.append(rec)
        self.window, self.churn = window, float(churn)
        self.refresh()

    def sample(self, snap: Snapshot) -> None:
        self.snap = snap
        self.refresh()

    def close_window(self, p99_by_class: dict[str, float | None]) -> None:
        """The window just closed: its exact p99s become the last-window gauges; windows whose jobs
        have all settled are folded (the current one stays live until its jobs end)."""
        self.last_p99 = dict(p99_by_class)
        keep = []
        for rec in self.live:
            if _settled(rec) and rec is not self.live[-1]:
                spans = budget_spans(rec)
                for k in BUDGET_METRICS:
                    self.folded[k].append(spans[k])
                self.folded_cls.append(np.array([j.cls for j in rec.jobs], dtype=object))
                self.folded_lateness.append(rec.sent - rec.submit)
                self.folded_accepted += int(rec.accepted.sum())
            else:
                keep.append(rec)
        self.live = keep
        self.refresh()

    def refresh(self) -> None:
        spans = [budget_spans(r) for r in self.live]
        cls = np.concatenate(self.folded_cls + [np.array([j.cls for j in r.jobs], dtype=object) for r in self.live]) \
            if self.folded_cls or self.live else np.array([], dtype=object)
        lines: list[str] = []
        sched = {"scheduler": self.scheduler}
        for key, metric in BUDGET_METRICS.items():
            values = np.concatenate(self.folded[key] + [s[key] for s in spans]) if (self.folded[key] or spans) \
                else np.array([], dtype=float)
            lines += [f"# HELP {metric} {HELP[metric]}", f"# TYPE {metric} histogram"]
            for c in sorted(set(self.classes) | set(cls.tolist())):
                lines += histogram(metric, {**sched, "class": c}, values[cls == c])
        late = np.concatenate(self.folded_lateness + [r.sent - r.submit for r in self.live]) \
            if (self.folded_lateness or self.live) else np.array([], dtype=float)
        lines += [f"# HELP {LATENESS} {HELP[LATENESS]}", f"# TYPE {LATENESS} histogram"]
        lines += histogram(LATENESS, sched, late)
        accepted = self.folded_accepted + sum(int(r.accepted.sum()) for r in self.live)
        s = self.snap
        gauges = [
            ("gangstorm_jobs_submitted_total", "counter", "Jobs the target accepted.", accepted),
            ("gangstorm_jobs_pending", "gauge", "Jobs accepted and not running.", s and s.pending_jobs),
            ("gangstorm_gpus_allocated", "gauge", "GPUs held by anything.", s and s.gpus_allocated),
            ("gangstorm_gpus_partial", "gauge", "GPUs held by gangs not fully bound.", s and s.gpus_partial),
            ("gangstorm_fleet_gpus", "gauge", "GPUs in the fleet the run drives.", self.fleet_gpus),
            ("gangstorm_slo_admission_p99_seconds", "gauge", "The scenario's admission p99 SLO (slo.admission_p99_s).",
             self.slo),
            ("gangstorm_soak_window", "gauge", "The soak's current window (1-based).", self.window),
            ("gangstorm_soak_churn_multiplier", "gauge", "The churn multiplier the current window offers.", self.churn),
        ]
        for metric, kind, text, value in gauges:
            if value is None:
                continue
            lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}",
                      f'{metric}{{scheduler="{self.scheduler}"}} {value:g}']
        metric = "gangstorm_soak_window_admission_p99_seconds"
        known = {c: v for c, v in self.last_p99.items() if v is not None}
        if known:
            lines += [f"# HELP {metric} Exact admission p99 of the last closed window (admitted jobs).",
                      f"# TYPE {metric} gauge"]
            lines += [f'{metric}{{scheduler="{self.scheduler}",class="{c}"}} {v:g}' for c, v in sorted(known.items())]
        self.text = "\n".join(lines) + "\n"

    def render(self) -> str:
        return self.text
