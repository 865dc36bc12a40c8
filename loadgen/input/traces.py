"""Trace files: gangstorm JSONL (export/replay the same jobs on every backend) and openb pod CSVs.

JSONL: one Job per line as JSON; a first line {"gangstorm_trace": 1, ...} carries metadata.
openb (alibaba/clusterdata cluster-trace-gpu-v2023): one pod = a one-member job of num_gpu GPUs,
duration = deletion_time - creation_time, submit = creation_time (shifted so the first is 0).
CPU-only pods (num_gpu 0) and pods without a deletion time are skipped and counted. A one-GPU pod
with gpu_milli < 1000 asks for that fraction of one GPU (share "milli:N") when the fleet shares
GPUs by fraction (`shares=True`); on a fleet of whole GPUs it takes a whole one, as before shares
existed, and is counted in meta["fractions_as_whole"]. gpu_spec ("V100M16|V100M32": models the pod
accepts) becomes Job.gpu_spec in catalogue names.
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import fields
from pathlib import Path

from loadgen.input import files, names
from loadgen.input.workload import tenant_names
from loadgen.model.errors import TraceError, UserError
from loadgen.model.gpushare import gpu_model, parse_share
from loadgen.model.job import Job

REQUIRED_JOB_KEYS = {"id", "members", "gpus_per_member", "duration_s", "submit_s"}
HEADER = "gangstorm_trace"
MAX_DEPTH = 4                       # a job line is flat; a header may hold a mapping or two
OPENB_COLUMNS = {"name", "num_gpu", "creation_time", "deletion_time"}


def export_jsonl(jobs: list[Job], path: str | Path, meta: dict | None = None) -> None:
    """Written beside the target and renamed into place: an interrupted export leaves no half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps({HEADER: 1, **(meta or {})}) + "\n")
            for j in jobs:
                f.write(j.to_json() + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# Bounds: times within a year, ints far beyond any fleet; what a run may hold (jobs, samples) is
# checked against the scenario by loadgen/input/limits.py.
MAX_SUBMIT_S = 365 * 86400.0
MAX_DURATION_S = 365 * 86400.0
INT_LIMITS = {"id": 2**53, "members": 100_000, "gpus_per_member": 64, "min_available": 100_000,
              "cpus_per_member": 100_000, "priority": 1_000_000_000}
STRINGS = ("tenant", "queue", "cls", "name", "share", "gpu_spec")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _job_from_row(row: dict, src: str, lineno: int) -> Job:
    where = f"line {lineno}"
    missing = REQUIRED_JOB_KEYS - set(row)
    if missing:
        raise TraceError(src, where, f"missing field {sorted(missing)[0]!r}")
    numeric = {"id": int, "members": int, "gpus_per_member": int, "duration_s": float, "submit_s": float,
               "min_available": int, "cpus_per_member": int, "priority": int}
    for key, kind in numeric.items():
        if key not in row:
            continue
        v = row[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TraceError(src, f"{where}: {key}", f"expected a number, got {v!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise TraceError(src, f"{where}: {key}", f"expected a finite number, got {v!r}")
        if kind is int and float(v) != int(v):
            raise TraceError(src, f"{where}: {key}", f"expected an integer, got {v!r}")
        if kind is int and not -INT_LIMITS[key] <= v <= INT_LIMITS[key]:
            raise TraceError(src, f"{where}: {key}", f"expected at most {INT_LIMITS[key]:,} in magnitude, got {v!r}")
    for key in STRINGS:
        if key in row and not isinstance(row[key], str):
            raise TraceError(src, f"{where}: {key}", f"expected a string, got {row[key]!r}")
        if key in ("name", "share", "gpu_spec") and row.get(key, "") == "":
            continue                # the job model's own "no name", as export_jsonl writes it
        if key == "share":
            _check_share(row, src, where)
            continue
        if key == "gpu_spec":
            row = {**row, "gpu_spec": _gpu_spec(row[key], src, f"{where}: gpu_spec")}
            continue
        if key in row and (why := (names.class_problem if key == "cls" else names.problem)(row[key])):
            raise TraceError(src, f"{where}: {key}", why)
    for key in ("members", "gpus_per_member"):
        if row[key] < 1:
            raise TraceError(src, f"{where}: {key}", f"expected >= 1, got {row[key]!r}")
    if not 0 < row["duration_s"] <= MAX_DURATION_S:
        raise TraceError(src, f"{where}: duration_s", f"expected a time in (0, {MAX_DURATION_S:.0f}] s, "
                         f"got {row['duration_s']:g}")
    if not 0 <= row["submit_s"] <= MAX_SUBMIT_S:
        raise TraceError(src, f"{where}: submit_s", f"expected a time in [0, {MAX_SUBMIT_S:.0f}] s (a year), "
                         f"got {row['submit_s']:g}")
    if "min_available" in row and not 1 <= row["min_available"] <= row["members"]:
        raise TraceError(src, f"{where}: min_available", f"expected 1 to members ({row['members']}), "
                         f"got {row['min_available']!r}")
    if row.get("cpus_per_member", 0) < 0:
        raise TraceError(src, f"{where}: cpus_per_member", f"expected >= 0, got {row['cpus_per_member']!r}")
    row = dict(row)
    for key, kind in numeric.items():
        if key in row:
            row[key] = kind(row[key])
    row.setdefault("tenant", "default")
    row.setdefault("queue", f"q-{row['tenant']}")
    row.setdefault("cls", "large" if row["members"] >= 8 else "small")
    row.setdefault("min_available", row["members"])
    known = {f.name for f in fields(Job)}
    return Job(**{k: v for k, v in row.items() if k in known})


def _check_share(row: dict, src: str, where: str) -> None:
    try:
        share = parse_share(row["share"], f"{src}: {where}: share")
    except UserError as e:
        raise TraceError(src, f"{where}: share", str(e).split(": share: ", 1)[-1]) from None
    if not share.is_whole and row["gpus_per_member"] != 1:
        raise TraceError(src, f"{where}: gpus_per_member", f"a member with share {share.text!r} takes one slice of "
                         f"one GPU; expected 1, got {row['gpus_per_member']!r}")


def _gpu_spec(text: str, src: str, where: str) -> str:
    """openb's gpu_spec ("V100M16|V100M32") in catalogue names, "|"-separated ("" any)."""
    out = []
    for name in str(text).split("|"):
        if name.strip():
            try:
                out.append(gpu_model(name, where).name)
            except UserError as e:
                raise TraceError(src, where, str(e).split(f"{where}: ", 1)[-1]) from None
    return "|".join(out)


def _lines(path: str | Path, src: str):
    """(line number, text) of a trace file, with one-line errors for what cannot be read as text:
    a regular file only (a FIFO or a device never ends), at most MAX_BYTES."""
    lineno = 0
    try:
        for lineno, line in enumerate(files.lines(path, MAX_BYTES, "trace file"), 1):
            if "\x00" in line:
                raise TraceError(src, f"line {lineno}", "expected text, found a NUL byte (is this a binary file?)")
            if len(line) > MAX_LINE:
                raise TraceError(src, f"line {lineno}", f"expected a line of at most {MAX_LINE:,} characters")
            if lineno > MAX_LINES:
                raise TraceError(src, "file", f"expected at most {MAX_LINES:,} lines (a run's job limit)")
            yield lineno, line
    except files.FileError as e:
        raise TraceError(src, "file", "no such trace file" if e.expected == "no such file" else e.expected) from None
    except UnicodeDecodeError:
        raise TraceError(src, f"line {lineno + 1}", "expected UTF-8 text (is this a binary file?)") from None


MAX_LINE = 64 * 1024
MAX_LINES = 2_000_001
MAX_BYTES = 1024 * files.MIB         # a 2,000,000-job JSONL trace is about 460 MiB


def import_jsonl(path: str | Path) -> tuple[list[Job], dict]:
    src = str(path)
    jobs, meta = [], {}
    first = None
    for lineno, line in _lines(path, src):
        if not line.strip():
            continue
        first = first or lineno
        try:
            row = files.loads(line, parse_constant=_reject_constant, depth=MAX_DEPTH)
        except ValueError as e:
            msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
            raise TraceError(src, f"line {lineno}", f"expected a JSON object ({msg})") from None
        if not isinstance(row, dict):
            raise TraceError(src, f"line {lineno}", "expected a JSON object")
        if HEADER in row:
            # the header is the first line, and only a header: a job line carrying the key would
            # otherwise vanish from the replay without a word
            if lineno != first:
                raise TraceError(src, f"line {lineno}", f"expected a job without the {HEADER!r} key (only the first "
                                 "line, the header, carries it)")
            if REQUIRED_JOB_KEYS & set(row):
                raise TraceError(src, f"line {lineno}", f"expected either the {HEADER!r} header or a job, got a "
                                 f"line with both ({', '.join(sorted(REQUIRED_JOB_KEYS & set(row)))})")
            meta = row
            continue
        jobs.append(_job_from_row(row, src, lineno))
    seen: set[int] = set()
    for j in jobs:
        if j.id in seen:
            raise TraceError(src, "id", f"expected unique job ids, {j.id} appears twice")
        seen.add(j.id)
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    return jobs, meta


def import_openb(path: str | Path, gpus_per_node: int = 8, cpus_per_node: int = 96, tenants: int = 6,
                 seed: int = 1, limit: int | None = None, shares: bool = False) -> tuple[list[Job], dict]:
    src = str(path)
    owners = tenant_names(tenants, seed)
    rows = []
    skipped = {"cpu_only": 0, "no_deletion_time": 0, "too_many_gpus": 0}
    fractions = 0
    text = (line.lstrip("\ufeff") if n == 1 else line for n, line in _lines(path, src))
    try:
        reader = csv.DictReader(text)
        missing = OPENB_COLUMNS - set(reader.fieldnames or [])
    except csv.Error as e:
        raise TraceError(src, "header", f"expected a CSV header ({e})") from None
    if missing:
        raise TraceError(src, "header", f"expected openb columns, missing {sorted(missing)[0]!r}")
    lineno = 1
    try:
        for lineno, r in enumerate(reader, 2):
            try:
                gpus = float(r["num_gpu"])
                created = float(r["creation_time"])
                deleted = float(r["deletion_time"]) if r["deletion_time"] else None
            except (TypeError, ValueError):
                raise TraceError(src, f"line {lineno}",
                                 "expected numeric num_gpu/creation_time/deletion_time") from None
            if not all(math.isfinite(x) for x in (gpus, created, deleted or 0.0)):
                raise TraceError(src, f"line {lineno}", "expected finite num_gpu/creation_time/deletion_time")
            if gpus < 0 or gpus != int(gpus):
                raise TraceError(src, f"line {lineno}: num_gpu", f"expected a whole number >= 0, got {r['num_gpu']!r}")
            gpus = int(gpus)
            if gpus == 0:
                skipped["cpu_only"] += 1
                continue
            if deleted is None or deleted <= created:
                skipped["no_deletion_time"] += 1
                continue
            if gpus > gpus_per_node:
                skipped["too_many_gpus"] += 1
                continue
            if r["name"] and (why := names.problem(r["name"])):
                raise TraceError(src, f"line {lineno}: name", why)
            milli = _milli(r.get("gpu_milli"), gpus, src, lineno)
            fractions += milli < 1000
            share = f"milli:{milli}" if shares and milli < 1000 else ""
            spec = _gpu_spec(r.get("gpu_spec") or "", src, f"line {lineno}: gpu_spec")
            rows.append((created, deleted - created, gpus, r["name"] or f"pod-{lineno}", share, spec))
    except csv.Error as e:
        raise TraceError(src, f"line {lineno + 1}", f"expected CSV ({e})") from None
    rows.sort()
    if limit is not None:
        rows = rows[:limit]
    t0 = rows[0][0] if rows else 0.0
    cpg = cpus_per_node // gpus_per_node
    jobs = []
    for i, (created, dur, gpus, name, share, spec) in enumerate(rows):
        tenant = owners[i % len(owners)]
        jobs.append(Job(id=i, tenant=tenant, queue=f"q-{tenant}", cls="openb-frac" if share else f"openb-{gpus}gpu",
                        members=1, gpus_per_member=gpus, duration_s=min(dur, MAX_DURATION_S), submit_s=created - t0,
                        min_available=1, cpus_per_member=0 if share else gpus * cpg, name=name, share=share,
                        gpu_spec=spec))
    meta = {"source": src, "skipped": skipped}
    if not shares and fractions:
        meta["fractions_as_whole"] = fractions
    return jobs, meta


def _milli(text: str | None, gpus: int, src: str, lineno: int) -> int:
    """gpu_milli of a pod (1000 when absent): 1..1000 for a one-GPU pod; a multi-GPU pod takes whole GPUs."""
    if text is None or text == "":
        return 1000
    try:
        milli = float(text)
    except ValueError:
        raise TraceError(src, f"line {lineno}: gpu_milli", f"expected a number, got {text!r}") from None
    if not math.isfinite(milli) or milli != int(milli) or not 0 < milli <= 1000:
        raise TraceError(src, f"line {lineno}: gpu_milli", f"expected a whole number in 1..1000 (a fraction of one "
                         f"GPU in (0, 1]), got {text!r}")
    if gpus > 1 and milli != 1000:
        raise TraceError(src, f"line {lineno}: gpu_milli", f"a pod of {gpus} GPUs takes whole GPUs; expected 1000, "
                         f"got {text!r}")
    return int(milli)


def is_csv(path: str | Path) -> bool:
    """An openb CSV (any case of .csv: x.CSV too), else gangstorm JSONL."""
    return str(path).lower().endswith(".csv")


def load_trace(path: str | Path, **openb_kwargs) -> tuple[list[Job], dict]:
    """JSONL or openb CSV, told apart by suffix."""
    return import_openb(path, **openb_kwargs) if is_csv(path) else import_jsonl(path)


def compress(jobs: list[Job], churn: float) -> list[Job]:
    """Apply a churn multiplier to a replayed trace: arrivals c times as fast, durations / c."""
    if churn == 1:
        return jobs
    from dataclasses import replace
    return [replace(j, submit_s=j.submit_s / churn, duration_s=max(j.duration_s / churn, 1.0)) for j in jobs]
