"""A full disk mid-run is one line and exit 2, and leaves a folder `verify` accepts with no staged or
temporary file behind: on a real 40 KiB tmpfs when this machine lets the test mount one, and by an
ENOSPC raised at the write of the second scheduler's rows everywhere."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from loadgen.output.storage import verify
from support.fuzzkit import run_cli
from support.paths import ROOT

SCENARIO = (b"name: t\nduration_h: 2\ndrain_h: 0.05\nwarmup_h: 0\nfleet: {nodes: 16}\n"
            b"workload: {classes: {small: {share: 1, shapes: [{members: 2, gpus: 8}], duration_s: {median: 300}}}}\n")


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".staged", ".tmp", ".partial"))
                  or ".partial-" in p.name)


@pytest.fixture
def tiny_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the injected ENOSPC below runs everywhere)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_tmpfs_mid_run_is_one_line_and_a_consistent_folder(tmp_path, tiny_disk):
    (tmp_path / "s.yaml").write_bytes(SCENARIO)
    out = tiny_disk / "run"
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", str(tmp_path / "s.yaml"), "--schedulers",
                        "slurm,kube", "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == (f"gangstorm: error: {out}: the rows of slurm cannot be written (No space left on device); the "
                         f"folder keeps what was committed before; partial results kept in {out}"), r.stderr
    assert "Traceback" not in r.stderr and verify(out) == [] and leftovers(tiny_disk) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["running"] == "slurm" and summary["schedulers"] == {}


def test_enospc_at_the_second_schedulers_rows_keeps_the_first(monkeypatch):
    from loadgen.output import storage
    stage = storage.RunStore._stage_series
    calls = []

    def full_disk(self, rows):
        calls.append(rows[0][0])
        path, counts = stage(self, rows)                 # the staged file is written, then the disk is full
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return path, counts
    monkeypatch.setattr(storage.RunStore, "_stage_series", full_disk)

    def look(sandbox):
        out = sandbox / "out"
        return verify(out), leftovers(sandbox), json.loads((out / "summary.json").read_text())
    o = run_cli(["run", "{dir}/s.yaml", "--schedulers", "slurm,kube", "--out", "{dir}/out", "--quiet"],
                {"s.yaml": SCENARIO}, keep=look)
    assert o.code == 2
    assert o.stderr.strip().splitlines()[-1] == (
        f"gangstorm: error: {o.out}: the rows of kube cannot be written (No space left on device); the folder keeps "
        f"what was committed before; partial results kept in {o.out}")
    problems, left, summary = o.kept
    assert problems == [] and left == []
    assert list(summary["schedulers"]) == ["slurm"] and summary["running"] == "kube"
    assert summary["files"]["jobs.csv"] == {"slurm": summary["schedulers"]["slurm"]["jobs"]["submitted"]}


def test_enospc_while_writing_a_report_leaves_no_temporary_file(monkeypatch):
    from loadgen.output import storage
    real = storage.Path.write_text

    def full_disk(self, text, *a, **kw):
        if self.name.endswith(".html.tmp"):
            real(self, text[: len(text) // 2], *a, **kw)
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, text, *a, **kw)

    summary = json.dumps({"run_id": "r", "schedulers": {}}).encode()
    monkeypatch.setattr(storage.Path, "write_text", full_disk)
    o = run_cli(["report", "{dir}/d"], {"d/summary.json": summary}, keep=leftovers)
    assert o.code == 2
    assert o.stderr.strip() == (f"gangstorm: error: {o.out.parent}/d/report.html: cannot be written (No space left on "
                                "device); the file is as it was before")
    assert o.kept == []
