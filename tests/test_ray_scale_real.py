"""The Ray cost model against the real GCS at small scale (a CI guard for issue 32's curve, which
runs at 500-10,000 fakelets with `make fidelity-scale-ray`): groups created one at a time on a few
hundred fakelets, the GCS's own scheduling latency against the twin on the shipped local profile
with the fakelet fleet's own answer costs (measured by the curve, results/fidelity-scale/ray).
The band is wide, [1/6, 6]: what it guards against is a cost model off by a multiple (the twin was
13-21x off at scale before issue 32), while the real wall-clock latency moves with the host: on 2
loaded cores by tens of percent run to run, and on 2026-12-07, a quiet but slow host (the simulator
itself 2.2-2.8x slower than the day before, the apiserver's POST pods 2-4x slower), both runs of a
fresh clone's `make test` put the p50 at 5.13x the twin for 1 bundle and 4.12x for 16, which the
earlier band of [1/3, 3] failed.

Bounded by counts and causes, not by wall time: a run is one fleet, two bundle counts, GROUPS
groups each, one in flight; each group's wait ends when the group does or the driver exits
(fakes/ray/costcurve.py serial_phase; a group that does not end stops the run, and the test
fails with that cause). A run outside the band gets one more run (at most MAX_RUNS fleets), and
the p50 over both runs' groups decides: a machine loaded by others (load 5-6, one CPU-heavy test
suite beside it) put a single run's 16-bundle p50 at 2.37x the twin, and `make test` of a fresh
clone beside a one-core CPU hog (tools/hog-run.sh) both runs' at 2.30x (1-bundle 1.76x), which the
old band of [0.5, 2] failed."""
import numpy as np
import pytest

from fakes.ray.costcurve import one_size
from loadgen.calibration.raycurve import fakelet_profile, twin_stat
from loadgen.input.profile import load as load_profile
from support.paths import ROOT
from support.ray_fleet import ray_or_fail

pytestmark = [pytest.mark.real, pytest.mark.slow]
BAND = (1 / 6, 6.0)
NODES, GROUPS, BUNDLES = 300, 15, (1, 16)
MAX_RUNS = 2


def _run(run_dir) -> dict[int, list[float]]:
    """One fleet: the GCS's scheduling latency of every group, per bundle count."""
    out = {"metrics": {}}
    one_size(out, NODES, list(BUNDLES), GROUPS, 0.05, 3.0, "SPREAD", run_dir)
    assert "error" not in out, out["error"]
    phases = out["metrics"]["phases"]
    assert [ph["bundles"] for ph in phases] == list(BUNDLES), phases
    for ph in phases:
        assert "stopped" not in ph and ph["created"] == GROUPS, ph
    print(f"run: load {out['load_avg']}, machine busy % per phase {[ph.get('machine_busy_pct') for ph in phases]}")
    return {ph["bundles"]: ph["gcs_scheduling_ms_each"] for ph in phases}


def _ratios(runs: list[dict[int, list[float]]], twin: dict[int, float]) -> dict[int, float]:
    return {b: float(np.percentile([x for r in runs for x in r[b]], 50)) / twin[b] for b in BUNDLES}


def test_the_gcs_cost_of_a_group_on_fakelets_stays_near_the_twin(tmp_path):
    ray_or_fail()
    local = fakelet_profile(load_profile("local"), ROOT / "results" / "fidelity-scale" / "ray")
    twin = {b: twin_stat(local, NODES, b, GROUPS, "SPREAD") for b in BUNDLES}
    runs = [_run(tmp_path / "run-1")]
    while len(runs) < MAX_RUNS and not all(BAND[0] <= x <= BAND[1] for x in _ratios(runs, twin).values()):
        print(f"outside the band after {len(runs)} run(s): {_ratios(runs, twin)}; one more run")
        runs.append(_run(tmp_path / f"run-{len(runs) + 1}"))
    ratios = _ratios(runs, twin)
    for b in BUNDLES:
        print(f"{b} bundles over {len(runs)} run(s): twin {twin[b]:.3f} ms, real/twin {ratios[b]:.2f}")
    assert all(BAND[0] <= x <= BAND[1] for x in ratios.values()), (ratios, twin)
