"""Each simulated scheduler stays near its real backend (a CI guard; the held-out table with the real
run-to-run spread is `make fidelity`, docs/fidelity.md).

One short real run per scheduler at its smallest calibration scale, and its twin (the same
wall-clock plan on virtual time) under the shipped local profile. The band is wide on purpose: a
CI machine with 2 loaded cores moves the real tails by tens of percent run to run.
"""
import pytest

from loadgen.calibration.fidelity import real_stats, row
from loadgen.calibration.twin import real_run, twin
from loadgen.cli.calibrate import CHURN, SCALES
from loadgen.overrides import load_with_overrides

from conftest import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]
BAND = (1 / 3, 3.0)
UTIL_PP = 10.0
TIME_SCALE = 20.0


@pytest.mark.parametrize("name", ["slurm", "ray", "kube", "volcano"])
def test_the_twin_stays_within_a_band_of_the_real_scheduler(name, tmp_path):
    sc = load_with_overrides(str(ROOT / "scenarios/calibrate-steady.yaml"), profile="local",
                             nodes=SCALES[name][0], duration_h=0.25, churn=CHURN.get(name))
    real = real_run(sc, name, tmp_path, TIME_SCALE)["schedulers"][name]
    assert real["jobs"]["admitted"] >= 0.9 * real["jobs"]["submitted"], real["jobs"]
    r = row(f"{name}-{SCALES[name][0]}n", "guard", real_stats([real]), twin(sc, name, TIME_SCALE))
    lo, hi = BAND
    assert lo <= r["p50_ratio"] <= hi and lo <= r["p99_ratio"] <= hi, r
    assert abs(r["util_diff_pp"]) <= UTIL_PP, r
