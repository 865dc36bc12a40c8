"""gangstorm compare: metric directions, tolerance and noise floors, the exit status CI relies on,
the results index, and the pytest plugin's baseline assertion."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loadgen.output import index
from loadgen.output.compare import SCHEDULER_METRICS, compare, render, verdict
from support.paths import ROOT

P99 = next(m for m in SCHEDULER_METRICS if m.name == "admission_p99")
UTIL = next(m for m in SCHEDULER_METRICS if m.name == "alloc_util")


def gangstorm(*args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "GANGSTORM_ROOT": str(ROOT)})


def summary(p99=2.0, util=0.8, schedulers=("kube",), seed=1, count=100, busy=10.0, finished=95, complete=True):
    sch = {"backend": "sim", "admission_s": {"p50": 0.1, "p99": p99, "p999": p99 * 1.5, "count": count},
           "jobs": {"submitted": 100, "never_admitted": 0, "failed": 0, "finished": finished}, "alloc_util": util,
           "by_class": {"small": {"jobs": 90, "never_admitted": 0, "admission_s": {"p99": p99, "count": 90}}},
           "control_plane": {"busy_s": {"scheduling-cycle": busy}}}
    return {"scenario": "s", "seed": seed, "complete": complete, "schedulers": {n: dict(sch) for n in schedulers}}


def test_lower_is_better_metrics_regress_upward_beyond_tolerance_and_floor():
    assert verdict(P99, 2.0, 2.2, 0.10) == "worse"           # +10%: worse, but at the tolerance
    assert verdict(P99, 2.0, 2.21, 0.10) == "regression"     # +10.5%
    assert verdict(P99, 2.0, 2.05, 0.10) == "same"           # +0.05 s: the noise floor
    assert verdict(P99, 2.0, 1.7, 0.10) == "better"
    assert verdict(P99, 0.01, 0.05, 0.10) == "same"          # +400%, but within the 0.05 s noise floor
    assert verdict(P99, 0.01, 0.07, 0.10) == "regression"


def test_higher_is_better_metrics_regress_downward():
    assert verdict(UTIL, 0.80, 0.70, 0.10) == "regression"
    assert verdict(UTIL, 0.80, 0.75, 0.10) == "worse"         # -6.25%
    assert verdict(UTIL, 0.80, 0.90, 0.10) == "better"
    assert verdict(UTIL, 0.80, 0.797, 0.0) == "same"          # inside the 0.005 floor even at zero tolerance


def test_rows_carry_a_b_delta_and_percent_and_throughput_and_control_plane_are_compared():
    c = compare(summary(p99=2.0, busy=10.0, finished=95), summary(p99=2.5, busy=20.0, finished=80))
    by = {(r.cls, r.metric): r for r in c.rows}
    p99 = by[("all", "admission_p99")]
    assert (p99.a, p99.b, p99.delta, p99.delta_pct, p99.verdict) == (2.0, 2.5, 0.5, 25.0, "regression")
    assert (p99.count_a, p99.count_b) == (100, 100)
    finished = by[("all", "finished_share")]
    assert (finished.a, finished.b, finished.verdict) == (0.95, 0.80, "regression")   # higher is better
    busy = by[("all", "control_plane_busy_s.scheduling-cycle")]
    assert (busy.a, busy.b, busy.delta_pct, busy.verdict) == (10.0, 20.0, 100.0, "regression")
    assert by[("all", "alloc_util")].verdict == "same" and ("all", "readmission_p99") not in by  # neither has it
    assert [r.metric for r in compare(summary(busy=10.0), summary(busy=10.9)).rows if r.verdict != "same"] == []


def test_a_partial_run_is_compared_and_said_to_be_partial():
    c = compare(summary(), summary(complete=False))
    assert c.notes == ['run B is partial ("complete": false): compared as far as it got'] and c.regressions == []
    assert render(c).splitlines()[0] == 'note: run B is partial ("complete": false): compared as far as it got'


def test_a_metric_or_scheduler_that_disappears_is_a_regression():
    assert verdict(P99, 2.0, None, 0.1) == "missing" and verdict(P99, None, 2.0, 0.1) == "new"
    c = compare(summary(schedulers=("kube", "slurm")), summary(schedulers=("kube",)))
    assert [(r.scheduler, r.metric, r.verdict) for r in c.regressions] == [("slurm", "scheduler", "missing")]
    assert render(c).endswith("1 regression beyond tolerance")


def test_identical_runs_have_no_rows_changed_and_differences_in_setup_are_noted():
    c = compare(summary(), summary())
    assert c.regressions == [] and c.notes == [] and all(r.verdict == "same" for r in c.rows)
    assert render(c).splitlines()[-2:] == [f"all {len(c.rows)} metrics unchanged (within their noise floors)",
                                           "no regressions"]
    c = compare(summary(count=100), summary(seed=2, count=90))
    assert c.notes == ["the runs differ in seed: 1 (A) vs 2 (B)",
                       "kube: admission sample counts differ: 100 (A) vs 90 (B)"]


def test_per_metric_tolerance_overrides_the_default():
    a, b = summary(p99=2.0), summary(p99=2.3)                 # +15%
    assert {(r.cls, r.metric) for r in compare(a, b, 0.10).regressions} == {
        ("all", "admission_p99"), ("all", "admission_p999"), ("small", "admission_p99")}
    c = compare(a, b, 0.10, {"admission_p99": 0.2, "admission_p999": 0.2})
    assert c.regressions == [] and {r.verdict for r in c.rows if r.verdict != "same"} == {"worse"}
    assert render(c).splitlines()[-1] == "no regressions"


def test_a_class_that_disappears_is_missing_and_a_new_one_is_new():
    a, b = summary(), summary()
    b["schedulers"]["kube"] = {**b["schedulers"]["kube"], "by_class": {"large": {"jobs": 10, "never_admitted": 0,
                                                                              "admission_s": {"p99": 4.0}}}}
    changed = [(r.cls, r.metric, r.verdict) for r in compare(a, b).rows if r.cls != "all"]
    assert changed == [("small", "admission_p99", "missing"), ("small", "never_admitted_share", "missing"),
                       ("large", "admission_p99", "new"), ("large", "never_admitted_share", "new")]


def test_identical_seeded_runs_compare_clean_and_lower_api_qps_is_a_regression(tmp_path):
    runs = {}
    for name, qps in (("a", 20), ("b", 20), ("slow", 10)):
        sc = tmp_path / f"{name}.yaml"
        sc.write_text((ROOT / "scenarios" / "api-qps.yaml").read_text().replace("api_qps: 20", f"api_qps: {qps}"))
        r = gangstorm("run", str(sc), "--schedulers", "kube", "--nodes", "2000", "--duration-h", "0.5",
                      "--out", str(tmp_path / name), "--quiet")
        assert r.returncode == 0, r.stderr
        runs[name] = tmp_path / name
    same = gangstorm("compare", str(runs["a"]), str(runs["b"]))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[-1] == "no regressions"
    worse = gangstorm("compare", str(runs["a"]), str(runs["slow"]))
    assert worse.returncode == 1, worse.stdout + worse.stderr
    lines = worse.stdout.splitlines()
    assert any(line.split()[:3] == ["kube", "all", "admission_p99"] and line.endswith("REGRESSION") for line in lines)
    assert lines[-1].endswith("regressions beyond tolerance")
    data = json.loads(gangstorm("compare", str(runs["a"]), str(runs["slow"]), "--json").stdout)
    p99 = next(r for r in data["rows"] if (r["scheduler"], r["cls"], r["metric"]) == ("kube", "all", "admission_p99"))
    a = json.loads((runs["a"] / "summary.json").read_text())["schedulers"]["kube"]["admission_s"]["p99"]
    b = json.loads((runs["slow"] / "summary.json").read_text())["schedulers"]["kube"]["admission_s"]["p99"]
    assert (p99["a"], p99["b"], p99["verdict"]) == (a, b, "regression") and b > 1.1 * a
    assert data["regressions"] == sum(line.endswith("REGRESSION") for line in lines)


@pytest.mark.parametrize("args, expected", [
    (["nowhere", "nowhere2"], "nowhere: expected a run folder, a summary.json or a name in results/index.jsonl"),
    (["empty", "empty"], "empty: expected a run folder holding summary.json, found none"),
    (["bad.json", "bad.json"], "bad.json: expected a gangstorm summary.json, got invalid JSON"),
    (["nan.json", "nan.json"], "nan.json: expected a gangstorm summary.json, got invalid JSON"),
    (["list.json", "list.json"], "list.json: schedulers: expected a gangstorm summary.json with a schedulers mapping"),
    (["ok.json", "int.json"], "int.json: schedulers.kube: expected a mapping of that scheduler's results, got int"),
    (["ok.json", "bin.json"], "bin.json: expected a gangstorm summary.json, got binary data"),
    (["ok.json", "ok.json", "--tolerance", "inf"], "--tolerance: expected a finite number >= 0, got 'inf'"),
    (["ok.json", "ok.json", "--tolerance-metric", "admission_p99=-0.1"],
     "--tolerance-metric admission_p99=-0.1: expected a finite number >= 0, got '-0.1'"),
    (["ok.json", "ok.json", "--tolerance-metric", "admission_p99"],
     "--tolerance-metric admission_p99: expected METRIC=T"),
    (["ok.json", "ok.json", "--tolerance", "-1"], "--tolerance: expected a finite number >= 0, got '-1'"),
    (["ok.json", "ok.json", "--tolerance", "nan"], "--tolerance: expected a finite number >= 0, got 'nan'"),
    (["ok.json", "ok.json", "--tolerance-metric", "p98=0.1"], "--tolerance-metric p98=0.1: expected METRIC=T"),
    (["ok.json", "latest"], "latest: expected a run folder, a summary.json or a name in results/index.jsonl"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, expected):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "nan.json").write_text('{"schedulers": {"kube": {"alloc_util": NaN}}}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "ok.json").write_text(json.dumps(summary()))
    (tmp_path / "int.json").write_text('{"schedulers": {"kube": 3}}')
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00\x81")
    r = gangstorm("compare", *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert expected in r.stderr


def test_runs_in_the_default_folder_are_indexed_and_named_latest(tmp_path):
    (tmp_path / "s.yaml").write_text("name: tiny\nseed: 4\nfleet: {nodes: 64}\nduration_h: 0.5\n"
                                     "workload: {classes: {small: {share: 1, shapes: [{members: 1, gpus: 1}], "
                                     "duration_s: {median: 600}}}}\n")
    for _ in range(2):
        r = gangstorm("run", "s.yaml", "--schedulers", "kube,slurm", "--quiet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    lines = index.entries(tmp_path / "results")
    assert len(lines) == 2 and [e["scenario"] for e in lines] == ["tiny", "tiny"]
    assert lines[0]["schedulers"] == ["kube", "slurm"] and lines[0]["complete"] is True
    assert set(lines[0]["p99_s"]) == {"kube", "slurm"} and lines[0]["dir"] != lines[1]["dir"]
    assert index.resolve("latest", tmp_path / "results") == tmp_path / "results" / lines[1]["dir"]
    assert index.resolve("latest~1", tmp_path / "results") == tmp_path / "results" / lines[0]["dir"]
    assert index.resolve("latest~2", tmp_path / "results") is None
    r = gangstorm("compare", "latest~1", "latest", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "no regressions", r.stdout + r.stderr
    assert lines[0]["started"] <= lines[0]["finished"] <= lines[1]["started"]
    # a run written elsewhere with --out is not indexed; one written into results/ is
    assert gangstorm("run", "s.yaml", "--quiet", "--out", "elsewhere", cwd=tmp_path).returncode == 0
    assert len(index.entries(tmp_path / "results")) == 2 and not (tmp_path / "index.jsonl").exists()
    assert gangstorm("run", "s.yaml", "--quiet", "--out", "results/before-fix", cwd=tmp_path).returncode == 0
    assert index.entries(tmp_path / "results")[-1]["dir"] == "before-fix"
    assert index.resolve("before-fix", tmp_path / "results") == tmp_path / "results" / "before-fix"


def test_an_index_that_cannot_be_written_warns_and_the_run_still_succeeds(tmp_path):
    (tmp_path / "results" / "index.jsonl").mkdir(parents=True)          # a folder where the file goes
    (tmp_path / "s.yaml").write_text("name: tiny\nseed: 4\nfleet: {nodes: 64}\nduration_h: 0.5\n"
                                     "workload: {classes: {small: {share: 1, shapes: [{members: 1, gpus: 1}], "
                                     "duration_s: {median: 600}}}}\n")
    r = gangstorm("run", "s.yaml", "--schedulers", "slurm", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[-1].startswith("gangstorm: warning: results/index.jsonl not updated (")
    assert len(list((tmp_path / "results").glob("*-tiny/summary.json"))) == 1


PLUGIN_TEST = """
import pytest

