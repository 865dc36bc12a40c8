"""results/<run-id>/: summary.json, summary.md, jobs.csv and timeseries.csv, consistent at every moment
(report.html is built from them afterwards: loadgen/output/html/).

A run folder is created whole (a hidden staging folder holding summary.json is renamed into place),
so it never exists without a valid summary.json. Each scheduler's rows are committed with its
summary entry in one step: the CSVs are staged beside the originals, summary.json names the
schedulers being committed (`files.committing`), the staged CSVs are renamed over the originals,
then summary.json drops the mark. SIGINT/SIGTERM wait until a step is done; after a kill -9 at any
moment, `verify` holds: every scheduler in summary.json has exactly its counted rows, a scheduler
marked as committing has all of them or none, and no other rows exist. A real or attached
scheduler cut short by a signal is committed too, marked `partial` (the rows of the jobs it had
sent, measured up to the signal): `verify` checks it is the scheduler `running` names in an
incomplete run and that its rows are the jobs it sent.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from loadgen.input.files import os_reason
from loadgen.measure.recorder import Recorder
from loadgen.model.errors import UserError
from loadgen.model.signals import signals_held
from loadgen.output.paths import component

JOBS_HEADER = ["scheduler", "backend", "job_id", "tenant", "cls", "members", "gpus_per_member",
               "submit_s", "sent_s", "admitted_s", "admission_s", "backend_admission_s",
               "finished_s", "evictions", "outcome", "reason",
               "placement_to_ready_s", "rendezvous_s", "time_to_training_s", "start_failures"]
SERIES_HEADER = ["scheduler", "t", "gpus_allocated", "gpus_partial", "gpus_stranded",
                 "pending_jobs", "partial_gangs", "running_jobs"]
CP_PREFIX = "cp_"     # then a target's own control-plane gauges (Snapshot.control_plane), one column each
CSVS = ("jobs.csv", "timeseries.csv")
CREATED: list[Path] = []        # run folders this process created, for the CLI's "interrupted" line


class OutputError(UserError):
    """An output folder that cannot be used: one line naming the path and what was expected."""


def new_run_id(scenario_name: str, clock=time.time) -> str:
    """<UTC time>-<the scenario's name as one safe folder-name component> (loadgen/output/paths.py)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock())) + f"-{component(scenario_name, 'scenario')}"


def fresh_run_dir(root: str | Path, run_id: str) -> Path:
    """results/<run-id>, or <run-id>-2, -3, ... when a run started in the same second took it."""
    root = Path(root)
    path, k = root / run_id, 2
    while path.exists():
        path, k = root / f"{run_id}-{k}", k + 1
    return path


def check_out_dir(path: str | Path, flag: str = "--out", reuse: bool = False) -> Path:
    """Refuse, without writing anything, a folder a run cannot own: a file, a path under a file, a
    folder that already holds files (a second run would mix its rows into the first's; `reuse`
    allows it, for caches such as calibrate's), or one that cannot be created or written."""
    if str(path) == "":
        raise OutputError(f"{flag}: expected a directory path, got an empty one "
                          f"(leave {flag} out for results/<run-id>)")
    if "\x00" in str(path):
        raise OutputError(f"{flag}: expected a directory path, got one holding a NUL character")
    p = Path(path)
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:
        raise OutputError(f"{flag} {path}: {os_reason(e)}") from None
    for parent in [p, *p.parents]:
        if parent.exists() and not parent.is_dir():
            what = "is" if parent == p else f"is under {parent}, which is"
            raise OutputError(f"{flag} {path}: expected a new or empty directory, but it {what} a file")
        if parent.exists():
            if parent == p and not reuse and any(p.iterdir()):
                raise OutputError(f"{flag} {path}: expected a new or empty directory, it already holds "
                                  f"files (a previous run?); choose another {flag}")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise OutputError(f"{flag} {path}: expected a writable directory, {parent} is not writable")
            break
    return p


