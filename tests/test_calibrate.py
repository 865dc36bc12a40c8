"""gangstorm calibrate end to end, against a stand-in "real" backend: the simulated Slurm itself
running on the wall clock. Its twin (the same model on virtual time) differs only by what the
wall clock adds (the runner's polling), which the fit must absorb; the pipeline must cache real
runs, write a profile whose fitted values say where they came from, and validate on held-out cases."""
import json

import pytest

from fakes.slurm.sim import SimSlurm
from loadgen.calibration.calibrate import Options, calibrate
from loadgen.input.profile import load
from loadgen.model.registry import REGISTRY, register
from support.paths import ROOT


class WallSlurm(SimSlurm):
    backend = "wallsim"
    timebase = "wall"


# The whole run is compressed into seconds of wall time; Slurm's own timers (batch_sched_delay,
# the background tick, backfill) are wall seconds, as on the real backend, so they are shortened.
FAST = ("schedulers:\n  slurm: {batch_sched_delay_s: 0.05, background_tick_s: 0.05, bf_interval_s: 1, "
        "sched_interval_s: 1, cred_expire_s: 0.5}\n")


def fast(path, out):
    dst = out / path.name
    dst.write_text(path.read_text() + FAST)
    return str(dst)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    if ("slurm", "wallsim") not in REGISTRY:
        register("slurm", "wallsim", "test_calibrate:WallSlurm")
    out = tmp_path_factory.mktemp("calibration")
    scen = tmp_path_factory.mktemp("scenarios")
    opts = Options(schedulers=["slurm"], repeats=2, backend="wallsim",
                   scenarios=[fast(ROOT / "scenarios/calibrate-steady.yaml", scen),
                              fast(ROOT / "scenarios/calibrate-queue.yaml", scen)],
                   scales={"slurm": [16, 32]}, held_out_scale={"slurm": 48},
                   held_out_scenario=fast(ROOT / "scenarios/calibrate-evictions.yaml", scen), time_scale=600.0,
                   out_dir=out,
                   command="gangstorm calibrate --schedulers slurm (test)")
    lines = []
    result = calibrate(opts, progress=lines.append)
    return out, opts, result, lines


def test_every_case_runs_repeatedly_and_is_kept_for_reuse(calibrated):
    out, opts, result, lines = calibrated
    runs = sorted(p.parent.parent.name for p in (out / "slurm" / "real").glob("*/run*/summary.json"))
    assert runs == sorted(["calibrate-steady-16n", "calibrate-steady-32n", "calibrate-queue-16n", "calibrate-queue-32n",
                           "calibrate-steady-48n", "calibrate-evictions-32n"] * 2)
    assert not [line for line in lines if "reused" in line]
    again = calibrate(opts, progress=lines.append)
    assert len([line for line in lines if "reused" in line]) == 12
    assert again["results"][0]["fitted"] == result["results"][0]["fitted"]     # deterministic fit


def test_an_interrupted_run_is_redone_from_scratch(calibrated):
    out, opts, _, _ = calibrated
    run = out / "slurm" / "real" / "calibrate-queue-16n" / "run2"
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "complete": False}))
    (run / "stale-cluster-state").write_text("left by the interrupted run")
    lines = []
    calibrate(opts, progress=lines.append)
    assert [line for line in lines if "real backend" in line] == ["slurm calibrate-queue-16n run 2/2: real backend ..."]
    assert json.loads((run / "summary.json").read_text())["complete"]
    assert not (run / "stale-cluster-state").exists()


def test_the_written_profile_says_what_was_fitted_and_validates_on_held_out_cases(calibrated):
    out, opts, result, _ = calibrated
    prof = load(result["profile"])
    fitted = [(s, k) for s, keys in prof.params.items() for k, p in keys.items() if p.provenance == "fitted"]
    assert ("slurm", "observe_ms") in fitted
    # every fitted value names the command that fitted it; this run's are gangstorm calibrate's
    # (the gang twins' are fitted by loadgen.calibration.gangcosts, from make fidelity-gangs)
    assert all(prof.params[s][k].command.startswith(("gangstorm calibrate", "python -m loadgen.calibration."))
               for s, k in fitted)
    assert all(prof.params[s][k].command.startswith("gangstorm calibrate") for s, k in fitted if s == "slurm")
    assert prof.calibrated("slurm")
    # a scheduler this run did not calibrate keeps the starting profile's values and validation
    assert prof.validation.get("kube") == load("local").validation.get("kube")
    assert prof.params["kube"] == load("local").params["kube"]
    held = prof.validation["slurm"]["held_out"]
    assert held["cases"] == "calibrate-steady-48n, calibrate-evictions-32n" and held["real_runs_per_case"] == 2
    doc = json.loads((out / "calibration.json").read_text())
    assert [r["role"] for r in doc["schedulers"]["slurm"]["rows"]].count("held_out") == 2
    assert "| slurm case |" in (out / "fidelity.md").read_text()


def test_the_twin_of_the_model_itself_comes_out_close(calibrated):
    _, _, result, _ = calibrated
    for r in result["results"][0]["rows"]:
        assert abs(r["util_diff_pp"]) < 3, r


def test_validate_only_keeps_the_fitted_values_and_rewrites_the_validation(calibrated, tmp_path):
    # a model change after the fit: the fitted observe_ms stays, the held-out rows are recomputed
    out, opts, result, _ = calibrated
    start = load(result["profile"])
    again = calibrate(Options(**{**opts.__dict__, "validate_only": True, "write_profile": tmp_path / "p.yaml",
                                 "base_profile": str(result["profile"])}), progress=lambda line: None)
    r = again["results"][0]
    assert r["fitted"] == {} and r["fit_evaluations"] == 1
    prof = load(str(tmp_path / "p.yaml"))
    assert prof.params["slurm"]["observe_ms"] == start.params["slurm"]["observe_ms"]
    assert prof.validation["slurm"]["held_out"] == r["held_out"]
