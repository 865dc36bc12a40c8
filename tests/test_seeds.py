"""Runs over several seeds (--seeds): the median and interval of every figure, the head-to-head
tests and their marks on constructed per-seed summaries whose answers are worked out by hand; the
same seed giving byte-identical files alone and among others, in parallel or not; the run folder,
the CLI flags, an interrupted run and the pytest plugin."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest

from loadgen.drive.comparative import RunOptions, run
from loadgen.drive.seeds import parse_seeds, run_seeds
from loadgen.input.scenario import load
from loadgen.output import aggregate
from loadgen.output.markdown import render
from loadgen.output.storage import verify
from support.fuzzkit import run_cli
from support.paths import ROOT

SMALL = (b"name: t\nseed: 7\nduration_h: 0.3\ndrain_h: 0.1\nwarmup_h: 0.05\nfleet: {nodes: 32}\n"
         b"workload: {offered_load: 1.0, classes: {small: {share: 0.9, shapes: [{members: 1, gpus: 8}], "
         b"duration_s: {median: 300}}, large: {share: 0.1, shapes: [{members: 4, gpus: 8}], "
         b"duration_s: {median: 600}}}}\n")


# --- constructed per-seed summaries ------------------------------------------------------------
def quantiles(p50, p99, p999, count=100):
    return {"count": count, "p50": p50, "p99": p99, "p999": p999}


def result(p99, util=0.9, classes=("large", "small"), count=100):
    """One scheduler's summary entry in the single-seed layout, with the numbers the figures read."""
    adm = quantiles(p99 / 10, p99, p99 * 2, count)
    zero = quantiles(0.0, 0.0, 0.0, count)
    return {"backend": "sim", "jobs": {"submitted": count, "admitted": count, "never_admitted": 0, "failed": 0,
                                       "rejected": 0, "finished": count},
            "admission_s": adm, "admission_s_incl_pending": adm,
            "by_class": {c: {"jobs": count, "admitted": count, "never_admitted": 0,
                             "admission_s": quantiles(p99 / 10, p99 + i,
                                                      p99 * 2 + i, count)} for i, c in enumerate(classes)},
            "budgets": {"admission": {"all": adm}, "placement_to_ready": {"all": zero}, "rendezvous": {"all": zero},
                        "time_to_training": {"all": adm}},
            "alloc_util": util, "fragmentation": 0.01, "scheduling_tax": {"tax": 0.0},
            "partial_gang_gpu_hours": 0.0, "cost_per_million_gpu_hours": 1e6 / util, "slo_met": p99 <= 60,
            "model": {"calibrated": False, "note": "profile 'x': none"}, "control_plane": {"busy_s": {"etcd": 1.0}},
            "wall_s": 1.0}


def per_seed(seeds, kube, volcano, ray):
    """seed -> summary.json of that seed, each scheduler's admission p99 from the given functions."""
    return {s: {"seed": s, "duration_h": 1.0, "workload": {"jobs": 100 + s, "churn_multiplier": 3.0,
                                                           "offered_load": 1.0},
                "schedulers": {"kube": result(kube(s), util=0.9 + s / 1000), "volcano": result(volcano(s)),
                               "ray": result(ray(s))}}
            for s in seeds}


HEAD = {"run_id": "r", "scenario": "t", "seed": None, "complete": True, "wall_s": 1.0, "duration_h": 1.0,
        "fleet": {"nodes": 32, "gpus_per_node": 8, "leaf_size": 32}, "slo": {"admission_p99_s": 60},
        "profile": {"name": "x", "path": "x.yaml"},
        "seeds": {"planned": list(range(1, 11)), "completed": list(range(1, 11)), "running": [], "interrupted": [],
                  "failed": {}, "rule": "as listed", "folders": "seeds/<seed>/"}}

# kube p99 10, 20, ..., 100; volcano 5 s lower on every seed; ray = volcano -/+ 1 in turn
def KUBE(s):
    return 10.0 * s


def VOLCANO(s):
    return 10.0 * s - 5


def RAY(s):
    return 10.0 * s - 5 + (1 if s % 2 else -1)


