"""`gangstorm soak` on a simulated clock: the simulated kube driven through the soak's own loop by
a WallClock whose time only the loop's sleeps advance, so every window, job and quantile is exact
and the same on every machine. Then the flags it refuses, and the shipped rules as promtool reads them."""
from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loadgen.cli.main import main
from loadgen.drive.runner import WallClock
from loadgen.drive.soak import ID_STRIDE, Soak, SoakOptions, window_plan, window_scenario
from loadgen.input import soak as flags
from loadgen.input.overrides import load_with_overrides
from loadgen.input.soak import SoakBounds, churn_schedule
from loadgen.output import index
from loadgen.output.soak import read
from loadgen.output.storage import verify
from support.paths import ROOT

SCENARIO = ROOT / "tests/data/soak-small.yaml"
EPOCH = 1.8e9                          # the rows' UTC times: 2027-01-15T08:00:00Z


class SimulatedTime:
    """time.monotonic and time.sleep for a WallClock: time passes only when the loop sleeps
    (rounded to microseconds, so a sleep up to a job's submit time lands on it exactly)."""

    def __init__(self, interrupt_at: float | None = None):
        self.t, self.interrupt_at = 0.0, interrupt_at

    def clock(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        self.t = round(self.t + max(d, 1e-6), 6)
        if self.interrupt_at is not None and self.t >= self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt        # what the CLI's SIGINT handler raises


def soak(tmp_path: Path, bounds: SoakBounds, schedule: str = "0:60,60:240", interrupt_at: float | None = None,
         until_epoch: float | None = None, indexed: bool = True) -> Soak:
    scenario = load_with_overrides(str(SCENARIO))
    t = SimulatedTime(interrupt_at)
    opts = SoakOptions(scheduler="kube", backend="sim", bounds=bounds, churn=churn_schedule(schedule, 60),
                       time_scale=1.0, results_root=tmp_path,
                       out_dir=None if indexed else tmp_path / "elsewhere" / "soak",
                       clock=WallClock(0.05, t.clock, t.sleep), epoch=lambda: EPOCH, until_epoch=until_epoch)
    return Soak(scenario, opts)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak")
    s = soak(tmp, SoakBounds(window_s=30, windows=3))
    head = s.run()
    return s, head, tmp


def test_three_windows_start_and_end_on_the_window_grid_with_the_scheduled_churn(three):
    _, head, _ = three
    rows = head["windows"]
    assert [(r["window"], r["start_s"], r["end_s"], r["churn_multiplier"]) for r in rows] == [
        (1, 0, 30, 60.0), (2, 30, 60, 60.0), (3, 60, 90, 240.0)]
    assert [(r["start"], r["end"]) for r in rows] == [
        ("2027-01-15T08:00:00Z", "2027-01-15T08:00:30Z"), ("2027-01-15T08:00:30Z", "2027-01-15T08:01:00Z"),
        ("2027-01-15T08:01:00Z", "2027-01-15T08:01:30Z")]
    assert head["complete"] is True and head["ended_by"] == "windows"


def test_each_window_offers_its_own_seeds_workload_with_ids_that_never_collide(three):
    s, head, _ = three
    scenario = load_with_overrides(str(SCENARIO))
    for r in head["windows"]:
        k = r["window"]
        plan = window_plan(window_scenario(scenario, k, r["churn_multiplier"]), k, r["start_s"], r["end_s"], 1.0)
        assert r["jobs"]["kube"] == len(plan.jobs)
        assert all(k * ID_STRIDE <= j.id < (k + 1) * ID_STRIDE for j in plan.jobs)
        assert all(r["start_s"] <= j.submit_s < r["end_s"] for j in plan.jobs)
    assert [r["jobs"]["kube"] for r in head["windows"]] == [25, 14, 85]


def test_a_window_counts_its_jobs_by_intended_submit_time_and_the_waiting_ones_at_its_close(three):
    """Admitted by the close + still waiting at the close = the window's jobs; the class counts add up
    to the window's; the quantiles are the admitted jobs', exactly as the window's summary.json has them."""
    s, head, _ = three
    for r in head["windows"]:
        a = r["admission_s"]["kube"]
        assert a["all"]["count"] + r["pending_at_close"]["kube"] == r["jobs"]["kube"]
        assert sum(v["count"] for c, v in a.items() if c != "all") == a["all"]["count"]
        summary = json.loads((s.out / "windows" / f"{r['window']:04d}" / "summary.json").read_text())
        res = summary["schedulers"]["kube"]
        assert (res["admission_s"]["p99"], res["admission_s"]["count"]) == (a["all"]["p99"], a["all"]["count"])
        assert res["jobs"]["never_admitted"] == r["pending_at_close"]["kube"]
        assert summary["complete"] is True and summary["soak"]["window"] == r["window"]
    assert [(r["admission_s"]["kube"]["all"]["count"], r["pending_at_close"]["kube"]) for r in head["windows"]] == [
        (24, 1), (14, 0), (34, 51)]
    assert [r["p99_s"]["kube"] for r in head["windows"]] == [6.034021, 2.645208, 3.813228]


def test_a_job_admitted_after_its_window_closed_shows_in_the_live_histogram_not_in_the_closed_row(three):
    s, head, _ = three
    text = s.expo.render()
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("gangstorm_admission_seconds_count"))
    in_rows = sum(r["admission_s"]["kube"]["all"]["count"] for r in head["windows"])
    # window 1's job still waiting at its close was admitted during window 2, and window 3's
    # late admissions came in the final advance at its close
    assert counted > in_rows
    jobs = (s.out / "windows" / "0001" / "jobs.csv").read_text().splitlines()
    assert sum(1 for line in jobs if line.split(",")[14] == "pending") == 1


