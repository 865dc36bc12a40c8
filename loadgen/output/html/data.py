"""What a report is built from, read off a folder into plain structures (no plotting here).

A run folder (`gangstorm run`, Locust, a ceiling point) holds summary.json and, when the run wrote
them, jobs.csv and timeseries.csv; a ceiling folder (`gangstorm ceiling`) holds ceiling.json. A
partial run ("complete": false) or a folder without the CSVs still gives a report: what is missing
is listed in `notes` and the page says so where the figure would be.
"""
from __future__ import annotations

import contextlib
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.input import files
from loadgen.model.errors import UserError

MAX_JSON_BYTES = 256 * 1024 * 1024        # a 10,000-node four-scheduler summary.json is about 60 KiB
MAX_CSV_BYTES = 8 * 1024 * 1024 * 1024    # 2,000,000 jobs x 4 schedulers in jobs.csv is about 1.2 GiB
SERIES_FIXED = ("gpus_allocated", "gpus_partial", "gpus_stranded", "pending_jobs", "partial_gangs", "running_jobs")
CP_PREFIX = "cp_"


class ReportError(UserError):
    """A folder a report cannot be built from: one line naming the path and what was expected."""


@dataclass
class RunData:
    dir: Path
    summary: dict[str, Any]
    # scheduler -> class -> sorted admission latencies (s) of admitted jobs; None without jobs.csv
    admission: dict[str, dict[str, np.ndarray]] | None
    # scheduler -> column -> values ("t" in the run's virtual seconds); None without timeseries.csv
    series: dict[str, dict[str, np.ndarray]] | None
    profile: Any = None                     # loadgen.input.profile.Profile, read at report time
    profile_note: str = ""
    notes: dict[str, str] = field(default_factory=dict)   # section -> what is missing and why

    @property
    def schedulers(self) -> list[str]:
        return list(self.summary.get("schedulers") or {})

    @property
    def partial(self) -> bool:
        return not self.summary.get("complete", False)


@dataclass
class CeilingData:
    dir: Path
    ceiling: dict[str, Any]


def load(folder: str | Path) -> RunData | CeilingData:
    """The folder's data, or ReportError if it is neither a run folder nor a ceiling folder."""
    d = Path(folder)
    if not d.exists():
        raise ReportError(f"{folder}: no such directory; expected a run folder (results/<run-id>/)")
    if not d.is_dir():
        raise ReportError(f"{folder}: expected a run folder (results/<run-id>/), got a file")
    if (d / "ceiling.json").is_file():
        return CeilingData(d, _read_json(d / "ceiling.json", ("points", "ceiling"), "a gangstorm ceiling.json "
                                                                                   "(with points and ceiling)"))
    if not (d / "summary.json").is_file():
        raise ReportError(f"{folder}: expected a run folder holding summary.json (or a ceiling folder holding "
                          f"ceiling.json), found neither")
    summary = _read_json(d / "summary.json", ("run_id", "schedulers"), "a gangstorm summary.json (with run_id "
                                                                       "and schedulers)")
    return load_run(d, summary)


def load_run(d: Path, summary: dict) -> RunData:
    data = RunData(d, summary, admission=None, series=None)
    names = data.schedulers
    if (d / "jobs.csv").is_file():
        data.admission = read_admission(d / "jobs.csv", names)
        lacking = [n for n in names if n not in data.admission]
        if lacking:
            data.notes["admission"] = f"jobs.csv has no rows for {', '.join(lacking)}"
    else:
        data.notes["admission"] = ("jobs.csv is missing (this run did not write per-job rows, e.g. a ceiling "
                                   "point): no CDFs; the quantiles in the tables come from summary.json")
    if (d / "timeseries.csv").is_file():
        data.series = read_series(d / "timeseries.csv", names)
    else:
        data.notes["timeline"] = "timeseries.csv is missing: no timelines"
    if not names:
        data.notes["run"] = "summary.json lists no scheduler yet (interrupted before the first one finished)"
    data.profile, data.profile_note = read_profile(summary)
    return data


def _read_json(path: Path, keys: tuple[str, ...], expected: str) -> dict:
    try:
        data = files.read_bytes(path, MAX_JSON_BYTES, expected)
    except files.FileError as e:
        raise ReportError(f"{path}: {e.expected}") from None
    try:
        obj = files.loads(data.decode("utf-8").removeprefix("\ufeff"))
    except UnicodeDecodeError:
        raise ReportError(f"{path}: expected UTF-8 JSON text ({expected})") from None
    except ValueError as e:
        where = f"line {e.lineno}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise ReportError(f"{path}: not valid JSON ({where}); expected {expected}") from None
    if not isinstance(obj, dict) or not all(k in obj for k in keys) or not all(
            isinstance(obj[k], dict) for k in keys if k in ("schedulers", "points", "ceiling")):
        raise ReportError(f"{path}: expected {expected}")
    _check_shape(obj, SUMMARY_SHAPE if "schedulers" in keys else CEILING_SHAPE, path, "")
    return obj


# Where a summary.json or ceiling.json must hold a mapping (or a list) for the page to read it: a
# hand-edited or foreign file is refused with the key, not drawn into a traceback. "*" is any key.
MAPPING, LIST = "a mapping", "a list"
_RESULT = {"jobs": MAPPING, "admission_s": MAPPING, "admission_s_incl_pending": MAPPING, "by_class": {"*": MAPPING},
           "budgets": {"*": {"*": MAPPING}}, "activity": MAPPING, "placement": MAPPING, "topology": MAPPING,
           "control_plane": MAPPING, "chaos_applied": {"*": MAPPING}, "model": MAPPING, "scheduling_tax": MAPPING}
