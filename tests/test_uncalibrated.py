"""Why a gang twin is uncalibrated in a profile fitted to published figures: the reason is built from
the donor's anchors in that profile and the twin's held-out runs here (loadgen/calibration/uncalibrated.py)."""
import json

from loadgen.calibration.anchors import _by_name, table
from loadgen.calibration.uncalibrated import add_reasons, reason
from loadgen.input.profile import Profile, load

KUBE_ANCHORS = [
    {"anchor": "perf-fit", "role": "fit", "unit": "pods/s", "published": 600.0, "sim": 640.0, "ratio": 0.938},
    {"anchor": "big-run", "role": "held_out", "unit": "pods/s", "published": 300.0, "sim": 240.0, "ratio": 1.25},
    {"anchor": "ci-floor", "role": "floor", "unit": "pods/s", "published": 270.0, "sim": 640.0, "ratio": 0.42},
]
GANG_HELD_OUT = {"cases": "gangs-heldout", "real_runs_per_case": 1, "p50_ratio": [0.312, 0.312],
                 "p99_ratio": [1.0, 1.2], "p999_ratio": None, "util_diff_pp": [-1.28, -1.28], "within_goal": False}


def _profiles():
    ref = Profile("ref", "ref.yaml", "", {}, {"kube": {"anchors": KUBE_ANCHORS, "held_out": {
        "anchors": "big-run", "ratio": [1.25, 1.25], "within_goal": True}}})
    local = Profile("local", "local.yaml", "", {}, {"kube-gang": {"held_out": GANG_HELD_OUT}})
    return ref, local


def test_a_gang_twin_quotes_the_donors_anchors_and_its_own_held_out_run(tmp_path):
    ref, local = _profiles()
    assert reason("kube-gang", ref, local, tmp_path) == (
        "no published benchmark runs kube-scheduler's gangs (scheduler_perf in kubernetes v1.36.1 has no workload "
        "with a Workload or PodGroup); its per-pod costs are kube's, whose anchors give published/sim 0.938 "
        "(perf-fit, fit), 1.25 (big-run, held out); held out against the real scheduler on this machine class in "
        "profile local (gangs-heldout, 1 real run): real/sim p50 0.312, p99 1 to 1.2, util -1.28 pp, OUTSIDE the "
        "goal band")


def test_a_gang_twin_never_run_against_its_scheduler_says_so(tmp_path):
    ref, local = _profiles()
    assert reason("coscheduling", ref, local, tmp_path).endswith(
        "; no held-out run against the real scheduler in profile local")


def test_kueue_quotes_its_held_out_file_or_the_command_that_writes_it(tmp_path):
    ref, local = _profiles()
    assert reason("kueue", ref, local, tmp_path).endswith(
        "; no held-out run against the real Kueue (results/kueue/heldout/fidelity.json is missing: "
        "PYTHONPATH=. python tools/kueue/fidelity.py)")
    path = tmp_path / "results/kueue/heldout/fidelity.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"real": {"jobs": 19}, "real_over_sim": {"admission_p50_s": 0.928,
                                                                         "admission_p99_s": 1.046},
                                "util_diff_pp": 2.5}))
    assert reason("kueue", ref, local, tmp_path).endswith(
        "; held out against the real Kueue on this machine class once (PYTHONPATH=. python tools/kueue/fidelity.py, "
        "19 jobs): real/sim p50 0.928, p99 1.046, util 2.5 pp, within the goal band")


def test_reasons_go_only_to_uncalibrated_gang_twins_of_a_donor_just_validated(tmp_path):
    ref, local = _profiles()
    assert add_reasons(ref, local, tmp_path, ["volcano"]) == {}
    ref.validation["coscheduling"] = {"held_out": GANG_HELD_OUT}          # calibrated: kept as it is
    ref.validation["kueue"] = {"uncalibrated_because": "stale"}           # rewritten
    written = add_reasons(ref, local, tmp_path, ["kube", "slurm"])
    assert sorted(written) == ["kube-gang", "kueue"]
    assert ref.validation["coscheduling"] == {"held_out": GANG_HELD_OUT}
    assert ref.validation["kueue"]["uncalibrated_because"].startswith("Kueue publishes no throughput")


def test_an_anchor_outside_the_band_carries_its_measured_reason_and_one_inside_none():
    rows = table(load("reference"), [_by_name("slurm-execute-500-jobs-per-s"), _by_name("ray-100-groups-20-bundles")])
    slurm, ray = rows
    assert slurm["ratio"] == 6.458
    assert slurm["outside_because"] == (
        "at Slurm's default scheduler settings the scheduling cadence, not the CPU, sets the execution rate: here "
        "the real slurmctld executed 32.59 jobs/s on 500 nodes using 5.98 CPU-s in 31.7 s "
        "(results/fidelity-scale/slurm/bench-burst-execute-500n.json), and the twin with slurmctld's costs 1,000x "
        "smaller executes 164 jobs/s, so 500/s needs settings the page does not name")
    assert 0.8 <= ray["ratio"] <= 1.25 and "outside_because" not in ray


def test_the_shipped_reference_quotes_todays_reasons():
    from loadgen.calibration.anchors import ROOT
    ref = load("reference")
    [slurm] = table(ref, [_by_name("slurm-execute-500-jobs-per-s")])
    assert ref.validation["slurm"]["held_out"]["because"] == f"slurm-execute-500-jobs-per-s: {slurm['outside_because']}"
    for s in ("kube-gang", "coscheduling", "kueue"):
        assert ref.validation[s]["uncalibrated_because"] == reason(s, ref, load("local"), ROOT), s


def test_kueue_quotes_its_own_benchmark_run_here_beside_the_published_averages(tmp_path):
    ref, local = _profiles()
    head = "Kueue publishes no throughput figure, and the twin does not run Kueue's own scalability test yet"
    assert reason("kueue", ref, local, tmp_path).startswith(
        f"{head} (tools/kueue/perf.sh runs it with the real Kueue);")
    path = tmp_path / "results/kueue/perf-baseline/summary.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("workloadClasses:\n  large: {averageTimeToAdmissionMs: 23738}\n"
                    "  medium: {averageTimeToAdmissionMs: 80975}\n  small: {averageTimeToAdmissionMs: 219378}\n")
    assert reason("kueue", ref, local, tmp_path).startswith(
        f"{head}: with the real Kueue v0.19.2 here (tools/kueue/perf.sh) its average times to admission were "
        "23.7 / 81.0 / 219.4 s (large / medium / small) against its release's CI averages of 16.5 / 76.8 / 215.5 s; "
        "its per-pod costs are kube's")