@pytest.fixture(scope="module")
def ten():
    return aggregate.over_seeds(HEAD, per_seed(range(1, 11), KUBE, VOLCANO, RAY))


def test_ten_seeds_give_each_figure_its_median_and_the_second_and_ninth_values(ten):
    kube = ten["schedulers"]["kube"]["spread"]["admission_p99"]
    assert (kube["median"], kube["low"], kube["high"], kube["n"]) == (55.0, 20.0, 90.0, 10)
    assert kube["confidence"] == round(1 - 22 / 1024, 6)
    assert kube["values"] == {str(s): 10.0 * s for s in range(1, 11)}
    assert kube["counts"] == {str(s): 100 for s in range(1, 11)}
    ray = ten["schedulers"]["ray"]["spread"]["admission_p99"]      # 6, 14, 26, 34, 46, 54, 66, 74, 86, 94
    assert (ray["median"], ray["low"], ray["high"]) == (50.0, 14.0, 86.0)
    util = ten["schedulers"]["kube"]["spread"]["alloc_util"]       # 0.901 ... 0.910
    assert (util["median"], util["low"], util["high"]) == (0.9055, 0.902, 0.909)
    p999 = ten["schedulers"]["kube"]["spread"]["time_to_training_p999"]
    assert (p999["median"], p999["low"], p999["high"]) == (110.0, 40.0, 180.0)
    small = ten["schedulers"]["kube"]["by_class"]["small"]["spread"]["admission_p99"]     # p99 + 1
    assert (small["median"], small["low"], small["high"]) == (56.0, 21.0, 91.0)


def test_the_summary_keeps_the_one_seed_layout_with_medians(ten):
    kube = ten["schedulers"]["kube"]
    assert kube["admission_s"]["p99"] == 55.0 and kube["admission_s"]["count"] == 100
    assert isinstance(kube["admission_s"]["count"], int)
    assert kube["alloc_util"] == 0.9055
    assert ten["workload"]["jobs"] == 105.5              # the median of 101..110
    assert "wall_s" not in kube and kube["seeds"] == 10
    assert kube["slo_met"] is True and kube["slo_met_seeds"] == {"met": 6, "of": 10}
    assert kube["model"] == {"calibrated": False, "note": "profile 'x': none"}
    assert ten["spread"]["confidence"] == 0.95 and ten["spread"]["seeds"] == list(range(1, 11))


def test_median_tree_keeps_what_every_seed_agrees_on():
    folded = aggregate.median_tree([{"n": 1, "x": 1.0, "s": "a", "l": [1], "b": True, "m": "p"},
                                    {"n": 2, "x": 2.0, "s": "a", "l": [1], "b": False, "m": "q"},
                                    {"n": 4, "x": None, "s": "a", "l": [1], "b": True}])
    assert folded == {"n": 2, "x": 1.5, "s": "a", "l": [1], "b": None, "m": None}


def test_a_difference_on_every_seed_is_significant_and_an_alternating_one_is_not(ten):
    pairs = {(p["a"], p["b"], p["class"], p["figure"]): p for p in ten["significance"]["pairs"]}
    kv = pairs[("kube", "volcano", "all", "admission_p99")]
    assert (kv["seeds"], kv["median_diff"], kv["p_value"], kv["significant"], kv["better"]) == \
        (10, -5.0, round(2 / 1024, 6), True, "volcano")
    vr = pairs[("volcano", "ray", "all", "admission_p99")]
    assert (vr["median_diff"], vr["p_value"], vr["significant"], vr["better"]) == (0.0, 1.0, False, None)
    util = pairs[("kube", "volcano", "all", "alloc_util")]          # kube 0.901..0.910 against 0.9
    assert (util["significant"], util["better"]) == (True, "kube")
    assert ten["significance"]["testable"] is True and ten["significance"]["min_seeds"] == 6
    assert not any(p["figure"] == "never_admitted_share" for p in pairs.values())     # headline figures only


