"""results/index.jsonl: one line per finished run whose folder sits directly in the results folder
(results/<run-id>, or --out results/<name>), oldest first.

`gangstorm compare latest~1 latest` resolves names through it. A line is appended with a single
O_APPEND write, so concurrent runs never interleave; a line that does not parse (a crash mid-write
on a full disk) is skipped when reading, and so is a line whose `dir` is not one folder name inside
the results folder. Runs written elsewhere (--out /tmp/x, ceiling points,
pytest's tmp dirs) are not indexed. A soak (`gangstorm soak`) adds one line per window, marked
"kind": "soak" with its window number (loadgen/output/soak.py); `latest` never names one.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from loadgen.input import files
from loadgen.output import paths

INDEX = "index.jsonl"
MAX_BYTES = 64 * files.MIB         # a line is about 400 bytes: over 100,000 runs
MAX_DEPTH = 4
LATEST = re.compile(r"^latest(?:~(\d+))?$")


def entry(summary: dict, folder: Path, started: float, clock=time.time) -> dict:
    """The index line of a run: dir is the folder's name, relative to the results folder."""
    scheds = summary.get("schedulers") or {}
    return {"run_id": summary.get("run_id"), "dir": folder.name, "scenario": summary.get("scenario"),
            "seed": summary.get("seed"), "nodes": (summary.get("fleet") or {}).get("nodes"),
            "backend": sorted({r.get("backend") for r in scheds.values() if r.get("backend")}),
            "schedulers": list(scheds), "complete": bool(summary.get("complete")),
            "started": _utc(started), "finished": _utc(clock()),
            "p99_s": {n: (r.get("admission_s") or {}).get("p99") for n, r in scheds.items()},
            **({"seeds": (summary["seeds"] or {}).get("completed")} if isinstance(summary.get("seeds"), dict) else {})}


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def append(root: Path, line: dict) -> None:
    data = (json.dumps(line, sort_keys=True, allow_nan=False) + "\n").encode()
    fd = os.open(Path(root) / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def entries(root: Path) -> list[dict]:
    """The index's lines that name a run folder directly inside `root` (a `dir` that is one folder
    name: an absolute or climbing `dir` could make `latest` read anywhere), oldest first. The file
    is read as any input is (a regular file, at most MAX_BYTES; a BOM an editor added is dropped)."""
    try:
        data = files.read_bytes(Path(root) / INDEX, MAX_BYTES, "results index")
    except files.FileError:
        return []
    out = []
    for line in data.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines():
        try:
            e = files.loads(line, depth=MAX_DEPTH)
        except ValueError:
            continue
        if isinstance(e, dict) and paths.is_component(e.get("dir")):
            out.append(e)
    return out


def runs(root: Path) -> list[dict]:
    """The index's complete runs (not soak windows) whose folder, inside `root`, still holds
    summary.json, oldest first."""
    return [e for e in entries(root) if e.get("complete") is True and e.get("kind", "run") == "run"
            and _holds_summary(Path(root), e["dir"])]


def _holds_summary(root: Path, name: str) -> bool:
    folder = root / name
    try:
        return (folder / "summary.json").is_file() and paths.inside(folder / "summary.json", root)
    except OSError:
        return False


def resolve(name: str, root: Path) -> Path | None:
    """`latest`, `latest~N` (N complete runs before the latest) or a run id, as a folder under root
    that still holds summary.json; None when the index has no such run."""
    complete = runs(root)
    m = LATEST.match(name)
    if m:
        back = int(m.group(1) or 0)
        return Path(root) / complete[-1 - back]["dir"] if back < len(complete) else None
    for e in reversed(complete):
        if name in (e["dir"], e.get("run_id")):
            return Path(root) / e["dir"]
    return None
