"""gangstorm sweep: a spec refused in one exact line, a grid run to exactly its cells with an index,
a sweep killed (its whole process group, kill -9) and rerun that ends with every cell complete
exactly once, and the report drawing p99 against churn from summary.json."""
import json
import os
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from loadgen.output.storage import verify
from loadgen.output.sweep import cell_problems, read_index
from support.fuzzkit import run_cli
from support.paths import ROOT

SMALL = (b"name: t\nduration_h: 0.2\ndrain_h: 0.05\nwarmup_h: 0\nfleet: {nodes: 16}\n"
         b"workload: {classes: {small: {share: 1, shapes: [{members: 2, gpus: 8}], duration_s: {median: 300}}}}\n")
BASELINE = str(ROOT / "scenarios" / "baseline-3x.yaml")


def sweep(spec: bytes, *flags: str, files=None):
    return ["sweep", "{dir}/sw.yaml", "--out", "{dir}/out", "--quiet", *flags], {"sw.yaml": spec, "s.yaml": SMALL,
                                                                                   **(files or {})}


CASES = {
    "no-scenarios": (sweep(b"schedulers: [kube]\n"),
                     "{dir}/sw.yaml: scenarios: is required (a list of scenario files, relative to this file)"),
    "unknown-key": (sweep(b"scenarios: [s.yaml]\nchurns: [1]\n"),
                    "{dir}/sw.yaml: churns: unknown key (known: name, description, scenarios, schedulers, churn, "
                    "profiles, nodes, seeds, set)"),
    "churn-range": (sweep(b"scenarios: [s.yaml]\nchurn: [3, 0]\n"), "{dir}/sw.yaml: churn[1]: expected >= 0.01, got 0"),
    "churn-as-text": (sweep(b"scenarios: [s.yaml]\nchurn: 1e3\n"),
                      "{dir}/sw.yaml: churn[0]: expected a number, got the text '1e3' (YAML reads 1e3 as text; "
                      "write 1.0e+3 or the plain number)"),
    "value-twice": (sweep(b"scenarios: [s.yaml]\nnodes: [200, 200]\n"),
                    "{dir}/sw.yaml: nodes[1]: expected each value once, got 200 twice"),
    "unknown-scheduler": (sweep(b"scenarios: [s.yaml]\nschedulers: [yarn]\n"),
                          "{dir}/sw.yaml: schedulers[0]: expected one of kube, volcano, ray, slurm, kube-gang, "
                          "coscheduling, kueue, got 'yarn'"),
    "no-seeds": (sweep(b"scenarios: [s.yaml]\nseeds: 0\n"),
                 "{dir}/sw.yaml: seeds: expected a count 1 to 60 (each scenario's seed and the next ones) or a list "
                 "of distinct seeds, got 0"),
    "empty-axis": (sweep(b"scenarios: [s.yaml]\nprofiles: []\n"),
                   "{dir}/sw.yaml: profiles: expected at least one value (leave the key out for the scenario's own)"),
    "set-an-axis": (sweep(b"scenarios: [s.yaml]\nnodes: [200]\nset: {fleet.nodes: 3}\n"),
                    "{dir}/sw.yaml: set.fleet.nodes: the nodes axis varies it already; give its values there"),
    "set-out-of-range": (sweep(b"scenarios: [s.yaml]\nset: {duration_h: 0}\n"),
                         "{dir}/sw.yaml: set.duration_h: expected >= 0.0001, got 0 (duration_h)"),
    "no-scenario-file": (sweep(b"scenarios: [nope.yaml]\n"),
                         "{dir}/sw.yaml: scenarios[0]: no such scenario file '{dir}/nope.yaml' (paths are relative "
                         "to the spec file)"),
    "bad-scenario-file": (sweep(b"scenarios: [s.yaml]\n", files={"s.yaml": SMALL + b"duration_h: 5\n"}),
                          "{dir}/s.yaml: line 7: duplicate key 'duration_h' (first on line 2)"),
    "no-profile": (sweep(b"scenarios: [s.yaml]\nprofiles: [nope]\n"),
                   f"{{dir}}/sw.yaml: profiles[0]: {ROOT}/fakes/profiles/nope.yaml: no such profile (shipped: local, "
                   "reference; or give a path)"),
    "gang-never-fits": (sweep(b"scenarios: [s.yaml]\nnodes: [16, 1]\n"),
                        "{dir}/sw.yaml: scenarios: {dir}/s.yaml: workload.classes.small.shapes[0]: a gang of 2 x 8 "
                        "GPUs never fits fleet.nodes 1 x 8 GPUs; expected gangs that fit (drop the shape or raise "
                        "fleet.nodes / --nodes) (in the cell s.yaml, profile reference, nodes 1, churn 3, seed 1)"),
    "too-many-cells": (sweep(b"scenarios: [s.yaml]\nschedulers: [kube, slurm]\nseeds: 60\nchurn: [1, 2, 3, 4, 5]\n"
                             b"nodes: [16, 17, 18, 19, 20, 21, 22, 23, 24]\n"),
                       "{dir}/sw.yaml: expected at most 5,000 cells (scenarios x schedulers x seeds x churn x "
                       "profiles x nodes), got 5,400; split the grid into several sweeps"),
    "empty-spec": (sweep(b"# nothing\n"), "{dir}/sw.yaml: is empty; expected a sweep spec mapping with at least "
                                          "`scenarios:` (see docs/sweep.md)"),
    "duplicate-key": (sweep(b"scenarios: [s.yaml]\nscenarios: [s.yaml]\n"),
                      "{dir}/sw.yaml: line 2: duplicate key 'scenarios' (first on line 1)"),
    "jobs-zero": (sweep(b"scenarios: [s.yaml]\n", "--jobs", "0"),
                  "--jobs: expected a positive integer (cells at once), got '0'"),
    "jobs-with-ray": (sweep(b"scenarios: [s.yaml]\n", "--jobs", "2", "--ray-address", "127.0.0.1:1"),
                      "--jobs: not used with --ray-address (Ray runs as many cells at once as the cluster has CPUs)"),
    "remote-ray": (sweep(b"scenarios: [s.yaml]\n", "--ray-address", "10.1.2.3:6379"),
                   "--ray-address: expected an address on 127.0.0.0/8, got '10.1.2.3' (pass --allow-remote to load "
                   "a cluster on another machine)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_spec_is_one_exact_line_and_exit_2_with_nothing_written(case):
    (argv, files), want = CASES[case]
    seen = {}
    o = run_cli(argv, files, keep=lambda d: seen.setdefault("dir", str(d)))
    assert o.code == 2, o.stderr
    assert o.stderr.strip().splitlines() == [f"gangstorm: error: {want.replace('{dir}', seen['dir'])}"]
    assert not o.out.exists()


def test_a_ray_address_that_does_not_answer_is_one_line_before_anything_is_written():
    o = run_cli(*sweep(b"scenarios: [s.yaml]\n", "--ray-address", "127.0.0.1:1"), codes=(1,))
    assert o.stderr.strip().splitlines() == ["gangstorm: error: --ray-address 127.0.0.1:1: no Ray GCS answers "
                                             "there (Connection refused)"]
    assert not o.out.exists()


GRID = (b"name: grid\nscenarios: [s.yaml]\nschedulers: [kube, slurm]\nseeds: 2\nchurn: [1, 4]\n"
        b"nodes: [16, 24]\n")


def test_a_grid_runs_exactly_its_cells_each_a_run_folder_listed_in_the_index(tmp_path):
    o = run_cli(*sweep(GRID, "--jobs", "2"), keep=lambda d: (read_index(d / "out"), json.loads(
        (d / "out" / "summary.json").read_text()), sorted(p.name for p in (d / "out" / "cells").iterdir()),
        [verify(d / "out" / "cells" / p.name) for p in (d / "out" / "cells").iterdir()],
        (d / "out" / "report.html").read_text()))
    assert o.code == 0, o.stderr
    index, summary, folders, problems, page = o.kept
    assert len(index) == 2 * 2 * 2 * 2 == len(folders) == summary["cells"]["planned"] == summary["cells"]["done"]
    assert [e["cell"] for e in index] == list(range(16)) and {e["status"] for e in index} == {"done"}
    assert sorted(e["dir"].removeprefix("cells/") for e in index) == folders
    assert {(e["scheduler"], e["seed"], e["churn"], e["nodes"]) for e in index} == {
        (s, seed, c, n) for s in ("kube", "slurm") for seed in (1, 2) for c in (1.0, 4.0) for n in (16, 24)}
    assert index[0]["dir"] == "cells/0000-t-kube-x1-s1-reference-n16" and index[0]["executor"] == "local"
    assert problems == [[]] * 16 and all(len(e["digest"]) == 64 for e in index)
    assert summary["complete"] is True and len(summary["groups"]) == 8
    g = next(g for g in summary["groups"] if (g["scheduler"], g["churn"], g["nodes"]) == ("slurm", 4.0, 24))
    p99 = g["figures"]["admission_p99"]
    assert g["seeds"] == [1, 2] and p99["n"] == 2 and p99["low"] <= p99["median"] <= p99["high"]
    assert sorted(p99["values"]) == [p99["low"], p99["high"]]
    # the page draws p99 against churn and prints the figures summary.json holds
    assert 'data-figure="sweep-0-admission_p99"' in page and 'data-figure="sweep-1-admission_p99"' in page
    i = summary["groups"].index(g)
    assert metrics(page)[f"groups.{i}.figures.admission_p99.median"] == p99["median"]
    assert "| slurm | 4 | 2/2 |" in o.stdout


class Metrics(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-metric" in a:
            self.found[a["data-metric"]] = json.loads(a["data-value"])


def metrics(page: str) -> dict:
    p = Metrics()
    p.feed(page)
    return p.found


def test_rerunning_with_the_same_out_but_another_grid_is_refused():
    o = run_cli(*sweep(b"scenarios: [s.yaml]\nseeds: 2\n"),
                keep=lambda d: _rerun(d, b"scenarios: [s.yaml]\nseeds: 3\n"))
    assert o.code == 0, o.stderr
    code, err = o.kept
    # the scenario's four schedulers x 2 seeds there, x 3 seeds here
    assert code == 2 and err.strip().splitlines() == ["gangstorm: error: --out out: holds another sweep (8 "
                                                      "cells there, 12 in this spec); rerun its own spec to resume it, "
                                                      "or choose another --out"]


def _rerun(d: Path, spec: bytes) -> tuple[int, str]:
    (d / "sw.yaml").write_bytes(spec)
    p = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "sweep", "sw.yaml", "--out", "out", "--quiet"],
                       cwd=d, env=_env(), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


# 16 cells of about half a second to a second each, one at a time: the kill lands mid-sweep
KILLED = (f"name: killed\nscenarios: [{BASELINE}]\nschedulers: [kube, slurm]\nchurn: [3, 6]\nseeds: 4\n"
          f"nodes: [400]\nset: {{duration_h: 1.5}}\n")


def _complete(out: Path) -> dict[str, tuple]:
    """Cell folders that check out, with what a rerun would change (run id, cell.json's inode and mtime)."""
    done = {}
    index = {e["dir"]: e for e in read_index(out)}
    for d, e in index.items():
        folder = out / d
        if not cell_problems(folder, e["fingerprint"]):
            st = (folder / "cell.json").stat()
            done[d] = (json.loads((folder / "summary.json").read_text())["run_id"], st.st_ino, st.st_mtime_ns)
    return done


def test_a_sweep_killed_with_its_process_group_resumes_and_ends_with_every_cell_complete_exactly_once(tmp_path):
    (tmp_path / "k.yaml").write_text(KILLED)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "loadgen.cli.main", "sweep", "k.yaml", "--out", "out", "--jobs", "1"]
    p = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            try:
                if sum(e["status"] == "done" for e in read_index(out)) >= 3:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)             # the gangstorm process and every cell it forked
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == -signal.SIGKILL
    before = _complete(out)
    assert 3 <= len(before) < 16, "the kill did not land mid-sweep"
    r = subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"16 cells; {len(before)} complete from before, {16 - len(before)} to run" in r.stderr
    ran = [line for line in r.stderr.splitlines() if line.startswith("  cell ")]
    assert len(ran) == 16 - len(before) and all(line.split()[1] not in " ".join(before) for line in ran)
    after = _complete(out)
    assert len(after) == 16 and {d: after[d] for d in before} == before      # kept cells untouched
    index = read_index(out)
    assert sorted(e["cell"] for e in index) == list(range(16)) and {e["status"] for e in index} == {"done"}
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(e["dir"].removeprefix("cells/") for e in index)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["resumed"] == {"skipped": len(before), "ran": 16 - len(before)}
    assert all(len(g["seeds"]) == 4 for g in summary["groups"])