@pytest.mark.gangstorm("{scenario}", nodes=2000, duration_h=0.5, schedulers="kube")
def test_kube_tail(gangstorm_summary, gangstorm_baseline):
    gangstorm_baseline(gangstorm_summary, "api-qps")
"""


def test_the_pytest_plugin_asserts_against_a_saved_baseline(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text((ROOT / "scenarios" / "api-qps.yaml").read_text())
    slow = tmp_path / "slow.yaml"
    slow.write_text(good.read_text().replace("api_qps: 20", "api_qps: 10"))

    def pytest_run(scenario, *flags):
        (tmp_path / "test_slo.py").write_text(PLUGIN_TEST.format(scenario=scenario))
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_slo.py",
                               "--gangstorm-baselines", "base", *flags], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    missing = pytest_run(good)
    assert missing.returncode == 1 and "--gangstorm-save-baselines" in missing.stdout
    saved = pytest_run(good, "--gangstorm-save-baselines")
    assert saved.returncode == 0, saved.stdout
    assert "admission_s" in json.loads((tmp_path / "base" / "api-qps.json").read_text())["schedulers"]["kube"]
    assert pytest_run(good).returncode == 0
    regressed = pytest_run(slow)
    assert regressed.returncode == 1
    assert "regression against baseline" in regressed.stdout and "admission_p99" in regressed.stdout