def atomic_write(path: Path, text: str) -> None:
    """`text` written beside `path` and renamed over it; a write that fails (a full disk) leaves
    `path` as it was, no temporary file behind, and ends in OutputError."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(path, e) from None


class WriteFailed(OutputError):
    """A file that could not be written (a full disk, a quota): one line; the file is as it was."""

    after_start = True          # the CLI's line adds where the partial results are kept

    def __init__(self, path: Path, e: OSError):
        self.reason = e.strerror or type(e).__name__
        super().__init__(f"{path}: cannot be written ({self.reason}); the file is as it was before")


class RunStore:
    """One run folder. `create` makes it whole with the run's first summary; `commit` adds results."""

    def __init__(self, out_dir: Path):
        self.dir = Path(out_dir)
        self.files: dict = {"jobs.csv": {}, "timeseries.csv": {}, "committing": []}

    @classmethod
    def create(cls, out_dir: Path, summary: dict, flag: str = "--out") -> RunStore:
        store = cls(check_out_dir(out_dir, flag))
        out = store.dir
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            stage = out.parent / f".{out.name}.partial-{os.getpid()}"
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir()
            with signals_held():
                store._write_summary(stage, summary)
                os.rename(stage, out)          # replaces an empty folder; refuses a non-empty one
        except OSError as e:
            shutil.rmtree(out.parent / f".{out.name}.partial-{os.getpid()}", ignore_errors=True)
            raise OutputError(f"{flag} {out_dir}: cannot create the run folder ({e.strerror})") from None
        CREATED.append(out)
        return store

    @classmethod
    def attach(cls, out_dir: Path) -> RunStore:
        """A folder the caller already made and owns (the Locust driver writes its own files there)."""
        store = cls(out_dir)
        store.dir.mkdir(parents=True, exist_ok=True)
        return store

    def write_summary(self, summary: dict) -> Path:
        with signals_held():
            return self._write_summary(self.dir, summary)

    def _write_summary(self, folder: Path, summary: dict) -> Path:
        summary["files"] = {k: (list(v) if isinstance(v, list) else dict(v)) for k, v in self.files.items()}
        path = folder / "summary.json"
        atomic_write(path, json.dumps(_finite(summary), indent=2, sort_keys=False, default=_default,
                                      allow_nan=False) + "\n")
        return path

    def write_text(self, name: str, text: str) -> None:
        with signals_held():
            atomic_write(self.dir / name, text)

    def commit(self, summary: dict, rows: list[tuple[str, str, Recorder]] = ()) -> None:
        """summary.json, and each (scheduler, backend, recorder)'s rows in jobs.csv and timeseries.csv."""
        if not rows:
            self.write_summary(summary)
            return
        with signals_held():
            before = copy.deepcopy(self.files)
            try:
                staged = {name: self._stage(name, rows) for name in CSVS}
                self.files["committing"] = [r[0] for r in rows]
                for name, (_, counts) in staged.items():
                    self.files[name].update(counts)
                self._write_summary(self.dir, summary)
            except (OSError, WriteFailed) as e:     # a full disk: the folder stays as the last commit left it
                self.files = before
                for name in CSVS:
                    (self.dir / f".{name}.staged").unlink(missing_ok=True)
                why = e.reason if isinstance(e, WriteFailed) else (e.strerror or type(e).__name__)
                err = OutputError(f"{self.dir}: the rows of {', '.join(r[0] for r in rows)} cannot be written "
                                  f"({why}); the folder keeps what was committed before")
                err.after_start = True
                raise err from None
            for name, (tmp, _) in staged.items():
                os.replace(tmp, self.dir / name)
            self.files["committing"] = []
            self._write_summary(self.dir, summary)

    def _stage(self, name: str, rows) -> tuple[Path, dict[str, int]]:
        if name == "timeseries.csv":
            return self._stage_series(rows)
        path, tmp = self.dir / name, self.dir / f".{name}.staged"
        if path.exists():
            shutil.copyfile(path, tmp)
        else:
            tmp.write_text(",".join(JOBS_HEADER) + "\n")
        counts = {}
        with open(tmp, "a", newline="") as f:
            w = csv.writer(f)
            for scheduler, backend, rec in rows:
                lines = _job_rows(scheduler, backend, rec)
                w.writerows(lines)
                counts[scheduler] = len(lines)
        return tmp, counts

    def _stage_series(self, rows) -> tuple[Path, dict[str, int]]:
        """timeseries.csv is rewritten whole: each scheduler brings its own control-plane gauges, and
        the header is the fixed columns plus every cp_* column any scheduler so far has (sorted)."""
        path, tmp = self.dir / "timeseries.csv", self.dir / ".timeseries.csv.staged"
        old: list[dict] = []
        cp = set()
        if path.exists():
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                old = list(reader)
                cp.update(k for k in reader.fieldnames or () if k.startswith(CP_PREFIX))
        new = {scheduler: [_series_row(scheduler, s) for s in rec.samples] for scheduler, _, rec in rows}
        cp = sorted(cp | {k for lines in new.values() for r in lines for k in r if k.startswith(CP_PREFIX)})
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, SERIES_HEADER + cp, restval="")
            w.writeheader()
            w.writerows(old)
            for lines in new.values():
                w.writerows(lines)
        return tmp, {scheduler: len(lines) for scheduler, lines in new.items()}


