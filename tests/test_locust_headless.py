"""Locust headless against a simulated scheduler: result files, and exact p99.9 in Locust's outputs."""
from __future__ import annotations

import json

import pytest

from loadgen.measure.statistics import exact_quantile
from support.locust_process import LOCUSTFILE, free_port, jobs_rows, locust_rows
from support.paths import ROOT

SCENARIO = """
name: locust-headless
seed: 7
duration_h: 2
drain_h: 0.5
warmup_h: 0.1
fleet: {nodes: 600, gpus_per_node: 8}
workload: {churn_multiplier: 3, tenants: 4}
"""


@pytest.mark.slow
def test_headless_run_writes_results_with_exact_tails(tmp_path, run_locust):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    p = run_locust("-f", str(LOCUSTFILE), "--headless", "-u", "4", "-r", "4", "-t", "30s",
                   "--scenario", str(scenario), "--schedulers", "kube", "--time-scale", "300",
                   "--results-dir", str(out), "--csv", str(out / "locust"), "--html", str(out / "locust.html"),
                   "--exit-code-on-error", "0", "--only-summary")
    assert p.wait(timeout=300) == 0, p.output()[-3000:]

    for name in ("summary.json", "summary.md", "jobs.csv", "timeseries.csv", "report.html", "locust_stats.csv",
                 "locust_failures.csv", "locust.html"):
        assert (out / name).is_file(), name

    summary = json.loads((out / "summary.json").read_text())
    # the same top-level shape as `gangstorm run` (comparative.run)
    for key in ("run_id", "scenario", "seed", "complete", "wall_s", "duration_h", "fleet", "workload",
                "chaos", "slo", "schedulers"):
        assert key in summary, key
    assert summary["complete"] is True and summary["driver"] == "locust"
    kube = summary["schedulers"]["kube"]
    for key in ("jobs", "admission_s", "by_class", "alloc_util", "fragmentation", "partial_gang_gpu_hours",
                "control_plane", "slo_met", "generator_lateness_s", "generator_lateness_wall_s"):
        assert key in kube, key
    assert kube["jobs"]["submitted"] > 500, kube["jobs"]

    jobs = jobs_rows(out / "jobs.csv")
    stats = locust_rows(out / "locust_stats.csv")
    html = (out / "locust.html").read_text()
    checked = 0
    for cls, by in kube["by_class"].items():
        lat_ms = [float(r["admission_s"]) * 1000 for r in jobs if r["cls"] == cls and r["admission_s"]]
        if not lat_ms:
            continue
        exact = round(exact_quantile(lat_ms, 0.999), 3)
        row = stats[("ADMIT", f"kube/{cls}")]
        assert float(row["99.9%"]) == pytest.approx(exact, abs=1e-6), (cls, row["99.9%"], exact)
        assert float(row["50%"]) == pytest.approx(round(exact_quantile(lat_ms, 0.5), 3), abs=1e-6)
        # summary.json (seconds) agrees with the same per-job arrays
        assert by["admission_s"]["p999"] == pytest.approx(exact / 1000, abs=1e-6)
        assert by["admission_s"]["count"] == len(lat_ms)
        assert repr(exact) in html or f"{exact}" in html, f"p99.9 {exact} not in the HTML report"
        checked += 1
    assert checked >= 1
    assert kube["generator_lateness_wall_s"]["count"] == kube["jobs"]["submitted"]


@pytest.mark.slow
def test_two_processes_merge_exact_latencies_at_master(tmp_path):
    """`gangstorm locust --processes 2`: tenants split over two workers, one exact summary at the master."""
    import os
    import signal
    import subprocess
    import sys

    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", "locust", str(scenario), "--headless",
                             "-t", "20s", "--processes", "2", "--time-scale", "300", "--master-port", str(port),
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "err.log", "w"), start_new_session=True)
    try:
        assert proc.wait(timeout=120) == 0, (tmp_path / "err.log").read_text()[-3000:]
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
        proc.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["locust"]["workers"] == 2
    kube = summary["schedulers"]["kube"]
    jobs = jobs_rows(out / "jobs.csv")
    assert len({r["tenant"] for r in jobs}) == 4          # both shards' tenants reached the master
    stats = locust_rows(out / "locust_stats.csv")
    for cls in kube["by_class"]:
        lat_ms = [float(r["admission_s"]) * 1000 for r in jobs if r["cls"] == cls and r["admission_s"]]
        if lat_ms:
            assert float(stats[("ADMIT", f"kube/{cls}")]["99.9%"]) == pytest.approx(
                round(exact_quantile(lat_ms, 0.999), 3), abs=1e-6)
            assert int(stats[("ADMIT", f"kube/{cls}")]["Request Count"]) >= len(lat_ms)


def test_plain_locust_bad_argument_is_one_line_exit_2(tmp_path, run_locust):
    p = run_locust("-f", str(LOCUSTFILE), "--headless", "--scenario", str(tmp_path / "missing.yaml"))
    assert p.wait(timeout=300) == 2
    errors = [line for line in p.output().splitlines() if "error" in line.lower()]
    assert errors == [f"gangstorm: error: {tmp_path / 'missing.yaml'}: no such scenario file"], p.output()


def test_a_bad_trace_read_when_the_test_starts_is_one_line_exit_2(tmp_path, run_locust):
    (tmp_path / "t.jsonl").write_text('{"id": 1, "members": 0, "gpus_per_member": 1, "duration_s": 5, '
                                      '"submit_s": 0}\n')
    (tmp_path / "s.yaml").write_text(f"name: bad-trace\nfleet: {{nodes: 10}}\nduration_h: 0.1\n"
                                     f"workload: {{trace: {tmp_path / 't.jsonl'}}}\n")
    p = run_locust("-f", str(LOCUSTFILE), "--headless", "-u", "1", "-r", "1", "--scenario", str(tmp_path / "s.yaml"))
    assert p.wait(timeout=120) == 2, p.output()[-3000:]
    errors = [line for line in p.output().splitlines() if line.startswith("gangstorm: error:")]
    assert errors == [f"gangstorm: error: {tmp_path / 't.jsonl'}: line 1: members: expected >= 1, got 0"], p.output()
