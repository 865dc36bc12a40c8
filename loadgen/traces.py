"""Trace files: gangstorm JSONL (export/replay the same jobs on every backend) and openb pod CSVs.

JSONL: one Job per line as JSON; a first line {"gangstorm_trace": 1, ...} carries metadata.
openb (alibaba/clusterdata cluster-trace-gpu-v2023): one pod = a one-member job of num_gpu GPUs,
duration = deletion_time - creation_time, submit = creation_time (shifted so the first is 0).
CPU-only pods (num_gpu 0) and pods without a deletion time are skipped and counted.
"""
from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path

from loadgen.errors import UserError
from loadgen.model.job import Job
from loadgen.workload import tenant_names

REQUIRED_JOB_KEYS = {"id", "members", "gpus_per_member", "duration_s", "submit_s"}
OPENB_COLUMNS = {"name", "num_gpu", "creation_time", "deletion_time"}


class TraceError(UserError):
    def __init__(self, source: str, where: str, expected: str):
        super().__init__(f"{source}: {where}: {expected}")


def export_jsonl(jobs: list[Job], path: str | Path, meta: dict | None = None) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({"gangstorm_trace": 1, **(meta or {})}) + "\n")
        for j in jobs:
            f.write(j.to_json() + "\n")


def _job_from_row(row: dict, src: str, lineno: int) -> Job:
    missing = REQUIRED_JOB_KEYS - set(row)
    if missing:
        raise TraceError(src, f"line {lineno}", f"missing field {sorted(missing)[0]!r}")
    numeric = {"id": int, "members": int, "gpus_per_member": int, "duration_s": float, "submit_s": float,
               "min_available": int, "cpus_per_member": int, "priority": int}
    for key, kind in numeric.items():
        if key in row and (isinstance(row[key], bool) or not isinstance(row[key], (int, float))):
            raise TraceError(src, f"line {lineno}: {key}", f"expected a number, got {row[key]!r}")
        if key in row and kind is int and float(row[key]) != int(row[key]):
            raise TraceError(src, f"line {lineno}: {key}", f"expected an integer, got {row[key]!r}")
    for key in ("members", "gpus_per_member"):
        if row[key] < 1:
            raise TraceError(src, f"line {lineno}: {key}", f"expected >= 1, got {row[key]!r}")
    if row["duration_s"] <= 0 or row["submit_s"] < 0:
        key = "duration_s" if row["duration_s"] <= 0 else "submit_s"
        raise TraceError(src, f"line {lineno}: {key}", f"expected a positive time, got {row[key]!r}")
    row = dict(row)
    row.setdefault("tenant", "default")
    row.setdefault("queue", f"q-{row['tenant']}")
    row.setdefault("cls", "large" if row["members"] >= 8 else "small")
    row.setdefault("min_available", row["members"])
    known = {f.name for f in fields(Job)}
    return Job(**{k: v for k, v in row.items() if k in known})


def import_jsonl(path: str | Path) -> tuple[list[Job], dict]:
    src = str(path)
    if not Path(path).is_file():
        raise TraceError(src, "file", "no such trace file")
    jobs, meta = [], {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(src, f"line {lineno}", f"expected a JSON object ({e.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(src, f"line {lineno}", "expected a JSON object")
            if "gangstorm_trace" in row:
                meta = row
                continue
            jobs.append(_job_from_row(row, src, lineno))
    ids = [j.id for j in jobs]
    if len(set(ids)) != len(ids):
        raise TraceError(src, "id", "expected unique job ids")
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    return jobs, meta


def import_openb(path: str | Path, gpus_per_node: int = 8, cpus_per_node: int = 96, tenants: int = 6,
                 seed: int = 1, limit: int | None = None) -> tuple[list[Job], dict]:
    src = str(path)
    if not Path(path).is_file():
        raise TraceError(src, "file", "no such trace file")
    names = tenant_names(tenants, seed)
    rows = []
    skipped = {"cpu_only": 0, "no_deletion_time": 0, "too_many_gpus": 0}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = OPENB_COLUMNS - set(reader.fieldnames or [])
        if missing:
            raise TraceError(src, "header", f"expected openb columns, missing {sorted(missing)[0]!r}")
        for lineno, r in enumerate(reader, 2):
            try:
                gpus = int(r["num_gpu"])
                created = float(r["creation_time"])
                deleted = float(r["deletion_time"]) if r["deletion_time"] else None
            except ValueError:
                raise TraceError(src, f"line {lineno}", "expected numeric num_gpu/creation_time/deletion_time") from None
            if gpus == 0:
                skipped["cpu_only"] += 1
                continue
            if deleted is None or deleted <= created:
                skipped["no_deletion_time"] += 1
                continue
            if gpus > gpus_per_node:
                skipped["too_many_gpus"] += 1
                continue
            rows.append((created, deleted - created, gpus, r["name"]))
    rows.sort()
    if limit is not None:
        rows = rows[:limit]
    t0 = rows[0][0] if rows else 0.0
    cpg = cpus_per_node // gpus_per_node
    jobs = []
    for i, (created, dur, gpus, name) in enumerate(rows):
        tenant = names[i % len(names)]
        jobs.append(Job(id=i, tenant=tenant, queue=f"q-{tenant}", cls=f"openb-{gpus}gpu", members=1,
                        gpus_per_member=gpus, duration_s=dur, submit_s=created - t0, min_available=1,
                        cpus_per_member=gpus * cpg, name=name))
    return jobs, {"source": src, "skipped": skipped}


def load_trace(path: str | Path, **openb_kwargs) -> tuple[list[Job], dict]:
    """JSONL or openb CSV, told apart by suffix."""
    return import_openb(path, **openb_kwargs) if str(path).endswith(".csv") else import_jsonl(path)


def compress(jobs: list[Job], churn: float) -> list[Job]:
    """Apply a churn multiplier to a replayed trace: arrivals c times as fast, durations / c."""
    if churn == 1:
        return jobs
    from dataclasses import replace
    return [replace(j, submit_s=j.submit_s / churn, duration_s=max(j.duration_s / churn, 1.0)) for j in jobs]