def test_every_window_folder_verifies_and_has_a_line_in_the_index(three):
    s, head, tmp = three
    for r in head["windows"]:
        assert verify(s.out / "windows" / f"{r['window']:04d}") == []
    lines = [e for e in index.entries(tmp) if e.get("kind") == "soak"]
    assert [(e["window"], e["dir"], e["run_id"]) for e in lines] == [(k, s.out.name, s.soak_id) for k in (1, 2, 3)]
    assert lines == head["windows"]
    assert index.runs(tmp) == []            # `latest` never names a soak window
    assert read(s.out)["windows"] == head["windows"]


def test_the_live_endpoint_carries_what_the_rules_read(three):
    s, _, _ = three
    text = s.expo.render()
    for series in ('gangstorm_admission_seconds_bucket{scheduler="kube",class="large",le="+Inf"}',
                   'gangstorm_generator_lateness_seconds_count{scheduler="kube"}',
                   'gangstorm_slo_admission_p99_seconds{scheduler="kube"} 5',
                   'gangstorm_fleet_gpus{scheduler="kube"} 32', 'gangstorm_soak_window{scheduler="kube"} 3',
                   'gangstorm_soak_churn_multiplier{scheduler="kube"} 240', 'gangstorm_gpus_partial{scheduler="kube"}',
                   'gangstorm_jobs_pending{scheduler="kube"}'):
        assert series in text


def test_the_soaks_report_draws_the_windows(three):
    s, _, _ = three
    page = (s.out / "report.html").read_text()
    assert 'data-figure="soak-p99"' in page and 'data-figure="soak-side"' in page
    assert 'data-metric="windows.2.admission_s.kube.all.p99" data-value="3.813228"' in page
    assert "ran without --prometheus" in page


def test_a_signal_keeps_the_current_window_partial_with_the_jobs_it_had_sent(tmp_path):
    s = soak(tmp_path, SoakBounds(window_s=30, windows=3), interrupt_at=45.0)
    with pytest.raises(KeyboardInterrupt):
        s.run()
    head = read(s.out)
    assert head["ended_by"] == "signal" and head["complete"] is False
    rows = head["windows"]
    assert [(r["window"], r["start_s"], r["end_s"], r["complete"]) for r in rows] == [
        (1, 0, 30, True), (2, 30, 45.0, False)]        # a sample falls due at 45 s
    summary = json.loads((s.out / "windows" / "0002" / "summary.json").read_text())
    part = summary["schedulers"]["kube"]["partial"]
    assert part["jobs_sent"] == rows[1]["jobs"]["kube"] < part["jobs_planned"] == 14
    assert summary["complete"] is False and summary["running"] == "kube"
    assert verify(s.out / "windows" / "0002") == []
    assert len([e for e in index.entries(tmp_path) if e.get("kind") == "soak"]) == 2


