"""report.html: every run writes one, `gangstorm report` rebuilds it, and what it shows is summary.json.

The browser test opens the page from disk in headless Chromium (tests/support/browser.py), counts the
figures per section, reads every data-metric cell back and compares it with summary.json, and
keeps a screenshot in test-artifacts/report.png. The rest needs no browser.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

import numpy as np
import pytest

from loadgen.measure.statistics import exact_quantile
from loadgen.output.html import build, curves
from loadgen.output.html.data import read_admission
from support.browser import ARTIFACTS
from support.fuzzkit import run_cli
from support.paths import ROOT


def expected_text(v) -> str:
    """How the report prints a summary.json value (loadgen/output/html/fmt.py, written out again here)."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if v == 0:
        return "0"
    before = math.floor(math.log10(abs(v))) + 1
    return f"{v:,.{min(max(4 - before, 1), 6)}f}"


def resolve(obj, path: str):
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj.get(part) if isinstance(obj, dict) else None
    return obj


class Cells(HTMLParser):
    """data-metric cells and inline <svg> count per section, from the HTML text."""

    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self.svgs: dict[str, int] = {}
        self.section = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id")
        elif tag == "svg":
            self.svgs[self.section] = self.svgs.get(self.section, 0) + 1
        elif "data-metric" in a:
            self._cell = [a["data-metric"], a["data-value"], ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data

    def handle_endtag(self, tag):
        if self._cell is not None and tag in ("td", "th"):
            self.cells.append(tuple(self._cell))
            self._cell = None


def parse(html: str) -> Cells:
    p = Cells()
    p.feed(html)
    return p


def check_cells(cells, root: dict) -> None:
    assert cells
    for metric, value, shown in cells:
        want = resolve(root, metric)
        assert json.loads(value) == want, metric
        assert shown == expected_text(want), (metric, shown, want)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small chaos run of all four schedulers through the CLI (~7 s on a quiet machine; the timeout
    is for a hung run, not a slow one): it writes report.html itself."""
    out = tmp_path_factory.mktemp("report") / "run"
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", "scenarios/evictions.yaml", "--nodes", "300",
                        "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "report.html" in r.stdout.splitlines()[-1]
    return out


def test_a_run_writes_its_report_with_every_number_from_summary_json(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    html = (run_dir / "report.html").read_text()
    p = parse(html)
    check_cells(p.cells, summary["schedulers"])
    metrics = {m for m, _, _ in p.cells}
    classes = sorted(summary["schedulers"]["kube"]["by_class"])
    for name in ("kube", "volcano", "ray", "slurm"):
        for q in ("p50", "p99", "p999", "count"):
            assert f"{name}.admission_s.{q}" in metrics
            for c in classes:
                assert f"{name}.by_class.{c}.admission_s.{q}" in metrics
        assert (f"{name}.control_plane.busy_s.{next(iter(summary['schedulers'][name]['control_plane']['busy_s']))}"
                in metrics)
    assert p.svgs == {"admission": 1 + len(classes), "timeline": 1, "control-plane": 1, "profile": 1}
    assert "<script" not in html and "<link" not in html and " src=" not in html
    assert len(html) < 1_500_000


def test_the_kubernetes_gang_schedulers_get_their_rows_colours_and_kueues_queues(tmp_path):
    """kube-gang, coscheduling and Kueue simulated on the CI trace (tests/support/gangtrace.py): a
    row each in every table, a colour of their own in the figures, and Kueue's ClusterQueues in a
    table of their own, every cell read back from summary.json."""
    from loadgen.output.html.figures import color
    from support.gangtrace import NEW_THREE, scenario
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", str(scenario(tmp_path)), "--schedulers",
                        ",".join(NEW_THREE), "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    p = parse((out / "report.html").read_text())
    check_cells(p.cells, summary["schedulers"])
    metrics = {m for m, _, _ in p.cells}
    for name in NEW_THREE:
        assert {f"{name}.partial_gang_gpu_hours", f"{name}.by_class.large.admission_s.p99",
                f"{name}.placement.leaves_spanned.mean"} <= metrics, name
    for q in ("q-a", "q-b"):
        for k in ("workloads_admitted", "admission_s.p99", "nominal_gpus", "borrowed_gpus_max", "evictions"):
            assert f"kueue.control_plane.queues.{q}.{k}" in metrics
    assert resolve(summary["schedulers"], "kueue.control_plane.queues.q-a.borrowed_gpus_max") == 16
    assert len({color(n, NEW_THREE) for n in ["kube", "volcano", "ray", "slurm", *NEW_THREE]}) == 7


def test_the_cdfs_pass_through_the_quantiles_in_summary_json(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    lat = read_admission(run_dir / "jobs.csv", list(summary["schedulers"]))
    for name, s in summary["schedulers"].items():
        for cls, v in lat[name].items():
            want = s["admission_s"] if cls == "all" else s["by_class"][cls]["admission_s"]
            assert len(v) == want["count"]
            x, f = curves.cdf_points(v)
            assert len(x) <= 320
            for q, p in curves.QUANTILE_MARKS.items():
                assert round(exact_quantile(v, p), 6) == want[q]
                assert round(curves.quantile_marks(v)[q][0], 6) == want[q]
                assert want[q] in np.round(x, 6)        # the drawn curve has the exact quantile on it


def test_timeseries_carries_control_plane_columns_per_scheduler(run_dir):
    from loadgen.output.storage import verify
    with open(run_dir / "timeseries.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    assert header[:8] == ["scheduler", "t", "gpus_allocated", "gpus_partial", "gpus_stranded", "pending_jobs",
                          "partial_gangs", "running_jobs"]
    cp = header[8:]
    assert cp == sorted(cp) and all(c.startswith("cp_") for c in cp)
    assert {"cp_etcd_db_bytes", "cp_binds_total", "cp_writes_total", "cp_api_429_total", "cp_pending_groups",
            "cp_schedule_failures_total", "cp_sessions_total", "cp_pending_jobs", "cp_evictions_total"} <= set(cp)
    last = {r["scheduler"]: r for r in rows}
    assert int(last["kube"]["cp_binds_total"]) > 0 and last["kube"]["cp_sessions_total"] == ""
    assert int(last["volcano"]["cp_sessions_total"]) > 0 and last["ray"]["cp_etcd_db_bytes"] == ""
    assert verify(run_dir) == []


@pytest.mark.browser
def test_report_opens_from_disk_in_chromium_with_its_figures_and_numbers(run_dir, chromium, tmp_path):
    summary = json.loads((run_dir / "summary.json").read_text())
    classes = sorted(summary["schedulers"]["kube"]["by_class"])
    chromium.open((run_dir / "report.html").as_uri())
    deadline = time.monotonic() + 30
    while chromium.eval("document.readyState") != "complete" or not chromium.eval("!!document.querySelector('footer')"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    count = {sec: chromium.eval(f"document.querySelectorAll('section#{sec} figure.plot > svg').length")
             for sec in ("summary", "admission", "timeline", "control-plane", "profile")}
    assert count == {"summary": 0, "admission": 1 + len(classes), "timeline": 1, "control-plane": 1, "profile": 1}
    # the figures are drawn (laid out with a size), their axis titles are text
    sizes = chromium.eval("Array.from(document.querySelectorAll('figure.plot > svg'))"
                          ".map(s => [s.getBoundingClientRect().width, s.getBoundingClientRect().height])")
    assert all(w > 300 and h > 150 for w, h in sizes), sizes
    words = {sec: chromium.eval(f"Array.from(document.querySelectorAll('section#{sec} svg text'))"
                                f".map(t => t.textContent).join('|')")
             for sec in ("admission", "timeline", "control-plane")}
    assert "admission latency (s, log scale" in words["admission"] and "share of admitted jobs" in words["admission"]
    assert "0.999" in words["admission"] and "kube (n=" in words["admission"]
    for label in ("GPUs allocated", "partial-gang GPUs", "stranded GPUs", "pending jobs", "run time (h)", "node_fail"):
        assert label in words["timeline"], label
    assert "binds per s" in words["control-plane"] and "etcd_db_bytes" in words["control-plane"]
    assert chromium.eval("document.querySelectorAll('script,link,img,iframe,object').length") == 0
    # every number cell, as the browser shows it, is summary.json's value
    cells = chromium.eval("Array.from(document.querySelectorAll('[data-metric]'))"
                          ".map(e => [e.dataset.metric, e.dataset.value, e.textContent])")
    assert len(cells) > 4 * (13 + 5 * (1 + len(classes)))
    check_cells(cells, summary["schedulers"])
    height = chromium.eval("document.documentElement.scrollHeight")
    chromium.call("Emulation.setDeviceMetricsOverride", width=1280, height=min(int(height), 16000),
                  deviceScaleFactor=1, mobile=False)
    chromium.screenshot(ARTIFACTS / "report.png")
    assert (ARTIFACTS / "report.png").stat().st_size > 50_000


def test_a_partial_run_without_jobs_csv_still_gets_a_report_that_says_so(run_dir, tmp_path):
    d = tmp_path / "partial"
    d.mkdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(complete=False, running="ray")
    summary["schedulers"] = {k: summary["schedulers"][k] for k in ("kube", "volcano")}
    (d / "summary.json").write_text(json.dumps(summary))
    shutil.copy(run_dir / "timeseries.csv", d / "timeseries.csv")      # holds ray's and slurm's rows too
    # as an interrupted run leaves it: the CSV rows of the schedulers summary.json lists, nothing else
    lines = (d / "timeseries.csv").read_text().splitlines(keepends=True)
    kept = "".join([lines[0]] + [ln for ln in lines[1:] if ln.split(",")[0] in ("kube", "volcano")])
    files = {"jobs.csv": {}, "timeseries.csv": {k: summary["files"]["timeseries.csv"][k] for k in ("kube", "volcano")},
             "committing": []}
    o = run_cli(["report", "{dir}/partial"], {"partial/summary.json": json.dumps({**summary, "files": files}).encode(),
                                              "partial/timeseries.csv": kept.encode()}, out_name="partial")
    assert o.code == 0, o.stderr
    assert o.stdout.startswith("report: ") and o.stdout.strip().endswith("MB)")
    html = build(d).read_text()
    assert "Partial result" in html and "while ray was running" in html
    assert "jobs.csv is missing" in html
    p = parse(html)
    check_cells(p.cells, summary["schedulers"])
    assert {m.split(".")[0] for m, _, _ in p.cells} == {"kube", "volcano"}
    assert p.svgs.get("admission", 0) == 0 and p.svgs["timeline"] == 1
    assert 'aria-label="GPUs and queue over time"' in html
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "summary.json").write_text(json.dumps({**summary, "schedulers": {}, "running": "kube"}))
    assert "lists no scheduler yet" in build(empty).read_text()


def test_jobs_the_cluster_refused_are_named_beside_the_tails_with_its_first_words(run_dir, tmp_path):
    """The tails stand on admitted jobs only: a run that lost jobs to refusals says how many, why,
    and what the apiserver said, in summary.md and report.html alike."""
    from loadgen.output.markdown import render
    d = tmp_path / "refused"
    shutil.copytree(run_dir, d)
    summary = json.loads((d / "summary.json").read_text())
    vc = summary["schedulers"]["volcano"]
    vc["jobs"].update(rejected=49, failed=2)
    vc["failure_reasons"] = {"etcd-nospace": 2, "api-422": 49}
    vc["control_plane"]["first_refusal"] = {"api-422": 'Queue "gs-a-" is invalid: metadata.name: Invalid value'}
    (d / "summary.json").write_text(json.dumps(summary))
    lines = render(summary).splitlines()
    at = lines.index("Jobs refused or failed (not in the admission figures; jobs.csv `reason` names each):")
    submitted = vc["jobs"]["submitted"]
    assert lines[at + 2:at + 4] == [
        f"- **volcano**: 49 rejected and 2 failed of {submitted:,} submitted (api-422 x49, etcd-nospace x2)",
        '  - first api-422: Queue "gs-a-" is invalid: metadata.name: Invalid value']
    assert lines[at + 4] == ""                          # no other scheduler lost a job in this run
    html = build(d).read_text()
    assert f"49 rejected and 2 failed of {submitted:,} submitted (api-422 x49, etcd-nospace x2)" in html
    assert "first api-422: Queue &quot;gs-a-&quot; is invalid" in html
    assert "Jobs refused or failed" not in build(run_dir).read_text()   # nothing refused: nothing said


def test_a_ceiling_folder_gets_its_curve_with_the_slo_line(tmp_path):
    def pts(ms, slo):
        return [{"churn_multiplier": m, "jobs": 800, "p99_s": 0.5 * m, "p999_s": 0.6 * m, "never_admitted": 0,
                 "slo_met": 0.5 * m <= slo, "sustained": True, "met": 0.5 * m <= slo, "load": {"x": m / 20},
                 "extra_field": [1, 2]} for m in ms]

    ceiling = {"scenario": "t", "slo": {"admission_p99_s": 10}, "backend": "sim", "nodes": 100, "jobs_per_point": 800,
               "points": {"kube": pts([3, 6, 12, 24, 48], 10), "slurm": pts([3, 6, 9.2], 10)},
               "ceiling": {"kube": {"ceiling_churn_multiplier": 12, "broke_at_churn_multiplier": 24, "cap": None,
                                    "points_run": 5, "jobs_per_s": 1.5, "pods_per_s": 3.25, "saturated": "x"},
                           "slurm": {"ceiling_churn_multiplier": 9.2, "broke_at_churn_multiplier": None,
                                     "cap": "max_points", "points_run": 3, "jobs_per_s": None, "pods_per_s": None}}}
    (tmp_path / "ceiling.json").write_text(json.dumps(ceiling))
    html = build(tmp_path).read_text()
    p = parse(html)
    assert p.svgs == {"ceiling": 1}
    check_cells(p.cells, ceiling)
    assert {"ceiling.kube.ceiling_churn_multiplier", "points.slurm.2.p99_s"} <= {m for m, _, _ in p.cells}
    assert "SLO: p99 &lt;= 10 s" in html and "churn multiplier (log scale)" in html and "admission p99 (s" in html


RUN = b'{"run_id": "r", "schedulers": {}}\n'
BAD = {
    "missing": ((["report", "{dir}/nope"], {}),
                "{dir}/nope: no such directory; expected a run folder (results/<run-id>/)"),
    "a-file": ((["report", "{dir}/s.json"], {"s.json": RUN}),
               "{dir}/s.json: expected a run folder (results/<run-id>/), got a file"),
    "not-a-run-folder": ((["report", "{dir}/d"], {"d/notes.txt": b"x"}),
                         "{dir}/d: expected a run folder holding summary.json (or a ceiling folder holding "
                         "ceiling.json), found neither"),
    "summary-not-json": ((["report", "{dir}/d"], {"d/summary.json": b'{"run_id": '}),
                         "{dir}/d/summary.json: not valid JSON (line 1); expected a gangstorm summary.json "
                         "(with run_id and schedulers)"),
    "summary-not-a-summary": ((["report", "{dir}/d"], {"d/summary.json": b'{"schedulers": []}'}),
                              "{dir}/d/summary.json: expected a gangstorm summary.json (with run_id and schedulers)"),
    "summary-binary": ((["report", "{dir}/d"], {"d/summary.json": b"\xff\xfe\x00"}),
                       "{dir}/d/summary.json: expected UTF-8 JSON text (a gangstorm summary.json (with run_id and "
                       "schedulers))"),
    "ceiling-not-a-ceiling": ((["report", "{dir}/d"], {"d/ceiling.json": b'{"points": 3}'}),
                              "{dir}/d/ceiling.json: expected a gangstorm ceiling.json (with points and ceiling)"),
    "out-is-a-directory": ((["report", "{dir}/d", "--out", "{dir}"], {"d/summary.json": RUN}),
                           "--out {dir}: expected a file to write, got a directory"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_run_dir_is_one_line_and_exit_2(name):
    (argv, files), expected = BAD[name]
    o = run_cli(argv, files)
    assert o.code == 2, o.stderr
    assert o.stderr.strip() == "gangstorm: error: " + expected.replace("{dir}", str(o.out.parent))
    assert not any(p.name == "report.html" for p in o.out.parent.rglob("*")) if o.out.parent.exists() else True


def test_curves_keep_the_tail_the_spikes_and_the_rates():
    v = np.sort(np.random.default_rng(1).lognormal(2, 2, 50_000))
    x, f = curves.cdf_points(v)
    assert len(x) <= 320 and f[-1] == 1.0 and x[-1] == v[-1] and np.all(np.diff(x) >= 0)
    assert list(np.round(f[-10:] * len(v))) == list(range(len(v) - 9, len(v) + 1))   # the last 10 ranks all drawn
    assert sum(f > 0.999) >= 30
    t = np.arange(10_000.0)
    y = np.zeros(10_000)
    y[1234] = 99
    tx, ty = curves.decimate(t, y, 400)
    assert len(tx) <= 400 and ty.max() == 99 and np.all(np.diff(tx) > 0)
    rt, r = curves.rate(np.array([0, 10, 20, 30.0]), np.array([np.nan, 5, 25, 25]))
    assert list(rt) == [10, 20, 30] and list(r) == [0.5, 2.0, 0.0]


def test_plain_imports_and_help_do_not_load_matplotlib():
    code = ("import sys, loadgen.drive.comparative, loadgen.output.html, loadgen.cli.main as m; m.build_parser(); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