def _job_rows(scheduler: str, backend: str, rec: Recorder) -> list[list]:
    out = []
    for i, j in enumerate(rec.jobs):
        adm = rec.admit[i]
        outcome = ("failed" if rec.failed[i] else "rejected" if rec.rejected[i]
                   else "finished" if not np.isnan(rec.finish[i])
                   else "running" if not np.isnan(adm) else "pending")
        out.append([scheduler, backend, j.id, j.tenant, j.cls, j.members, j.gpus_per_member,
                    _f(j.submit_s), _f(rec.sent[i]), _f(adm), _f(adm - j.submit_s),
                    _f(rec.backend_admit[i] - j.submit_s), _f(rec.finish[i]), int(rec.evictions[i]),
                    outcome, rec.reason.get(j.id, ""),
                    _f(rec.ready[i] - adm), _f(rec.training[i] - rec.ready[i]), _f(rec.training[i] - j.submit_s),
                    int(rec.start_failures[i])])
    return out


def _series_row(scheduler: str, s) -> dict:
    row = {"scheduler": scheduler, "t": _f(s.t), "gpus_allocated": s.gpus_allocated, "gpus_partial": s.gpus_partial,
           "gpus_stranded": s.gpus_stranded, "pending_jobs": s.pending_jobs, "partial_gangs": s.partial_gangs,
           "running_jobs": s.running_jobs}
    for k, v in _gauges(s.control_plane).items():
        row[CP_PREFIX + k] = v
    return row


def _gauges(cp: dict, prefix: str = "", depth: int = 0) -> dict[str, str]:
    """The numeric figures of a snapshot's control-plane dict as CSV cells: booleans as 0/1, nested
    dicts (a real backend's scrapes) flattened with _ up to two levels; text and lists left out."""
    out: dict[str, str] = {}
    for k, v in cp.items():
        key = f"{prefix}{k}".replace(",", "_")
        if isinstance(v, (bool, np.bool_)):
            out[key] = "1" if v else "0"
        elif isinstance(v, (int, np.integer)):
            out[key] = str(int(v))
        elif isinstance(v, (float, np.floating)):
            out[key] = _f(float(v)) if np.isfinite(v) else ""
        elif isinstance(v, dict) and depth < 2:
            out.update(_gauges(v, f"{key}_", depth + 1))
    return out


