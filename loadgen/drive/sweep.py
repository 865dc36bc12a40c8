"""`gangstorm sweep SPEC`: every cell of a grid (loadgen/input/sweep.py) as its own run folder, run
side by side, with an index and a summary over the grid (loadgen/output/sweep.py).

Executors: on local cores (the default), each cell in a forked child, at most `jobs` at once, by
drive/seeds.each_seed (the machinery of `gangstorm run --seeds`); or on a Ray cluster, each cell a
Ray task (drive/sweep_ray.py), driven from a separate process that is the only one importing ray.
Either way a cell is produced by drive/sweep_cell.produce, so its results do not depend on where
it ran (the index and cell.json record a digest of them).

Resuming: the sweep folder is created whole with sweep.json (the grid, every cell's fingerprint).
Run again with the same --out, the same grid resumes: each cell whose folder checks out is kept as
it is (output.sweep.cell_problems), a cell folder that does not is removed, and every other cell
runs. A different grid in that folder is refused. Interrupted (SIGINT, SIGTERM), the running
cells are stopped, marked interrupted in the index, and summary.json says "complete": false.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadgen.drive.seeds import FORK, Outcome, each_seed
from loadgen.drive.sweep_cell import run_here
from loadgen.input.sweep import BACKEND, Cell, Sweep
from loadgen.output.sweep import SweepStore, summarize, utc, write_summary

Event = Callable[..., None]


@dataclass
class Local:
    """Cells on this machine's cores, each in a forked child, at most `jobs` at once."""
    jobs: int

    kind = "local"

    def detail(self) -> str:
        return f"--jobs {self.jobs}"

    def label(self) -> str:
        return "local"

    def check(self) -> None:
        """Nothing to reach before the folder is written."""

    def run(self, cells: list[Cell], store: SweepStore, on_event: Event) -> None:
        by_index = {c.index: c for c in cells}

        def work(index: int, progress) -> None:
            c = by_index[index]
            run_here(c, store.cells_dir / c.name, self.label())

        each_seed(list(by_index), work, max(1, min(self.jobs, len(cells))), on_event, in_process=not FORK,
                  noun="cell")


def default_jobs() -> int:
    return os.cpu_count() or 1


def run_sweep(sweep: Sweep, out: str | Path, executor, progress: Event | None = None) -> dict:
    """Run (or resume) the sweep into `out`; returns its summary.json content with "_dir"."""
    t0, started = time.monotonic(), time.time()
    executor.check()                    # an executor that cannot run is refused before anything is written
    keys = [c.key() for c in sweep.cells]
    doc = {"sweep": sweep.name, "description": sweep.description, "spec": sweep.path, "created": utc(started),
           "backend": BACKEND, "axes": sweep.axes, "set": sweep.set, "cells": sweep.identity()["cells"]}
    store, resumed = SweepStore.open(out, doc, keys)
    store.clear_leftovers()
    kept, todo = store.settle(sweep.cells)
    store.write_index()
    head = {"sweep": sweep.name, "description": sweep.description, "spec": sweep.path, "backend": BACKEND,
            "started": utc(started), "axes": sweep.axes, "set": sweep.set,
            "executor": {"kind": executor.kind, "detail": executor.detail()},
            "resumed": {"skipped": len(kept), "ran": len(todo)} if resumed else None}
    if progress:
        progress("plan", None, len(sweep.cells), len(kept), len(todo), store.dir, resumed)

    def event(kind: str, index: int, *detail) -> None:
        if kind == "start":
            store.mark(index, "running")
        elif kind == "done":
            name = store.entries[index]["dir"].split("/", 1)[1]
            record = store.record_of(name)
            store.mark(index, "done", wall_s=record.get("wall_s"), executor=record.get("executor"),
                       digest=record.get("digest"))
        elif kind == "stopped":
            outcome: Outcome = detail[0]
            if outcome.status == "interrupted":
                store.mark(index, "interrupted")
            else:
                store.mark(index, "failed", error=(outcome.message.strip().splitlines() or [outcome.status])[-1][:500])
        else:
            if progress:
                progress(kind, index, *detail)
            return
        store.write_index()
        if progress:
            progress(kind, index, *detail)

    summary: dict = {}
    try:
        executor.run(todo, store, event)
    finally:
        for e in store.entries.values():
            if e["status"] == "running":
                e["status"] = "interrupted"
        store.write_index()
        summary = summarize(store, head)
        summary["wall_s"] = round(time.monotonic() - t0, 3)
        write_summary(store, summary)
    _report(store.dir)
    summary["_dir"] = str(store.dir)
    return summary


def _report(folder: Path) -> None:
    """report.html of the sweep; its results are on disk already, so a page that fails is a warning."""
    from loadgen.output.html.sweep import build
    try:
        build(folder)
    except Exception as e:          # noqa: BLE001
        print(f"gangstorm: warning: report.html not written ({type(e).__name__}: {e}); "
              f"retry with `gangstorm report {folder}`", file=sys.stderr)
