"""A sweep's folder: one run folder per cell, an index of the cells with their status, and the
summary over the grid.

    <out>/sweep.json       the grid as validated: the spec, its axes, every cell's key and
                           fingerprint (a rerun with the same --out resumes only the same grid)
    <out>/index.jsonl      one line per cell, in grid order: its key, status (pending, running,
                           done, failed, interrupted), wall_s, executor, digest; rewritten whole
                           (atomically) at each change
    <out>/cells/<name>/    the cell's run folder (summary.json, summary.md, jobs.csv, timeseries.csv)
                           plus cell.json (its key, fingerprint and digest), written last
    <out>/summary.json     per group (scenario, profile, nodes, churn, scheduler) over its seeds:
                           each headline figure's median, interval and per-seed values
    <out>/summary.md, report.html

A cell counts as complete only when its folder checks out (`cell_problems` is empty): cell.json
names the cell's fingerprint, summary.json says complete, storage.verify finds the CSVs agree with
it, and the digest of the results equals the one recorded. A cell's digest covers summary.json
without what differs from one run to the next (run_id, wall times) and both CSVs byte for byte, so
two executors that ran a cell agree exactly when their digests do.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path

from loadgen.input import files
from loadgen.measure import spread
from loadgen.model.numbers import fixed
from loadgen.output.aggregate import ADMISSION, ALL, RESOURCE
from loadgen.output.storage import CREATED, OutputError, atomic_write, check_out_dir, verify

SWEEP_FILE = "sweep.json"
INDEX = "index.jsonl"
CELLS = "cells"
CELL_FILE = "cell.json"
VOLATILE = ("run_id", "wall_s", "_dir")
FIGURES = ADMISSION + RESOURCE
STATUSES = ("pending", "running", "done", "failed", "interrupted")
MAX_JSON = 256 * files.MIB


# --- one cell's folder --------------------------------------------------------------------------
def stable(summary: dict) -> dict:
    """A run's summary without what differs between two runs of the same inputs."""
    out = {k: v for k, v in summary.items() if k not in VOLATILE}
    out["schedulers"] = {n: {k: v for k, v in (r or {}).items() if k != "wall_s"}
                         for n, r in (summary.get("schedulers") or {}).items()}
    return out


def digest(folder: Path) -> str:
    """sha256 of the cell's results: its stable summary, jobs.csv and timeseries.csv."""
    h = hashlib.sha256()
    summary = _json(folder / "summary.json")
    h.update(json.dumps(stable(summary), sort_keys=True).encode())
    for name in ("jobs.csv", "timeseries.csv"):
        h.update(f"\0{name}\0".encode())
        h.update((folder / name).read_bytes())
    return h.hexdigest()


def write_cell_record(folder: Path, key: dict, executor: str, wall_s: float) -> dict:
    """cell.json, the last file of a cell's folder: what makes it a finished cell."""
    record = {**key, "digest": digest(folder), "executor": executor, "wall_s": round(wall_s, 3)}
    atomic_write(folder / CELL_FILE, json.dumps(record, indent=2) + "\n")
    return record


def cell_problems(folder: Path, fingerprint: str) -> list[str]:
    """Why the folder is not this cell's complete result (empty: it is)."""
    if not folder.is_dir():
        return ["no folder"]
    try:
        record = _json(folder / CELL_FILE)
        summary = _json(folder / "summary.json")
    except (OSError, ValueError, files.FileError) as e:
        return [f"unreadable ({e})"]
    if record.get("fingerprint") != fingerprint:
        return [f"{CELL_FILE} is another cell's (fingerprint {record.get('fingerprint')!r})"]
    if summary.get("complete") is not True:
        return ["summary.json is not complete"]
    problems = verify(folder)
    if problems:
        return problems
    try:
        if digest(folder) != record.get("digest"):
            return ["its results differ from the digest cell.json recorded"]
    except OSError as e:
        return [f"unreadable ({e})"]
    return []


def _json(path: Path) -> dict:
    data = json.loads(files.read_bytes(path, MAX_JSON, "JSON file"))
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: expected a JSON object")
    return data


