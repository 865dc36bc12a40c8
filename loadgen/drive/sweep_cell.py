"""One cell of a sweep, produced the same way whichever executor runs it.

`produce` is `gangstorm run` on the cell's scenario and scheduler into a folder, then cell.json
(loadgen/output/sweep.py): the folder is a normal run folder. The local executor produces into a
hidden staging folder beside the cell's final one and renames it into place (`run_here`); a Ray
task produces into a temporary folder on its node and returns the folder as a tar archive, which
the driver unpacks beside the final folder and renames into place (`run_archived`, `place`). So a
cell's folder appears whole or not at all, and what is in it does not depend on where it ran.

This module does not import ray: Ray workers import it to run `run_archived`.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import tarfile
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from loadgen.input.sweep import Cell

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("loadgen", "fakes")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of gangstorm's Python sources (loadgen/ and fakes/, with their profiles): a Ray worker
    whose checkout differs from the driver's could give other results, so its cells are refused."""
    h = hashlib.sha256()
    for d in CODE_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.suffix in (".py", ".yaml") and p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def produce(cell: Cell, folder: Path, executor: str) -> dict:
    """The cell's run into `folder` (new or empty), cell.json last; returns cell.json's content."""
    from loadgen.drive.comparative import RunOptions, run
    from loadgen.output.sweep import write_cell_record
    t0 = time.monotonic()
    # results_root: the folder itself, never its parent, so the cell is not added to an index.jsonl
    run(cell.scenario, RunOptions(schedulers=[cell.scheduler], backend="sim", out_dir=folder, report=False,
                                  results_root=folder))
    return write_cell_record(folder, cell.key(), executor, time.monotonic() - t0)


def staging(final: Path) -> Path:
    return final.parent / f".{final.name}.incoming-{os.getpid()}"


def run_here(cell: Cell, final: Path, executor: str = "local") -> dict:
    """Produce the cell beside `final` and rename it into place."""
    stage = staging(final)
    shutil.rmtree(stage, ignore_errors=True)
    try:
        record = produce(cell, stage, executor)
        os.rename(stage, final)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return record


def run_archived(cell: Cell, executor: str) -> dict:
    """A Ray task: the cell produced in a temporary folder on this node, returned as a tar.gz of
    the folder with where it ran and this node's code fingerprint."""
    tmp = Path(tempfile.mkdtemp(prefix="gangstorm-cell-"))
    try:
        t0 = time.monotonic()
        record = produce(cell, tmp / cell.name, f"{executor} node {_ray_node()}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(tmp / cell.name, arcname=cell.name)
        return {"archive": buf.getvalue(), "record": record, "host": socket.gethostname(), "pid": os.getpid(),
                "code": code_fingerprint(), "wall_s": round(time.monotonic() - t0, 3)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ray_node() -> str:
    """The Ray node this task runs on (called only inside a Ray worker, where ray is imported)."""
    import ray
    return ray.get_runtime_context().get_node_id()[:12]


def place(archive: bytes, name: str, final: Path) -> None:
    """Unpack a cell's archive beside `final` and rename it into place (the tar holds one folder,
    `name`; the data filter refuses links, devices and paths outside it)."""
    stage = staging(final)
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(stage, filter="data")
        os.rename(stage / name, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