def verify(run_dir: str | Path) -> list[str]:
    """What is inconsistent between summary.json and the CSVs of a run folder (empty: nothing)."""
    d = Path(run_dir)
    try:
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError) as e:
        return [f"summary.json: not readable JSON ({e})"]
    files = summary.get("files") or {"jobs.csv": {}, "timeseries.csv": {}, "committing": []}
    committing = set(files.get("committing", []))
    problems = []
    listed = set(summary.get("schedulers", {}))
    if committing - listed:
        problems.append(f"summary.json: committing {sorted(committing - listed)} not among its schedulers")
    for name in CSVS:
        counted = files.get(name, {})
        found: dict[str, int] = {}
        if (d / name).exists():
            with open(d / name, newline="") as f:
                for row in list(csv.reader(f))[1:]:
                    found[row[0]] = found.get(row[0], 0) + 1
        for s in set(found) | set(counted):
            n, want = found.get(s, 0), counted.get(s, 0)
            if s not in listed:
                problems.append(f"{name}: {n} rows of {s}, which summary.json does not list")
            elif n != want and not (s in committing and n == 0):
                problems.append(f"{name}: {n} rows of {s}, summary.json counts {want}")
    problems += _verify_partial(summary, files)
    if isinstance(summary.get("seeds"), dict):
        problems += _verify_seeds(d, summary["seeds"])
    return problems


def _verify_seeds(d: Path, seeds: dict) -> list[str]:
    """A run over several seeds (drive/seeds.py): every seed it counts as completed has a complete,
    consistent folder seeds/<seed>/; every seed folder there is a planned seed's and consistent
    (a running or interrupted one may be partial)."""
    problems = []
    planned = {str(s) for s in seeds.get("planned") or []}
    completed = {str(s) for s in seeds.get("completed") or []}
    if completed - planned:
        problems.append(f"summary.json: completed seeds {sorted(completed - planned)} were not planned")
    folder = d / "seeds"
    present = {p.name for p in folder.iterdir() if p.is_dir()
               and not p.name.startswith(".")} if folder.is_dir() else set()
    for s in sorted(completed - present):
        problems.append(f"seeds/{s}: completed in summary.json, but the folder is missing")
    for s in sorted(present):
        if s not in planned:
            problems.append(f"seeds/{s}: a folder of a seed summary.json does not plan")
            continue
        inner = verify(folder / s)
        problems += [f"seeds/{s}/{p}" for p in inner]
        if s in completed and not inner:
            try:
                done = json.loads((folder / s / "summary.json").read_text()).get("complete") is True
            except (OSError, ValueError):
                done = False
            if not done:
                problems.append(f"seeds/{s}: completed in summary.json, but its summary.json is not complete")
    return problems


def _verify_partial(summary: dict, files: dict) -> list[str]:
    """A scheduler kept partial (a real or attached run cut by a signal) is the one `running`
    names in an incomplete run, and jobs.csv holds exactly the jobs it had sent."""
    problems = []
    for name, result in (summary.get("schedulers") or {}).items():
        part = result.get("partial") if isinstance(result, dict) else None
        if part is None:
            continue
        if summary.get("complete"):
            problems.append(f"summary.json: {name} is marked partial in a run marked complete")
        if summary.get("running") != name:
            problems.append(f"summary.json: {name} is marked partial, but running names {summary.get('running')!r}")
        rows = (files.get("jobs.csv") or {}).get(name)
        sent = part.get("jobs_sent") if isinstance(part, dict) else None
        if rows is not None and rows != sent:
            problems.append(f"jobs.csv: {rows} rows of partial {name}, summary.json says it sent {sent}")
        submitted = ((result.get("jobs") or {}).get("submitted"))
        if submitted is not None and submitted != sent:
            problems.append(f"summary.json: partial {name} counts {submitted} jobs submitted, but sent {sent}")
    return problems


def _f(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.6f}"


def _finite(o):
    """NaN and infinity are not JSON: they are written as null."""
    if isinstance(o, float):
        return o if np.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, np.floating):
        return float(o) if np.isfinite(o) else None
    return o


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))