def test_summary_md_prints_median_and_interval_and_marks_what_is_not_significant(ten):
    md = render(ten)
    row = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert "| 55.0 [20.0, 90.0] |" in row["kube"]                 # significantly worse than volcano: no mark
    assert "| 50.0 [15.0, 85.0] |" in row["volcano"]              # the best p99
    assert "| 50.0 [14.0, 86.0] ≈ |" in row["ray"]                # within the spread of the best
    assert "| 0.905 [0.902, 0.909] |" in row["kube"]              # alloc util 0.9055 (binary: 0.90549...)
    assert "-5.0 (p 0.00195) |" in md and "+0.0 (p 1) n.s." not in md and "0.0 (p 1) n.s." in md
    assert "Placement-to-ready and rendezvous: 0 s on every seed for every scheduler." in md


def test_five_seeds_say_nothing_can_be_significant_instead_of_not_significant():
    head = {**HEAD, "seeds": {**HEAD["seeds"], "planned": [1, 2, 3, 4, 5], "completed": [1, 2, 3, 4, 5]}}
    five = aggregate.over_seeds(head, per_seed(range(1, 6), KUBE, VOLCANO, RAY))
    assert five["significance"]["testable"] is False
    assert {p["significant"] for p in five["significance"]["pairs"]} == {None}
    kube = five["schedulers"]["kube"]["spread"]["admission_p99"]
    assert (kube["low"], kube["high"], kube["confidence"]) == (10.0, 50.0, 1 - 2 / 32)     # the range
    md = render(five)
    assert "With 5 seeds no head-to-head difference can be significant" in md
    assert "≈" not in md and "n.s." not in md


def test_a_ceiling_over_seeds_gives_its_median_interval_and_pair_tests():
    def doc(s):
        return {"ceiling": {"kube": {"ceiling_churn_multiplier": 2.0 + s / 10, "broke_at_churn_multiplier": 4.0,
                                     "saturated": "etcd" if s % 3 else None, "cap": None, "points_run": 5,
                                     "jobs_per_s": 1.0, "pods_per_s": 2.0, "evidence": {"load": {}}},
                            "slurm": {"ceiling_churn_multiplier": 8.0, "broke_at_churn_multiplier": None,
                                      "saturated": None, "cap": "max_multiplier", "points_run": 3,
                                      "jobs_per_s": 4.0, "pods_per_s": 8.0, "evidence": None}}}
    c = aggregate.ceiling({"scenario": "t"}, {s: doc(s) for s in range(1, 8)})
    kube = c["ceiling"]["kube"]
    assert kube["ceiling_churn_multiplier"] == 2.4
    e = kube["spread"]["ceiling_churn_multiplier"]
    assert (e["median"], e["low"], e["high"]) == (2.4, 2.1, 2.7)       # 7 seeds: k = 1, the range (98.4%)
    assert kube["saturated_seeds"] == {"etcd": 5, "none near full": 2}
    assert c["ceiling"]["slurm"]["cap_seeds"] == {"max_multiplier": 7}
    (p,) = c["significance"]["pairs"]
    assert (p["median_diff"], p["p_value"], p["significant"], p["better"]) == (5.6, round(2 / 128, 6), True, "slurm")


# --- seeds as runs ----------------------------------------------------------------------------
def test_seeds_count_from_the_scenarios_seed_and_a_list_is_taken_as_it_is():
    assert parse_seeds("3", 42) == [42, 43, 44]
    assert parse_seeds("9,1,5", 42) == [9, 1, 5]
    assert parse_seeds([7], 42) == [7]
    assert parse_seeds(2, 0) == [0, 1]


@pytest.fixture(scope="module")
def evictions():
    return load(ROOT / "scenarios" / "evictions.yaml").with_overrides(**{"fleet.nodes": 300, "duration_h": 2.0})


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_seed_gives_byte_identical_files_alone_and_among_other_seeds(evictions, tmp_path, parallel):
    names = ["kube", "volcano", "ray", "slurm"]
    alone = run(evictions.with_overrides(seed=8), RunOptions(schedulers=names, out_dir=tmp_path / "alone",
                                                             report=False))
    many = run_seeds(evictions, [9, 8, 10], RunOptions(schedulers=names, out_dir=tmp_path / "many", report=False),
                     parallel=parallel)
    inside = tmp_path / "many" / "seeds" / "8"
    for name in ("jobs.csv", "timeseries.csv"):
        assert (inside / name).read_bytes() == (tmp_path / "alone" / name).read_bytes(), name
    seed8 = json.loads((inside / "summary.json").read_text())
    for n in names:
        a = {k: v for k, v in alone["schedulers"][n].items() if k != "wall_s"}
        b = {k: v for k, v in seed8["schedulers"][n].items() if k != "wall_s"}
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), n
    assert many["seeds"]["completed"] == [8, 9, 10] and many["complete"] is True
    assert verify(tmp_path / "many") == []


