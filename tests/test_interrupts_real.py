"""A real scheduler's run stopped by SIGTERM keeps the rows it recorded, marked partial, in a folder
`verify` accepts (issue 31: a real kube run stopped after 590 s used to keep no row at all)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from loadgen.output.storage import verify
from support.paths import ROOT
from support.slurm import pids_of

pytestmark = pytest.mark.real

# 8 nodes, an hour of arrivals at 60 virtual s per wall s: about a minute of submissions, far more
# than the test waits for before it signals.
SCENARIO = """\
name: partial-real
seed: 11
duration_h: 1.0
drain_h: 0.2
warmup_h: 0
sample_every_s: 60
fleet: {nodes: 8, leaf_size: 4}
schedulers:
  slurm: {sched_interval_s: 5, bf_interval_s: 1, sched_min_interval_s: 0.5, bf_resolution_s: 5, cred_expire_s: 5}
workload:
  churn_multiplier: 3
  tenants: 2
  classes:
    small:
      share: 1
      shapes: [{members: 1, gpus: 1, weight: 0.6}, {members: 2, gpus: 8, weight: 0.4}]
      duration_s: {median: 300, sigma: 0.5, max: 900}
"""
ADMITTED_BEFORE_SIGNAL = 5


def admitted(url: str) -> int:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return int(sum(float(v) for v in re.findall(r'^gangstorm_admission_seconds_count\{[^}]*\} (\S+)$', text, re.M)))


def test_a_sigterm_during_a_real_slurm_run_keeps_its_rows_marked_partial(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", "run", str(scenario), "--backend", "real",
                          "--schedulers", "slurm", "--time-scale", "60", "--metrics-port", "0", "--out", str(out),
                          "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        url, seen, deadline = None, 0, time.monotonic() + 600          # Slurm's start-up on a busy machine
        while time.monotonic() < deadline and p.poll() is None and seen < ADMITTED_BEFORE_SIGNAL:
            url = url or next((m.group(1) for line in list(lines)
                               if (m := re.search(r"metrics on (http://\S+/metrics)", line))), None)
            if url:
                try:
                    seen = admitted(url)
                except OSError:
                    pass
            time.sleep(0.5)
        assert p.poll() is None and seen >= ADMITTED_BEFORE_SIGNAL, (seen, "".join(lines))
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=300)
        reader.join(timeout=10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    err = "".join(lines)
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == (f"gangstorm: interrupted; partial results kept in {out} "
                                           "(summary.json has \"complete\": false)"), err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["running"] == "slurm"
    slurm = summary["schedulers"]["slurm"]
    part = slurm["partial"]
    assert part["reason"] == "interrupted" and part["jobs_sent"] < part["jobs_planned"]
    assert slurm["jobs"]["submitted"] == part["jobs_sent"] and slurm["jobs"]["admitted"] >= ADMITTED_BEFORE_SIGNAL
    assert verify(out) == []
    rows = [r.split(",") for r in (out / "jobs.csv").read_text().splitlines()[1:]]
    assert len(rows) == part["jobs_sent"] == summary["files"]["jobs.csv"]["slurm"]
    assert sum(1 for r in rows if r[9] != "") == slurm["jobs"]["admitted"]      # admitted_s filled
    assert summary["files"]["timeseries.csv"]["slurm"] >= 1
    assert "slurm (partial)" in (out / "summary.md").read_text()
    # everything the run started is gone
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pids_of(out):
        time.sleep(0.5)
    assert pids_of(out) == [], "slurm daemons left behind"
