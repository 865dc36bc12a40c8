"""report.html with hostile names: every class, tenant, scheduler and column name from a trace or a
run folder is escaped, ids included, and a `$...$` name is text, not mathtext. The page is parsed
(html.parser) to prove no script element and no script attribute got in. And a trace with a class
per job gives a page whose work is bounded by the classes it draws, not by how many there are."""
from __future__ import annotations

import csv
import io
import json

from support.fuzzkit import run_cli
from support.htmlcheck import assert_no_script, parse

SCENARIO = (b"name: hostile\nduration_h: 0.2\ndrain_h: 0.1\nwarmup_h: 0\nsample_every_s: 60\n"
            b"fleet: {nodes: 16, leaf_size: 4}\n")
HOSTILE = ['x"/><script>alert(1)</script><g id="y', "$x^$", "<img src=x onerror=alert(1)>", "a\\1b", "&amp;<",
           "</svg><script>alert(2)</script>", "$\\frac{1}{$", "'-- ;", "javascript:alert(3)"]
def trace(classes: list[str], tenants: list[str]) -> bytes:
    lines = ['{"gangstorm_trace": 1}']
    for i in range(48):
        lines.append(json.dumps({"id": i, "members": 1 + (i % 2), "gpus_per_member": 8, "duration_s": 300.0,
                                 "submit_s": 10.0 * i, "cls": classes[i % len(classes)],
                                 "tenant": tenants[i % len(tenants)]}))
    return ("\n".join(lines) + "\n").encode()


def test_hostile_class_and_tenant_names_are_text_in_the_page():
    o = run_cli(["run", "{dir}/s.yaml", "--trace", "{dir}/t.jsonl", "--schedulers", "slurm,kube", "--out", "{dir}/out",
                 "--quiet"], {"s.yaml": SCENARIO, "t.jsonl": trace(HOSTILE, HOSTILE)},
                keep=lambda sandbox: (sandbox / "out" / "report.html").read_text())
    assert o.code == 0, o.stderr
    page = parse(o.kept)
    assert_no_script(page)
    shown = {a["data-class"] for _, a in page.tags if "data-class" in a}
    assert set(HOSTILE) <= shown                  # each class's panel, its name intact once unescaped
    text = "".join(page.text)
    assert "class $x^$" in text and "Admission CDF: class $x^$" in text     # the figure title, as text
    assert sum(1 for t, _ in page.tags if t == "svg") >= 1 + len(HOSTILE)


def hostile_folder(sandbox):
    """The run folder with the scheduler kube renamed, a hostile control-plane column and chaos kind."""
    bad = 'k"><script>alert(4)</script>$x$'
    d = sandbox / "out"
    s = json.loads((d / "summary.json").read_text())
    s["schedulers"] = {bad if n == "kube" else n: r for n, r in s["schedulers"].items()}
    s["files"]["jobs.csv"] = {bad if n == "kube" else n: c for n, c in s["files"]["jobs.csv"].items()}
    s["files"]["timeseries.csv"] = {bad if n == "kube" else n: c for n, c in s["files"]["timeseries.csv"].items()}
    s["chaos"] = [{"t": 60.0, "kind": "$evil$<script>"}]
    (d / "summary.json").write_text(json.dumps(s))
    for name in ("jobs.csv", "timeseries.csv"):
        rows = list(csv.reader(io.StringIO((d / name).read_text())))
        if name == "timeseries.csv":
            rows[0].append("cp_$oops$<b onclick=x>_total")
            rows[1:] = [r + [str(i)] for i, r in enumerate(rows[1:])]
        rows[1:] = [[bad if r[0] == "kube" else r[0], *r[1:]] for r in rows[1:]]
        buf = io.StringIO()
        csv.writer(buf).writerows(rows)
        (d / name).write_text(buf.getvalue())
    from loadgen.output.html import build
    return build(d).read_text(), bad


def test_a_run_folder_with_hostile_names_still_makes_a_safe_page():
    o = run_cli(["run", "{dir}/s.yaml", "--trace", "{dir}/t.jsonl", "--schedulers", "slurm,kube", "--out", "{dir}/out",
                 "--quiet"], {"s.yaml": SCENARIO, "t.jsonl": trace(["small"], ["t"])}, keep=hostile_folder)
    assert o.code == 0, o.stderr
    html, bad = o.kept
    page = parse(html)
    assert_no_script(page)
    assert bad in "".join(page.text)


def test_a_class_per_job_draws_a_bounded_page_and_says_so():
    """3,000 jobs, 3,000 classes: the page draws the CDFs of the 12 largest classes, tabulates 60,
    and says how many there are; summary.json keeps every class."""
    from loadgen.output.html.page import MAX_CLASS_FIGURES, MAX_CLASSES
    lines = ['{"gangstorm_trace": 1}'] + [json.dumps({"id": i, "members": 1, "gpus_per_member": 1, "duration_s": 60.0,
                                                      "submit_s": 0.5 * i, "cls": f"c{i:04d}"}) for i in range(3000)]
    scenario = SCENARIO.replace(b"{nodes: 16, leaf_size: 4}", b"{nodes: 64}")

    def look(sandbox):
        d = sandbox / "out"
        return (d / "report.html").read_text(), len(json.loads((d / "summary.json").read_text())["schedulers"]["slurm"]
                                                    ["by_class"])
    o = run_cli(["run", "{dir}/s.yaml", "--trace", "{dir}/t.jsonl", "--schedulers", "slurm", "--out", "{dir}/out",
                 "--quiet"], {"s.yaml": scenario, "t.jsonl": ("\n".join(lines) + "\n").encode()}, keep=look)
    assert o.code == 0, o.stderr
    html, classes = o.kept
    assert classes == 3000
    page = parse(html)
    cdfs = [a for t, a in page.tags if t == "svg" and a.get("data-figure", "").startswith("cdf-")]
    assert len(cdfs) == 1 + MAX_CLASS_FIGURES                      # all jobs + the 12 largest classes
    panels = [a for t, a in page.tags if t == "div" and a.get("class") == "panel"]
    assert len(panels) == 1 + MAX_CLASSES
    assert "3,000 job classes: this page shows the 60 with the most jobs in tables and draws the CDFs of the 12 " \
           "largest" in "".join(page.text)
