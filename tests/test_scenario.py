"""Scenario validation: every user error is one line naming file, field and expectation."""
import subprocess
import sys

import pytest

from loadgen.input.scenario import ScenarioError, from_dict, load
from support.paths import ROOT


@pytest.mark.parametrize("body,field,expect", [
    ("fleet: {nodez: 10}\n", "fleet.nodez", "unknown key"),
    ("fleet: {nodes: many}\n", "fleet.nodes", "expected an integer"),
    ("fleet: {nodes: 0}\n", "fleet.nodes", "expected >= 1"),
    ("workload: {churn_multiplier: true}\n", "workload.churn_multiplier", "expected a number"),
    ("schedulers: {kube: {scoring: best}}\n", "schedulers.kube.scoring", "expected one of"),
    ("chaos: [{kind: meteor}]\n", "chaos[0].kind", "expected one of"),
    ("workload: {classes: {a: {share: 0.5, shapes: [{members: 1, gpus: 1}], duration_s: {median: 60}}}}\n",
     "workload.classes", "summing to 1"),
    ("workload: {classes: {a: {share: 1, shapes: [{members: 1, gpus: 16}], duration_s: {median: 60}}}}\n",
     "workload.classes.a.shapes[0].gpus", "expected <= fleet.gpus_per_node"),
    ("seed: 1\nfleet: [1, 2]\n", "fleet", "expected a mapping"),
])
def test_bad_field_names_file_field_and_expectation(scenario_file, body, field, expect):
    path = scenario_file(body)
    with pytest.raises(ScenarioError) as e:
        load(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {field}: ")
    assert expect in msg
    assert "\n" not in msg


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load(tmp_path / "nope.yaml")


def test_invalid_yaml_names_line(scenario_file):
    with pytest.raises(ScenarioError, match=r"s.yaml: line 3: not valid YAML"):
        load(scenario_file("seed: 1\nfleet: {nodes: [\n"))


def test_defaults_fill_every_section():
    sc = from_dict({})
    assert sc.data["fleet"]["nodes"] == 10_000
    assert sc.data["workload"]["churn_multiplier"] == 3.0
    assert sc.data["schedulers"]["kube"]["api_qps"] == 50.0
    assert sc.data["schedulers"]["kube"]["api_burst"] == 100
    assert sc.data["control_plane"]["etcd_quota_bytes"] == 2 * 1024**3
    assert set(sc.data["workload"]["classes"]) == {"small", "large"}


def test_overrides_are_revalidated():
    sc = from_dict({})
    assert sc.with_overrides(**{"fleet.nodes": 64}).data["fleet"]["nodes"] == 64
    with pytest.raises(ScenarioError, match="fleet.nodes: expected >= 1"):
        sc.with_overrides(**{"fleet.nodes": -3})


@pytest.mark.parametrize("name", ["baseline-3x", "fragmentation", "evictions", "etcd-quota", "api-qps", "scale-100k"])
def test_shipped_scenarios_validate(name):
    load(ROOT / "scenarios" / f"{name}.yaml")


@pytest.mark.parametrize("args,needle", [
    (["run", "{bad}"], "fleet.nodes: expected >= 1, got 0"),
    (["run", "{missing}"], "no such scenario file"),
    (["run", "scenarios/baseline-3x.yaml", "--schedulers", "kube,borg"], "--schedulers: expected"),
    (["run", "scenarios/baseline-3x.yaml", "--nodes", "-5"], "--nodes: expected a positive integer"),
    (["run", "scenarios/baseline-3x.yaml", "--trace", "{missing}"], "no such trace file"),
    (["trace", "show", "{badtrace}"], "line 2: members: expected >= 1"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet: {nodes: 0}\n")
    badtrace = tmp_path / "t.jsonl"
    badtrace.write_text('{"gangstorm_trace": 1}\n{"id": 1, "members": 0, "gpus_per_member": 8, '
                        '"duration_s": 5, "submit_s": 0}\n')
    args = [a.format(bad=bad, missing=tmp_path / "missing.yaml", badtrace=badtrace) for a in args]
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args, "--quiet"] if args[0] == "run" else
                       [sys.executable, "-m", "loadgen.cli.main", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