def test_the_cli_runs_the_scenarios_seed_and_the_next_ones_each_a_run_folder():
    o = run_cli(["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet", "--seeds", "3", "--jobs", "2",
                 "--schedulers", "slurm,ray"], {"s.yaml": SMALL})
    assert o.code == 0, o.stderr
    s = o.summary
    assert s["seed"] is None and s["seeds"]["planned"] == [7, 8, 9] and s["seeds"]["completed"] == [7, 8, 9]
    assert s["seeds"]["rule"] == "the scenario's seed 7 and the next 2" and s["complete"] is True
    assert list(s["schedulers"]) == ["slurm", "ray"]
    assert "With 3 seeds no head-to-head difference can be significant" in o.stdout
    assert "| slurm | sim | " in o.stdout and "[" in o.stdout
    assert "each seed: " in o.stdout.splitlines()[-1]


def test_one_seed_keeps_the_one_seed_layout():
    o = run_cli(["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet", "--seeds", "1", "--schedulers", "slurm"],
                {"s.yaml": SMALL})
    assert o.code == 0, o.stderr
    assert o.summary["seed"] == 7 and "spread" not in o.summary and "seeds" not in o.summary


def test_an_interrupted_run_keeps_the_seeds_that_finished_and_says_which(tmp_path):
    # ~7 s a seed: the first finishes while the next two run, and the last three never start
    (tmp_path / "s.yaml").write_bytes(SMALL.replace(b"nodes: 32", b"nodes: 200").replace(b"duration_h: 0.3",
                                                                                         b"duration_h: 1.5"))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", "run", str(tmp_path / "s.yaml"), "--out", str(out),
                          "--quiet", "--seeds", "6", "--jobs", "2"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if json.loads((out / "summary.json").read_text())["seeds"]["completed"]:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    s = json.loads((out / "summary.json").read_text())
    assert p.returncode == 130, err
    assert f"partial results kept in {out}" in err
    assert s["complete"] is False and s["seeds"]["completed"] and s["seeds"]["running"] == []
    assert set(s["seeds"]["completed"]) | set(s["seeds"]["interrupted"]) <= set(s["seeds"]["planned"])
    folders = {int(d.name) for d in (out / "seeds").iterdir()}
    assert set(s["seeds"]["completed"]) <= folders <= set(s["seeds"]["completed"] + s["seeds"]["interrupted"])
    assert s["schedulers"]["kube"]["seeds"] == len(s["seeds"]["completed"])
    assert verify(out) == []


@pytest.mark.gangstorm("scenarios/evictions.yaml", nodes=300, duration_h=0.5, seeds=6, parallel=2,
                       schedulers="volcano,slurm")
def test_the_pytest_plugin_runs_seeds_and_asserts_on_the_median(gangstorm_summary):
    s = gangstorm_summary
    assert s["seeds"]["completed"] == [11, 12, 13, 14, 15, 16]        # evictions.yaml has seed: 11
    volcano = s["schedulers"]["volcano"]
    spread = volcano["spread"]["admission_p99"]
    assert volcano["admission_s"]["p99"] == spread["median"]
    assert spread["low"] <= spread["median"] <= spread["high"] and spread["n"] == 6
    assert s["significance"]["testable"] is True


# --- compare: the seed spread as the noise floor ----------------------------------------------
def over(seeds, kube):
    head = {**HEAD, "seeds": {**HEAD["seeds"], "planned": list(seeds), "completed": list(seeds)}}
    return aggregate.over_seeds(head, per_seed(seeds, kube, VOLCANO, RAY))