SUMMARY_SHAPE = {"schedulers": {"*": _RESULT}, "fleet": MAPPING, "workload": MAPPING, "profile": MAPPING,
                 "slo": MAPPING, "chaos": LIST}
CEILING_SHAPE = {"points": {"*": LIST}, "ceiling": {"*": {"evidence": MAPPING}}, "slo": MAPPING}


def _check_shape(obj: Any, shape: Any, path: Path, where: str) -> None:
    if obj is None:
        return                          # absent values read as missing
    if shape == LIST:
        if not isinstance(obj, list):
            raise ReportError(f"{path}: {where}: expected {LIST}, got {type(obj).__name__}")
        return
    if not isinstance(obj, dict):
        raise ReportError(f"{path}: {where}: expected {MAPPING}, got {type(obj).__name__}")
    if shape == MAPPING:
        return
    for key, value in obj.items():
        sub = shape.get(key, shape.get("*"))
        if sub is not None:
            _check_shape(value, sub, path, f"{where}.{key}" if where else str(key))


def _num(text: str) -> float:
    try:
        return float(text) if text != "" else np.nan
    except ValueError:
        return np.nan


@contextlib.contextmanager
def _csv(path: Path):
    """A csv.reader over a run folder's CSV read as any input is (a regular file, bounded); what
    cannot be read as CSV text is one line naming the file."""
    try:
        yield csv.reader(files.lines(path, MAX_CSV_BYTES, "CSV file"))
    except files.FileError as e:
        raise ReportError(str(e)) from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: expected UTF-8 CSV text (is this a binary file?)") from None
    except csv.Error as e:
        raise ReportError(f"{path}: expected CSV ({e})") from None


def read_admission(path: Path, names: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """scheduler -> {"all": ..., class: ...} of sorted admission seconds (admitted jobs only, as in
    summary.json's admission_s). Rows of schedulers summary.json does not list are ignored."""
    wanted = set(names)
    acc: dict[str, dict[str, list[float]]] = {}
    with _csv(path) as reader:
        header = next(reader, [])
        try:
            i_s, i_c, i_a = header.index("scheduler"), header.index("cls"), header.index("admission_s")
        except ValueError:
            raise ReportError(f"{path}: expected a jobs.csv header with scheduler, cls and admission_s") from None
        for row in reader:
            if len(row) <= i_a or row[i_s] not in wanted:
                continue
            by = acc.setdefault(row[i_s], {})
            if row[i_a] != "":
                by.setdefault(row[i_c], []).append(_num(row[i_a]))
            else:
                by.setdefault(row[i_c], [])
    out: dict[str, dict[str, np.ndarray]] = {}
    for n in names:
        if n not in acc:
            continue
        classes = {c: np.sort(np.array(v, dtype=float)) for c, v in sorted(acc[n].items())}
        out[n] = {"all": np.sort(np.concatenate(list(classes.values()))) if classes else np.zeros(0), **classes}
    return out


def read_series(path: Path, names: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """scheduler -> column -> float array (blank cells NaN); only schedulers summary.json lists."""
    wanted = set(names)
    rows: dict[str, list[list[str]]] = {}
    with _csv(path) as reader:
        header = next(reader, [])
        if "scheduler" not in header or "t" not in header:
            raise ReportError(f"{path}: expected a timeseries.csv header starting scheduler,t")
        for row in reader:
            if row and row[0] in wanted:
                rows.setdefault(row[0], []).append(row)
    out: dict[str, dict[str, np.ndarray]] = {}
    for n in names:
        if n not in rows:
            continue
        cols: dict[str, np.ndarray] = {}
        table = rows[n]
        for j, name in enumerate(header):
            if name == "scheduler":
                continue
            col = np.array([_num(r[j]) if j < len(r) else np.nan for r in table], dtype=float)
            if name.startswith(CP_PREFIX) and np.all(np.isnan(col)):
                continue                       # another scheduler's gauge
            cols[name] = col
        out[n] = cols
    return out


def cp_columns(series: dict[str, dict[str, np.ndarray]] | None) -> list[str]:
    """Every control-plane column (without its cp_ prefix) some scheduler has, sorted."""
    if not series:
        return []
    return sorted({k[len(CP_PREFIX):] for cols in series.values() for k in cols if k.startswith(CP_PREFIX)})


def read_profile(summary: dict) -> tuple[Any, str]:
    """The calibration profile the run names, read now (its file may have changed since the run)."""
    prof = summary.get("profile") or {}
    path = prof.get("path")
    if not path:
        return None, "summary.json names no profile file"
    from loadgen.input.profile import ProfileError, load
    try:
        return load(path), f"parameters as {path} holds them now (read when this report was built)"
    except ProfileError as e:
        return None, f"the profile file could not be read: {e}"


def chaos_events(summary: dict) -> tuple[list[tuple[float, str]], int]:
    """Timed chaos steps as (t seconds, kind), and how many evictions (summary.json keeps their count only)."""
    timed, evictions = [], 0
    for e in summary.get("chaos") or []:
        if not isinstance(e, dict):
            continue
        if e.get("kind") == "evict" and "t" not in e:
            evictions += int(e.get("count") or 0)
        elif isinstance(e.get("t"), (int, float)):
            timed.append((float(e["t"]), str(e.get("kind"))))
    return sorted(timed), evictions
