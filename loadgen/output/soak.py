"""A soak's folder and its index lines.

    <out>/soak.json          the soak as it goes: flags, bounds, churn schedule, endpoints, and one
                             row per closed window (the same row results/index.jsonl gets);
                             rewritten atomically after every window, "complete" once it ended by
                             its bound, "ended_by" saying how it ended
    <out>/windows/NNNN/      each window a run folder (summary.json, summary.md, jobs.csv,
                             timeseries.csv: storage.verify holds), NNNN the 1-based window number
    <out>/<scheduler>-real/  the backend's logs (and the soak's Prometheus, with --prometheus)
    <out>/report.html        the windows over time (loadgen/output/html/soak.py)

A window's row: its number, start and end (UTC and seconds into the soak), churn multiplier, and
per scheduler and job class ("all" for every class) admission p50/p99/p99.9 with the count of
admitted jobs, the jobs still waiting when it closed, generator lateness, GPUs held by partial
gangs (mean and max over its samples, fleet-wide), etcd's database size where the backend reports
it, and the alerts firing in the soak's Prometheus when it closed.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loadgen.input import files
from loadgen.output import index
from loadgen.output.storage import OutputError, atomic_write

SOAK_FILE = "soak.json"
WINDOWS = "windows"
MAX_JSON = 64 * files.MIB


def is_soak(folder: str | Path) -> bool:
    return (Path(folder) / SOAK_FILE).is_file()


def window_dir(folder: Path, k: int) -> Path:
    return Path(folder) / WINDOWS / f"{k:04d}"


def read(folder: str | Path) -> dict:
    path = Path(folder) / SOAK_FILE
    try:
        data = files.loads(files.read_bytes(path, MAX_JSON, "soak.json").decode("utf-8", errors="replace"))
    except (files.FileError, ValueError) as e:
        raise OutputError(f"{path}: expected the soak.json `gangstorm soak` writes ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("windows"), list):
        raise OutputError(f"{path}: expected the soak.json `gangstorm soak` writes (an object with windows)")
    return data


def write(folder: Path, soak: dict) -> None:
    atomic_write(Path(folder) / SOAK_FILE, json.dumps(soak, indent=2, allow_nan=False) + "\n")


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _q(stats: dict | None) -> dict:
    s = stats or {}
    return {"p50": s.get("p50"), "p99": s.get("p99"), "p999": s.get("p999"), "count": s.get("count", 0)}


def _series(samples: list, get) -> dict:
    values = [v for v in (get(s) for s in samples) if v is not None]
    if not values:
        return {"mean": None, "max": None}
    return {"mean": round(sum(values) / len(values), 3), "max": max(values)}


def etcd_bytes(snapshot) -> int | None:
    """etcd's database size in a real kube-family snapshot (the target's own scrape of etcd)."""
    etcd = (getattr(snapshot, "control_plane", None) or {}).get("etcd")
    size = etcd.get("db_size_bytes") if isinstance(etcd, dict) else None
    return int(size) if isinstance(size, (int, float)) and size > 0 else None


def window_row(soak: dict, k: int, start_s: float, end_s: float, t0_epoch: float, churn: float,
               results: dict[str, dict], samples: dict[str, list], alerts: list[str] | None,
               prometheus: dict | None = None) -> dict:
    """The row of window k (soak.json's and results/index.jsonl's)."""
    adm, pending, late, partial, etcd = {}, {}, {}, {}, {}
    for name, r in results.items():
        adm[name] = {"all": _q(r.get("admission_s")),
                     **{c: _q(v.get("admission_s")) for c, v in (r.get("by_class") or {}).items()}}
        pending[name] = (r.get("jobs") or {}).get("never_admitted", 0)
        g = r.get("generator_lateness_s") or {}
        late[name] = {"p99": g.get("p99"), "max": g.get("max"), "count": g.get("count", 0)}
        partial[name] = _series(samples.get(name) or [], lambda s: s.gpus_partial)
        sizes = [b for b in (etcd_bytes(s) for s in samples.get(name) or []) if b is not None]
        if sizes:
            etcd[name] = max(sizes)
    row: dict[str, Any] = {
        "kind": "soak", "run_id": soak["soak_id"], "dir": soak["dir"], "window": k,
        "scenario": soak["scenario"], "nodes": soak["nodes"], "backend": [soak["backend"]],
        "schedulers": list(results), "churn_multiplier": churn,
        "start": _utc(t0_epoch + start_s), "end": _utc(t0_epoch + end_s),
        "start_s": round(start_s, 3), "end_s": round(end_s, 3),
        "complete": not any(r.get("partial") for r in results.values()),
        "jobs": {n: (r.get("jobs") or {}).get("submitted", 0) for n, r in results.items()},
        "admission_s": adm, "pending_at_close": pending, "generator_lateness_s": late,
        "partial_gang_gpus": partial, "p99_s": {n: a["all"]["p99"] for n, a in adm.items()},
    }
    if etcd:
        row["etcd_db_bytes"] = etcd
    if alerts is not None:
        row["alerts_firing"] = sorted(set(alerts))
    if prometheus:
        row["prometheus"] = prometheus
    return row


def append_index(root: Path, row: dict) -> None:
    """results/index.jsonl gets the window (a soak in another folder is not indexed). The window's
    folder is on disk already: an index that cannot be written is a warning."""
    import sys
    try:
        index.append(root, row)
    except (OSError, ValueError) as e:
        print(f"gangstorm: warning: {root}/{index.INDEX} not updated ({e})", file=sys.stderr)