# --- the sweep's folder -------------------------------------------------------------------------
class SweepStore:
    """The sweep folder: created whole (sweep.json, an index of pending cells, cells/), or opened
    again to resume the same grid."""

    def __init__(self, out: Path, doc: dict):
        self.dir, self.doc = Path(out), doc
        self.entries: dict[int, dict] = {}

    @property
    def cells_dir(self) -> Path:
        return self.dir / CELLS

    @classmethod
    def open(cls, out: str | Path, doc: dict, keys: list[dict], flag: str = "--out") -> tuple[SweepStore, bool]:
        """(the store, whether it resumes a sweep that was there). `doc` is sweep.json's content;
        a folder holding another grid's sweep.json, or anything else, is refused."""
        out = Path(out)
        old = out / SWEEP_FILE
        if old.is_file():
            try:
                there = _json(old)
            except (OSError, ValueError, files.FileError) as e:
                raise OutputError(f"{flag} {out}: {SWEEP_FILE} is not readable ({e}); choose another {flag}") from None
            differs = _difference(there.get("cells") or [], doc["cells"])
            if differs:
                raise OutputError(f"{flag} {out}: holds another sweep ({differs}); rerun its own spec to resume it, "
                                  f"or choose another {flag}")
            store = cls(out, there)
            store.entries = {k["cell"]: {**k, "status": "pending"} for k in keys}
            CREATED.append(out)
            return store, True
        check_out_dir(out, flag)
        store = cls(out, doc)
        stage = out.parent / f".{out.name}.partial-{os.getpid()}"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(stage, ignore_errors=True)
            (stage / CELLS).mkdir(parents=True)
            store.entries = {k["cell"]: {**k, "status": "pending"} for k in keys}
            atomic_write(stage / SWEEP_FILE, json.dumps(doc, indent=2) + "\n")
            atomic_write(stage / INDEX, store._index_text())
            os.rename(stage, out)
        except OSError as e:
            shutil.rmtree(stage, ignore_errors=True)
            raise OutputError(f"{flag} {out}: cannot create the sweep folder ({e.strerror})") from None
        CREATED.append(out)
        return store, False

    def clear_leftovers(self) -> list[str]:
        """Staging folders of cells that never finished (a killed sweep): removed."""
        gone = []
        for p in self.cells_dir.iterdir() if self.cells_dir.is_dir() else ():
            if p.name.startswith("."):
                shutil.rmtree(p, ignore_errors=True)
                gone.append(p.name)
        return gone

    def settle(self, cells) -> tuple[list, list]:
        """(cells already complete, cells to run); the folder of a cell that is not complete is
        removed, so it reruns from nothing."""
        self.cells_dir.mkdir(exist_ok=True)
        done, todo = [], []
        for c in cells:
            folder = self.cells_dir / c.name
            if not cell_problems(folder, c.fingerprint):
                record = _json(folder / CELL_FILE)
                self.entries[c.index].update(status="done", wall_s=record.get("wall_s"),
                                             executor=record.get("executor"), digest=record.get("digest"))
                done.append(c)
                continue
            if folder.exists():
                shutil.rmtree(folder)
            todo.append(c)
        return done, todo

    def mark(self, index: int, status: str, **detail) -> None:
        assert status in STATUSES, status
        e = self.entries[index]
        e["status"] = status
        for k in ("error",):
            e.pop(k, None)
        e.update({k: v for k, v in detail.items() if v is not None})

    def record_of(self, name: str) -> dict:
        return _json(self.cells_dir / name / CELL_FILE)

    def write_index(self) -> None:
        atomic_write(self.dir / INDEX, self._index_text())

    def _index_text(self) -> str:
        return "".join(json.dumps(self.entries[i], sort_keys=True) + "\n" for i in sorted(self.entries))


def _difference(a: list, b: list) -> str:
    if len(a) != len(b):
        return f"{len(a)} cells there, {len(b)} in this spec"
    for (na, fa), (nb, fb) in zip(a, b):
        if na != nb:
            return f"cell {na} there, {nb} in this spec"
        if fa != fb:
            return f"cell {na}'s scenario or profile changed since"
    return ""


def read_index(out: str | Path) -> list[dict]:
    """index.jsonl's lines (for tests and tools)."""
    text = files.read_bytes(Path(out) / INDEX, MAX_JSON, "sweep index").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --- the summary --------------------------------------------------------------------------------
GROUP = ("scenario", "profile", "nodes", "churn", "scheduler")