def kube_p99(comparison):
    from loadgen.output.compare import Row
    (row,) = [r for r in comparison.rows if (r.scheduler, r.cls, r.metric) == ("kube", "all", "admission_p99")]
    return row if isinstance(row, Row) else None


def test_compare_calls_a_change_within_the_seed_spread_worse_not_a_regression():
    from loadgen.output.compare import compare
    a = over(range(1, 9), KUBE)                                      # kube p99 10..80, median 45
    b = over(range(1, 9), lambda s: KUBE(s) + (20 if s % 2 else -5))    # 30, 15, 50, 35, ...: median 52.5, +17%
    row = kube_p99(compare(a, b, 0.10))
    assert (row.a, row.b, row.verdict) == (45.0, 52.5, "worse")
    assert (row.test, row.significant, row.seeds_a, row.seeds_b) == ("signed-rank, 8 common seeds", False, 8, 8)
    assert row.p_value == round(spread_p([20, -5] * 4), 6) == 72 / 256        # doubled ranks 5 and 13: W+ 52 of 72


def spread_p(diffs):
    from loadgen.measure.spread import wilcoxon_signed_rank
    return wilcoxon_signed_rank(diffs)


def test_compare_calls_a_change_on_every_seed_a_regression():
    from loadgen.output.compare import compare
    a = over(range(1, 9), KUBE)
    b = over(range(1, 9), lambda s: KUBE(s) * 1.2)
    c = compare(a, b, 0.10)
    row = kube_p99(c)
    assert (row.verdict, row.significant, row.p_value) == ("regression", True, round(2 / 256, 6))
    assert row in c.regressions
    assert any("a regression only when the signed-rank test on the 8 seeds both runs have" in n for n in c.notes)


def test_compare_without_common_seeds_uses_the_rank_sum_test():
    from loadgen.output.compare import compare
    a = over(range(1, 9), KUBE)
    b = over(range(11, 19), lambda s: KUBE(s - 10) * 1.2)          # other seeds, 20% worse each
    row = kube_p99(compare(a, b, 0.10))
    assert row.test == "rank-sum, 8 and 8 seeds" and row.significant is False and row.verdict == "worse"


def test_compare_with_too_few_seeds_to_test_leaves_it_to_the_tolerance():
    from loadgen.output.compare import compare, render
    a = over(range(1, 4), KUBE)
    b = over(range(1, 4), lambda s: KUBE(s) * 1.2)
    c = compare(a, b, 0.10)
    row = kube_p99(c)
    assert (row.test, row.significant, row.verdict) == ("rank-sum, 3 and 3 seeds", None, "regression")
    assert "too few seeds to test (rank-sum, 3 and 3 seeds)" in render(c)


def test_compare_of_a_run_over_seeds_with_a_one_seed_run_keeps_the_tolerance():
    from loadgen.output.compare import compare
    one = per_seed([4], KUBE, VOLCANO, RAY)[4]
    c = compare(over(range(1, 9), KUBE), one, 0.10)
    row = kube_p99(c)
    assert (row.a, row.b, row.test, row.verdict) == (45.0, 40.0, None, "better")
    assert any("the tolerance alone decides" in n for n in c.notes)


def test_compare_json_names_the_test(tmp_path):
    for name, doc in (("a", over(range(1, 9), KUBE)), ("b", over(range(1, 9), lambda s: KUBE(s) * 1.2))):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "compare", str(tmp_path / "a.json"),
                        str(tmp_path / "b.json"), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)["rows"]
    (row,) = [r for r in rows if (r["scheduler"], r["cls"], r["metric"]) == ("kube", "all", "admission_p99")]
    assert (row["test"], row["significant"], row["verdict"]) == ("signed-rank, 8 common seeds", True, "regression")


# --- report.html ------------------------------------------------------------------------------
HOSTILE = ['<script>alert("x")</script>', 'a&b "q" $x^{2}$ ]]> -- <img src=x onerror=1>']


