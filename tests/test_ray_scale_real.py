"""The Ray cost model against the real GCS at small scale (a CI guard for issue 32's curve, which
runs at 500-10,000 fakelets with `make fidelity-scale-ray`): groups created one at a time on a few
hundred fakelets, the GCS's own scheduling latency against the twin on the shipped local profile
with the fakelet fleet's own answer costs (measured by the curve, results/fidelity-scale/ray).
The band is wide: on 2 loaded cores the real latency moves by tens of percent run to run."""
import pytest

from fakes.ray.costcurve import one_size
from loadgen.calibration.raycurve import STAT, fakelet_profile, twin_stat
from loadgen.input.profile import load as load_profile

from support.paths import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]
BAND = (0.5, 2.0)
NODES, GROUPS = 300, 15


def test_the_gcs_cost_of_a_group_on_fakelets_stays_near_the_twin(tmp_path):
    out = {"metrics": {}}
    one_size(out, NODES, [1, 16], GROUPS, 0.05, 3.0, "SPREAD", tmp_path)
    assert "error" not in out, out["error"]
    local = fakelet_profile(load_profile("local"), ROOT / "results" / "fidelity-scale" / "ray")
    for ph in out["metrics"]["phases"]:
        assert ph["created"] == GROUPS, ph
        sim = twin_stat(local, NODES, ph["bundles"], GROUPS, "SPREAD")
        print(f"{ph['bundles']} bundles: real {ph[STAT]} ms, twin {sim:.3f} ms, ratio {ph[STAT] / sim:.2f}")
        assert BAND[0] <= ph[STAT] / sim <= BAND[1], (ph, sim)