def summarize(store: SweepStore, head: dict) -> dict:
    """summary.json of the sweep, from the index and the done cells' own summary.json files."""
    entries = [store.entries[i] for i in sorted(store.entries)]
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in STATUSES}
    groups: dict[tuple, dict] = {}
    for e in entries:
        g = groups.setdefault(tuple(e[k] for k in GROUP), {**{k: e[k] for k in GROUP}, "seeds": [], "cells": [],
                                                            "planned": 0, "slo_met": 0, "_results": []})
        g["planned"] += 1
        if e["status"] != "done":
            continue
        summary = _json(store.dir / e["dir"] / "summary.json")
        result = (summary.get("schedulers") or {}).get(e["scheduler"]) or {}
        g["seeds"].append(e["seed"])
        g["cells"].append(e["dir"])
        g["slo_met"] += bool(result.get("slo_met"))
        g["slo"] = summary.get("slo")
        g["_results"].append(result)
    out_groups = []
    for g in groups.values():
        results = g.pop("_results")
        g["figures"] = {f.name: _figure(f, results) for f in FIGURES}
        out_groups.append(g)
    return {**head, "complete": counts["done"] == len(entries), "cells": {"planned": len(entries), **counts},
            "spread": {"method": "median over the seeds of a group with its order-statistic interval "
                                 "(loadgen.measure.spread); below 6 seeds the interval is the range",
                       "confidence": spread.CONFIDENCE},
            "groups": out_groups}


def _figure(f, results: list[dict]) -> dict | None:
    values = [f.get(r, ALL) for r in results]
    finite = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    iv = spread.median_interval(finite)
    if iv is None:
        return None
    return {**{k: (round(v, 6) if isinstance(v, float) else v) for k, v in iv.as_dict().items()},
            "values": [None if v is None else round(float(v), 6) for v in values]}


def write_summary(store: SweepStore, summary: dict) -> None:
    atomic_write(store.dir / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    atomic_write(store.dir / "summary.md", render(summary))


MD_FIGURES = (("admission_p50", "p50 s", 2), ("admission_p99", "p99 s", 1), ("admission_p999", "p99.9 s", 1),
              ("alloc_util", "alloc util", 3), ("partial_gang_gpu_hours", "partial-gang GPU-h", 1))


def render(summary: dict) -> str:
    """summary.md: one table per scenario, profile and fleet size; a row per scheduler and churn,
    each figure as median [low, high] over the seeds."""
    c = summary["cells"]
    ex = summary.get("executor") or {}
    lines = [f"# Sweep {_md(summary['sweep'])}", "",
             f"Spec `{summary.get('spec')}`: {c['planned']} cells, {c['done']} done"
             + "".join(f", {c[s]} {s}" for s in ("failed", "interrupted", "running", "pending") if c.get(s))
             + f"; executor {ex.get('kind')}" + (f" ({ex['detail']})" if ex.get("detail") else "")
             + f"; this invocation {fixed(summary.get('wall_s'), 1)} s wall"
             + (f", {summary['resumed']['skipped']} cells complete from before"
                if summary.get("resumed") else "") + ".",
             "", "Each figure: median [low, high] over the group's seeds (the range below 6 seeds).", ""]
    tables: dict[tuple, list[dict]] = {}
    for g in summary["groups"]:
        tables.setdefault((g["scenario"], g["profile"], g["nodes"]), []).append(g)
    for (scenario, profile, nodes), groups in tables.items():
        lines += [f"## {_md(scenario)}, profile {_md(profile)}, {nodes:,} nodes", "",
                  "| scheduler | churn x | seeds | " + " | ".join(label for _, label, _ in MD_FIGURES) + " | SLO met |",
                  "|---|---:|---:|" + "---:|" * len(MD_FIGURES) + "---:|"]
        for g in sorted(groups, key=lambda g: (g["scheduler"], g["churn"])):
            cells = [_iv(g["figures"].get(name), digits) for name, _, digits in MD_FIGURES]
            lines.append(f"| {_md(g['scheduler'])} | {g['churn']:g} | {len(g['seeds'])}/{g['planned']} | "
                         + " | ".join(cells) + f" | {g['slo_met']}/{len(g['seeds'])} |")
        lines.append("")
    lines.append("Each cell's run folder: `cells/<name>/` (index.jsonl maps cells to folders); "
                 "`gangstorm report cells/<name>` draws one.")
    return "\n".join(lines) + "\n"


def _iv(entry: dict | None, digits: int) -> str:
    if not entry or entry.get("median") is None:
        return "n/a"
    if entry["n"] == 1:
        return fixed(entry["median"], digits)
    return f"{fixed(entry['median'], digits)} [{fixed(entry['low'], digits)}, {fixed(entry['high'], digits)}]"


def _md(name) -> str:
    return str(name).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def utc(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))