def test_a_signal_on_a_windows_last_sleep_keeps_that_window_partial_with_every_job_sent(tmp_path):
    s = soak(tmp_path, SoakBounds(window_s=30, windows=3), interrupt_at=30.0)
    with pytest.raises(KeyboardInterrupt):
        s.run()
    rows = read(s.out)["windows"]
    assert [(r["window"], r["end_s"], r["complete"], r["jobs"]["kube"]) for r in rows] == [(1, 30, False, 25)]
    assert verify(s.out / "windows" / "0001") == []


def test_until_ends_the_last_window_at_the_deadline(tmp_path):
    s = soak(tmp_path, SoakBounds(window_s=30), until_epoch=EPOCH + 50, indexed=False)
    head = s.run()
    assert [(r["start_s"], r["end_s"]) for r in head["windows"]] == [(0, 30), (30, 50)]
    assert head["ended_by"] == "until" and head["until_s"] == 50
    assert index.entries(tmp_path) == []        # a soak outside the results folder is not indexed


# --- the flags -------------------------------------------------------------------------------------
NOW = datetime(2026, 12, 6, 1, 0, 0, tzinfo=UTC)


def test_durations_deadlines_and_the_churn_schedule_parse_to_exact_seconds():
    assert [flags.duration_s(t, "--until") for t in ("90", "90s", "20m", "1h30m", "1.5h")] == [90, 90, 1200, 5400, 5400]
    assert flags.until_seconds("20m", NOW) == 1200
    assert flags.until_seconds("01:30", NOW) == 1800
    assert flags.until_seconds("2026-12-06T03:00:00Z", NOW) == 7200
    sched = churn_schedule("0:400,10m:2000x", 3)
    assert sched.steps == ((0.0, 400.0), (600.0, 2000.0))
    assert [sched.at(t) for t in (0, 599.9, 600, 1e6)] == [400, 400, 2000, 2000]
    assert churn_schedule(None, 3).steps == ((0.0, 3.0),)
    b = SoakBounds(window_s=60, windows=2, until_s=90)
    assert [b.window(k) for k in (1, 2, 3)] == [(0, 60), (60, 90), None]
    assert SoakBounds(window_s=60).window(10**6) == (59_999_940, 60_000_000) and not SoakBounds(60).bounded


BAD = [
    (["--window-s", "0"], "--window-s"), (["--window-s", "-5"], "--window-s"), (["--window-s", "nan"], "--window-s"),
    (["--window-s", "inf"], "--window-s"), (["--window-s", "abc"], "--window-s"), (["--window-s", "2"], "--window-s"),
    (["--windows", "0"], "--windows"), (["--windows", "-1"], "--windows"), (["--windows", "1.5"], "--windows"),
    (["--windows", "nan"], "--windows"), (["--until", "2000-01-01T00:00:00Z"], "--until"),
    (["--until", "soon"], "--until"), (["--until", "0m"], "--until"), (["--until", "nan"], "--until"),
    (["--churn-schedule", "10m:2"], "--churn-schedule"), (["--churn-schedule", "0:nan"], "--churn-schedule"),
    (["--churn-schedule", "0:-1"], "--churn-schedule"), (["--churn-schedule", "0:2,0:3"], "--churn-schedule"),
    (["--churn-schedule", "0:2,5m"], "--churn-schedule"), (["--churn-schedule", "0:inf"], "--churn-schedule"),
    (["--churn-schedule", "0:2", "--churn", "3"], "--churn"), (["--backend", "sim"], "--backend sim"),
    (["--schedulers", "kube,slurm"], "--schedulers"), (["--metrics-port", "99999"], "--metrics-port"),
    (["--dry-run"], "--dry-run"), (["--windows", ""], "--windows"),
]


@pytest.mark.parametrize("extra,flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_flags_end_in_one_line_naming_the_flag_and_status_2(extra, flag, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["soak", str(SCENARIO), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err, err
    assert not (tmp_path / "results").exists()


def test_a_scenario_with_a_chaos_plan_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["soak", str(ROOT / "tests/data/existing-small.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "chaos" in err


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) not installed")
def test_the_shipped_rules_pass_promtool():
    from fakes.prom import RULES
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 13 rules found" in out.stdout


def test_the_project_prometheus_config_loads_the_rules():
    from fakes.prom import RULES, PrometheusServer, ScrapeJob
    server = PrometheusServer("/tmp/unused-prom", [ScrapeJob("gangstorm", ["127.0.0.1:9"])])
    assert f"rule_files:\n- {RULES.resolve()}" in server.config_text
