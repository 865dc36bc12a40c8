"""Fakelets calibrated against real raylets at CI size: the same trace, admission within a band.

One real-raylet run and one fakelet run of CI_SCENARIO (8 nodes, about 45 s of arrivals, 189 jobs)
through the real CLI, by fakes/ray/fakelets/calibrate.py's own functions (a second pair, pooled with
the first, when the first misses the band: see MAX_PAIRS), then the fakelet admission distribution
is held to CI_BAND: the share of groups admitted within 1 s, overall and
for small jobs. That share is what the GCS's own behaviour sets (its 1 s Tick separates groups
placed on the first try from those that waited a retry). Measured at this size (3 runs of each
kind at loadavg 37-76, every raylet/fakelet pair compared alone, 4 pairs:
results/ray-fakelets-calibration/8n-ci-r3/): it differs by -0.015..0.022.

Quantiles are not asserted here. p99 and above are single gang waits at this sample size, and the
p90 sits between the two modes (87-93% of groups are admitted within 1 s), so it jumps between a
sub-second and a multi-second wait: four pairs gave p90 ratios 0.76-1.10, a CI run 0.46 with the
within-1 s shares 0.868 vs 0.925. The quantile band is the 32-node `make ray-calibrate-fake`'s.
"""
from __future__ import annotations

import json

import pytest

from fakes.ray.fakelets import calibrate
from support.ray_fleet import ray_or_fail

pytestmark = pytest.mark.real

NODES = 8
# calibrate-steady's bimodal mix cut to 8 nodes (gangs of 3 and 4 nodes), churn 16 so ~45 wall
# seconds of arrivals hold about 110 jobs.
CI_SCENARIO = """\
name: ray-fakelets-calibration-ci
seed: 2027
duration_h: 0.75
drain_h: 0.2
warmup_h: 0.1
sample_every_s: 30
fleet:
  nodes: 8
schedulers_enabled: [ray]
schedulers:
  ray:
    multi_node_strategy: STRICT_SPREAD
    single_node_strategy: PACK
workload:
  target_allocation: 0.6
  churn_multiplier: 16
  tenants: 4
  classes:
    small:
      share: 0.85
      shapes:
        - {members: 1, gpus: 1, weight: 0.35}
        - {members: 1, gpus: 2, weight: 0.15}
        - {members: 1, gpus: 4, weight: 0.15}
        - {members: 1, gpus: 8, weight: 0.20}
        - {members: 2, gpus: 8, weight: 0.15}
      duration_s: {median: 600, sigma: 0.8, max: 3600}
    large:
      share: 0.15
      shapes:
        - {members: 3, gpus: 8, weight: 0.5}
        - {members: 4, gpus: 8, weight: 0.5}
      duration_s: {median: 1200, sigma: 0.6, max: 3600}
slo:
  admission_p99_s: 600
"""
# Measured at this size (see the module docstring); fake/real of one pair of runs. 0.08 is ~4x the
# widest of the four measured pairs; one CI run, alone on its machine, gave 0.058 overall.
CI_BAND = {"all": {"within_1s_diff": 0.08}, "small": {"within_1s_diff": 0.08}}


# A busy machine (another process on one core) widened one pair's difference to 0.095: a single
# pair's share is a sample of about 110 groups per kind, whose timing the machine's load moves. When
# the first pair misses the band, one more pair is run (at most two: bounded by count, not by time)
# and the band is held by the pooled comparison, each kind over its two runs, as the 32-node band is.
MAX_PAIRS = 2


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    ray_or_fail()
    root = tmp_path_factory.mktemp("fakelets-calibration")
    scenario = root / "ci.yaml"
    scenario.write_text(CI_SCENARIO)
    reports = [calibrate.calibrate(NODES, scenario, root / "out-0", repeat=1, band=CI_BAND)]
    while reports[-1]["outside_band"] and reports[-1]["outside_band"] != ["runs failed"] and len(reports) < MAX_PAIRS:
        print(calibrate.markdown(reports[-1]))
        more = calibrate.calibrate(NODES, scenario, root / f"out-{len(reports)}", repeat=1, band=CI_BAND)
        pooled = root / f"pooled-{len(reports)}"
        pooled.mkdir()
        (pooled / "calibration.json").write_text(json.dumps({**more, "repeat": len(reports) + 1,
                                                              "runs": reports[-1]["runs"] + more["runs"]}))
        reports.append(calibrate.reanalyse(pooled, CI_BAND))
    report = reports[-1]
    print(calibrate.markdown(report))
    failed = [f"{r['kind']}: {r['error']}" for r in report["runs"] if "error" in r]
    assert not failed, f"a calibration run failed: {failed}"
    return report


def test_ks_statistic_is_the_largest_gap_between_the_two_ecdfs():
    assert calibrate.ks_2samp([1, 2, 3, 4], [1, 2, 3, 4]) == {"d": 0.0, "p": 1.0}
    assert calibrate.ks_2samp([1, 2, 3, 4], [3, 4, 5, 6])["d"] == 0.5
    assert calibrate.ks_2samp([0.0] * 50, [1.0] * 50)["p"] < 1e-6


def test_quantiles_and_share_within_one_second():
    q = calibrate.quantiles([0.01] * 80 + [1.5] * 20)
    assert q["count"] == 100 and q["p50"] == 0.01 and q["p90"] == 1.5
    assert q["within_1s"] == 0.8 and q["within_0.1s"] == 0.8


@pytest.mark.bench      # 135-155 s of real runs: make bench-tests; CI keeps test_fidelity_real[ray]
def test_both_fleets_admit_every_job_of_the_same_trace(calibration):
    runs = {r["kind"]: r for r in calibration["runs"]}
    assert set(runs) == {"raylet", "fakelet"}
    assert runs["raylet"]["jobs"] == runs["fakelet"]["jobs"], "the same scenario and seed: the same jobs"
    assert runs["raylet"]["jobs"]["all"] >= 60
    for kind, r in runs.items():
        # a gang or two can still wait for whole free nodes when the drain ends (measured 0-2 with a 6 s
        # drain; the drain is 12 s now, so a slower machine's later gangs still count)
        never = r["never_admitted"].get("all", 0)
        assert never <= 0.03 * r["jobs"]["all"], f"{kind}: never admitted {r['never_admitted']}"
        assert r["control_plane"]["raylets_alive"] == NODES, (kind, r["control_plane"])
        assert r["control_plane"]["groups_created"] >= r["jobs"]["all"] - never
    assert runs["raylet"]["control_plane"]["nodes_kind"] == "raylet"
    assert runs["fakelet"]["control_plane"]["nodes_kind"] == "fakelet"
    assert runs["fakelet"]["fakelets"]["unimplemented"] == {}
    assert runs["fakelet"]["fakelets"]["false_deaths"] == 0


@pytest.mark.bench      # 135-155 s of real runs: make bench-tests; CI keeps test_fidelity_real[ray]
def test_fakelet_admission_falls_within_the_band_measured_on_real_raylets(calibration):
    loads = {r["kind"]: r["loadavg_start"] for r in calibration["runs"]}
    assert calibration["outside_band"] == [], \
        f"fakelets differ from raylets beyond the band {CI_BAND} (loadavg at start {loads}): " \
        f"{calibration['outside_band']}\n{calibrate.markdown(calibration)}"


@pytest.mark.bench      # 135-155 s of real runs: make bench-tests; CI keeps test_fidelity_real[ray]
def test_neither_run_leaves_a_ray_process_behind(calibration):
    for r in calibration["runs"]:
        assert r["left_behind"] == {}, f"{r['kind']} left (and the tool killed) {r['left_behind']}"
