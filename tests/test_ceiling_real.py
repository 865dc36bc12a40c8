"""`gangstorm ceiling --backend real`: the search on the four real schedulers at CI scale.

Every point starts the real control plane on 8 fake nodes (kube-apiserver + etcd +
kube-scheduler + KWOK; Volcano on the same; slurmctld + slurmd; Ray's GCS + raylets) and stops it
again. Two points per scheduler keep this to a few minutes; the full search on 32 nodes is
`make ceiling-real` (docs/ceilings.md). Needs `make k8s-bins volcano-bins
slurm-deps ray-deps`: a missing component fails the run with the command that installs it.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.measure import saturation
from support.paths import ROOT

SCENARIO = """\
name: ceiling-real-ci
seed: 3
fleet: {nodes: 8}
workload:
  target_allocation: 0.4
  churn_multiplier: 20
  classes:
    small:
      share: 0.9
      shapes: [{members: 1, gpus: 1, weight: 0.7}, {members: 1, gpus: 8, weight: 0.3}]
      duration_s: {median: 20, sigma: 0.5, max: 100}
    large:
      share: 0.1
      shapes: [{members: 2, gpus: 8, weight: 1}]
      duration_s: {median: 20, sigma: 0.5, max: 100}
slo: {admission_p99_s: 2}
ceiling: {jobs: 30, max_points: 2, precision: 0.5}
"""

# the serial component each real backend reports from its own metrics, next to the machine's cores
OWN_COMPONENT = {"kube": {"scheduling-cycle", "client-qps-limiter"}, "volcano": {"volcano-session"},
                 "ray": {"gcs-placement-groups"}, "slurm": {"slurmctld-locks"}}


def processes_under(path: Path) -> list[str]:
    left = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{d}/stat").read_text().rsplit(") ", 1)[1][0]
        except OSError:
            continue
        if str(path) in cmd and state != "Z":
            left.append(f"{d} {cmd[:160]}")
    return left


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.bench      # about 3.5 min: make bench-tests (and make ceiling-real) run it; CI stays within its hour
def test_real_search_runs_every_point_on_the_real_schedulers_and_reports_their_load(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = tmp_path / "ceiling"
    p = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "ceiling", "s.yaml", "--backend", "real",
                        "--schedulers", "kube,volcano,ray,slurm", "--out", str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=1500,
                       env={**os.environ, "GANGSTORM_ROOT": str(ROOT)})
    try:
        assert p.returncode == 0, p.stderr[-3000:]
        res = json.loads((out / "ceiling.json").read_text())
        assert res["complete"] is True and res["backend"] == "real" and list(res["ceiling"]) == list(OWN_COMPONENT)
        for name, own in OWN_COMPONENT.items():
            c, pts = res["ceiling"][name], res["points"][name]
            assert c["points_run"] == len(pts) == 2, (name, c)
            for pt in pts:
                summary = json.loads((Path(pt["run_dir"]) / "summary.json").read_text())
                r = summary["schedulers"][name]
                assert r["backend"] == "real" and r["time_scale"] == 1.0
                # every job of the point was offered and counted, from the real scheduler's own events
                assert pt["jobs"] == summary["workload"]["jobs"] and pt["count"] + pt["never_admitted"] == pt["jobs"]
                assert own <= set(pt["load"]) and "host-cpu" in pt["load"], (name, pt["load"])
                assert all(math.isfinite(v) and v >= 0 for v in pt["load"].values())
                assert 0 < r["control_plane"]["host_cpu"]["busy_share"] <= 1
                assert pt["met"] == (pt["slo_met"] and pt["sustained"])
            # the verdict is one of the search's outcomes, and a break names a known component (or none)
            assert c["cap"] == "max_points" or (c["ceiling_churn_multiplier"] and c["broke_at_churn_multiplier"])
            if c["broke_at_churn_multiplier"] is not None:
                assert c["saturated"] is None or c["saturated"] in saturation.COMPONENTS
                assert c["evidence"]["load"] == next(pt["load"] for pt in pts
                                                     if pt["churn_multiplier"] == c["broke_at_churn_multiplier"])
            assert f"{name:<10}" in p.stdout
        assert (out / "report.html").is_file()
    finally:
        assert processes_under(tmp_path) == [], "processes of the real backends left behind"