class Page(HTMLParser):
    """Every tag, the text, the data-metric spans and the inline <svg> per section."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self.metrics, self.svgs, self.section, self._m = [], [], [], {}, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self.section = a.get("id")
        elif tag == "svg":
            self.svgs[self.section] = self.svgs.get(self.section, 0) + 1
        if "data-metric" in a:
            self._m = [a["data-metric"], a["data-value"], ""]

    def handle_data(self, data):
        self.text.append(data)
        if self._m is not None:
            self._m[2] += data

    def handle_endtag(self, tag):
        if self._m is not None and tag in ("span", "td"):
            self.metrics.append(tuple(self._m))
            self._m = None


def resolve(obj, path: str):
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def test_the_report_escapes_class_names_and_shows_medians_intervals_and_seed_dots(tmp_path):
    classes = {HOSTILE[0]: {"share": 0.9, "shapes": [{"members": 1, "gpus": 8}], "duration_s": {"median": 300}},
               HOSTILE[1]: {"share": 0.1, "shapes": [{"members": 4, "gpus": 8}], "duration_s": {"median": 600}}}
    body = SMALL.decode().split("workload:")[0] + "workload: " + json.dumps({"offered_load": 1.0, "classes": classes})
    (tmp_path / "s.yaml").write_text(body)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", str(tmp_path / "s.yaml"), "--out", str(out),
                        "--quiet", "--seeds", "6", "--jobs", "2"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    page = Page()
    page.feed((out / "report.html").read_text())
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "b", "code", "nav",
               "a", "section", "div", "table", "thead", "tbody", "tr", "th", "td", "span", "br", "figure",
               "figcaption", "footer", "ul", "li", "svg", "g", "path", "defs", "clippath", "use", "text",
               "tspan", "rect"}
    assert {t for t, _ in page.tags} <= allowed
    assert not any(k.startswith("on") for _, a in page.tags for k in a)          # no onerror= smuggled in
    text = "".join(page.text)
    for name in HOSTILE:
        assert f"class {name}" in text                                            # shown as text, whole
        assert f"| {name} | kube |" in r.stdout                                   # and in the terminal table
    assert page.svgs.get("spread") == 1 and page.svgs.get("classes") == 1
    checked = 0
    for metric, value, _shown in page.metrics:
        want = resolve(summary["schedulers"], metric)
        assert json.loads(value) == want, metric
        checked += ".spread." in metric
    assert checked > 100
    assert any(m == "kube.spread.admission_p99.values.7" for m, _, _ in page.metrics)      # the per-seed table


# --- the seed runner --------------------------------------------------------------------------
def test_each_seed_reports_every_seed_in_a_child_or_in_process():
    from loadgen.drive.seeds import each_seed
    for in_process in (False, True):
        events = []

        def work(seed, progress):
            progress("kube", 0.5)

        each_seed([3, 1, 2], work, 2,
                  lambda kind, seed, *d, events=events: events.append((kind, seed)), in_process=in_process)
        assert sorted(s for k, s in events if k == "done") == [1, 2, 3]
        assert [s for k, s in events if k == "start"] == [3, 1, 2]
        assert ("progress", 3) in events


def test_a_failing_seed_stops_the_others_and_its_error_is_raised_with_its_seed():
    from loadgen.drive.seeds import SeedsError, each_seed
    from loadgen.model.errors import UserError

    def bad_input(seed, progress):
        if seed == 2:
            raise UserError("s.yaml: fleet.nodes: expected >= 1, got 0")
        time.sleep(5)               # still running when seed 2 fails: stopped, not waited for

    events = []
    with pytest.raises(SeedsError, match=r"^seed 2: s.yaml: fleet.nodes: expected >= 1, got 0$"):
        each_seed([1, 2, 3, 4], bad_input, 2, lambda kind, seed, *d: events.append((kind, seed, *d)))
    assert not any(k == "start" and s in (3, 4) for k, s, *_ in events)        # none started after the failure

    def crash(seed, progress):
        raise ZeroDivisionError("a bug")

    with pytest.raises(RuntimeError, match=r"seed 5 failed:\n(.|\n)*ZeroDivisionError: a bug"):
        each_seed([5], crash, 1, lambda *a: None)
