"""results/<run-id>/: summary.json rewritten atomically after every phase, jobs.csv, timeseries.csv."""
from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import numpy as np

from loadgen.recorder import Recorder


def new_run_id(scenario_name: str, clock=time.time) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock())) + f"-{scenario_name}"


class RunStore:
    def __init__(self, out_dir: Path):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._jobs_header = not (self.dir / "jobs.csv").exists()

    def write_summary(self, summary: dict) -> Path:
        path = self.dir / "summary.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=False, default=_default) + "\n")
        os.replace(tmp, path)
        return path

    def append_jobs(self, scheduler: str, backend: str, rec: Recorder) -> None:
        with open(self.dir / "jobs.csv", "a", newline="") as f:
            w = csv.writer(f)
            if self._jobs_header:
                w.writerow(["scheduler", "backend", "job_id", "tenant", "cls", "members", "gpus_per_member",
                            "submit_s", "sent_s", "admitted_s", "admission_s", "backend_admission_s",
                            "finished_s", "evictions", "outcome", "reason"])
                self._jobs_header = False
            for i, j in enumerate(rec.jobs):
                adm = rec.admit[i]
                outcome = ("failed" if rec.failed[i] else "rejected" if rec.rejected[i]
                           else "finished" if not np.isnan(rec.finish[i])
                           else "running" if not np.isnan(adm) else "pending")
                w.writerow([scheduler, backend, j.id, j.tenant, j.cls, j.members, j.gpus_per_member,
                            _f(j.submit_s), _f(rec.sent[i]), _f(adm), _f(adm - j.submit_s),
                            _f(rec.backend_admit[i] - j.submit_s), _f(rec.finish[i]), int(rec.evictions[i]),
                            outcome, rec.reason.get(j.id, "")])

    def write_timeseries(self, scheduler: str, rec: Recorder) -> None:
        path = self.dir / "timeseries.csv"
        header = not path.exists()
        with open(path, "a", newline="") as f:
            w = csv.writer(f)
            if header:
                w.writerow(["scheduler", "t", "gpus_allocated", "gpus_partial", "gpus_stranded",
                            "pending_jobs", "partial_gangs", "running_jobs"])
            for s in rec.samples:
                w.writerow([scheduler, _f(s.t), s.gpus_allocated, s.gpus_partial, s.gpus_stranded,
                            s.pending_jobs, s.partial_gangs, s.running_jobs])


def _f(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.6f}"


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))
