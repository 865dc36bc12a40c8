"""Calibration profiles as a user meets them: shipped ones say where every value came from, a
profile file of one's own times the simulated schedulers, and every result names its profile."""
import json
import subprocess
import sys

import pytest
import yaml

from loadgen.input.profile import BUILTIN_DIR, load
from loadgen.input.scenario import from_dict
from support.paths import ROOT


def gangstorm(*args):
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("name", ["local", "reference"])
def test_shipped_profiles_hold_no_unsourced_value(name):
    prof = load(name)
    unsourced = [f"{s}.{k}" for s, keys in prof.params.items() for k, p in keys.items() if p.provenance == "unsourced"]
    assert unsourced == []
    assert all(p.source for keys in prof.params.values() for p in keys.values())


def test_every_profile_parameter_the_schema_asks_for_is_in_both_shipped_profiles():
    for name in ("local", "reference"):
        sc = from_dict({}, profile=name)       # resolving raises on a missing parameter
        assert sc.profile.name == name


def test_a_profile_file_of_ones_own_times_the_simulated_schedulers(tmp_path):
    doc = yaml.safe_load((BUILTIN_DIR / "local.yaml").read_text())
    doc["name"] = "slow-kube"
    doc["parameters"]["kube"]["cycle_base_ms"] = {"value": 500.0, "unit": "ms", "provenance": "measured",
                                                  "source": "a test", "command": "pytest"}
    doc.pop("validation", None)
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(doc))
    outs = {}
    for label, prof in (("local", "local"), ("slow", str(path))):
        r = gangstorm("run", "scenarios/baseline-3x.yaml", "--schedulers", "kube", "--nodes", "200", "--duration-h",
                      "1", "--profile", prof, "--out", str(tmp_path / label), "--quiet")
        assert r.returncode == 0, r.stderr
        outs[label] = json.loads((tmp_path / label / "summary.json").read_text())
    slow = outs["slow"]
    assert slow["profile"]["path"] == str(path)
    assert slow["schedulers"]["kube"]["model"]["calibrated"] is False      # no validation in the file
    assert "UNCALIBRATED" in (tmp_path / "slow" / "summary.md").read_text()
    assert (slow["schedulers"]["kube"]["admission_s"]["p50"]
            > outs["local"]["schedulers"]["kube"]["admission_s"]["p50"] + 0.4)


def test_a_broken_profile_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nparameters:\n  kube:\n    cycle_base_ms: {value: .nan, unit: ms, provenance: measured,"
                   " source: x, command: y}\n")
    r = gangstorm("run", "scenarios/baseline-3x.yaml", "--profile", str(bad), "--quiet")
    assert r.returncode == 2
    # the profile came from a flag: the line blames the flag, not the scenario (issue 31)
    assert r.stderr.strip().splitlines() == [
        f"gangstorm: error: --profile {bad}: parameters.kube.cycle_base_ms.value: "
        "expected a finite number in [0, 1e+09], got nan"]


def test_a_result_quotes_its_held_out_error_in_one_line():
    from loadgen.output.markdown import held_out_text
    cases = {"cases": "calibrate-steady-128n, calibrate-evictions-64n", "real_runs_per_case": 3,
             "p50_ratio": [1.225, 1.236], "p99_ratio": [0.93, 1.301], "p999_ratio": None,
             "util_diff_pp": [0.27, 2.82], "within_goal": False}
    assert held_out_text(cases) == ("held out calibrate-steady-128n, calibrate-evictions-64n (3 real runs each), "
                                    "real/sim p50 1.225 to 1.236, p99 0.93 to 1.301, util 0.27 to 2.82 pp; "
                                    "OUTSIDE the goal band (ratios 0.8-1.25, util 3 pp)")
    anchor = {"anchors": "ray-100-groups-20-bundles", "ratio": [1.03, 1.03], "within_goal": True}
    assert held_out_text(anchor) == ("held-out published figure ray-100-groups-20-bundles, published/sim 1.03; "
                                     "within the goal band (ratios 0.8-1.25, util 3 pp)")


def test_an_outside_validation_prints_its_measured_reason_beside_the_verdict():
    from loadgen.output.markdown import held_out_text
    err = {"anchors": "slurm-execute-500-jobs-per-s", "ratio": [6.458, 6.458], "within_goal": False,
           "because": "slurm-execute-500-jobs-per-s: the cadence sets the rate"}
    assert held_out_text(err) == ("held-out published figure slurm-execute-500-jobs-per-s, published/sim 6.458; "
                                  "OUTSIDE the goal band (ratios 0.8-1.25, util 3 pp), because "
                                  "slurm-execute-500-jobs-per-s: the cadence sets the rate")


def test_an_uncalibrated_scheduler_says_why_when_the_profile_knows(tmp_path):
    prof = load("reference")
    prof.validation["kueue"] = {"uncalibrated_because": "no published figure; held out here once"}
    assert prof.status("kueue")["note"] == "uncalibrated: no published figure; held out here once"
    prof.validation.pop("kueue")
    assert prof.status("kueue")["note"] == "uncalibrated: profile 'reference' has no held-out validation for kueue"


@pytest.mark.parametrize("entry, where", [
    ({"uncalibrated_because": 3}, "validation.kueue.uncalibrated_because"),
    ({"held_out": {"anchors": "a", "ratio": [1.0, 1.0], "within_goal": True, "because": ["x"]}},
     "validation.kueue.held_out.because"),
])
def test_a_reason_that_is_not_text_is_one_line_naming_the_field(tmp_path, entry, where):
    path = tmp_path / "p.yaml"
    raw = yaml.safe_load((BUILTIN_DIR / "reference.yaml").read_text())
    raw["validation"] = {"kueue": entry}
    path.write_text(yaml.safe_dump(raw))
    r = gangstorm("run", "scenarios/baseline-3x.yaml", "--profile", str(path), "--quiet")
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"gangstorm: error: --profile {path}: {where}: expected a string, got ")
