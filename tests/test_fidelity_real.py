"""Each simulated scheduler stays near its real backend (a CI guard; the held-out table with the real
run-to-run spread is `make fidelity`, docs/fidelity.md).

One short real run per scheduler at its smallest calibration scale, and its twin (the same
wall-clock plan on virtual time): admission p50 and the mean of the slowest tenth of jobs within
the band, utilization within UTIL_PP points. The twin runs on the shipped local profile with the component
costs this run measured itself (`remeasured`): those costs follow the machine's speed and load
(kube's apiserver answered POST pods in 19 ms mean during the calibration and in 4.4 ms on an idle
machine), so a fixed profile cannot predict a machine faster or slower than the one it was fitted on,
while the fitted lags and the mechanisms should hold anywhere. The band is wide on purpose: a CI
machine with 2 loaded cores moves the real tails by tens of percent run to run.
"""
import pytest

from loadgen.calibration.calibrate import remeasured
from loadgen.calibration.cases import Case
from loadgen.calibration.fidelity import real_stats, row
from loadgen.calibration.twin import real_run, twin, twin_run
from loadgen.cli.calibrate import CHURN, SCALES
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile
from support.paths import ROOT
from support.pressure import CpuWait
from support.tails import csv_admissions, recorder_admissions, slowest_mean

pytestmark = [pytest.mark.real, pytest.mark.slow]
BAND = (1 / 3, 3.0)
UTIL_PP = 10.0
TIME_SCALE = 20.0
SCENARIO = "scenarios/calibrate-steady.yaml"
TAIL_SHARE = 0.1        # the tail a guard run's 30-80 jobs resolve: the mean of its slowest tenth
CYCLE_STRETCH = 5.0     # the real serial cycle's wall time over the twin's, at most, on 2 shared cores


@pytest.mark.parametrize("name", ["slurm", "ray", "kube", "volcano"])
def test_the_twin_stays_within_a_band_of_the_real_scheduler(name, tmp_path):
    nodes = SCALES[name][0]
    sc = load_with_overrides(str(ROOT / SCENARIO), profile="local", nodes=nodes, duration_h=0.25,
                             churn=CHURN.get(name))
    with CpuWait() as wait:
        real = real_run(sc, name, tmp_path, TIME_SCALE)["schedulers"][name]
    assert real["jobs"]["admitted"] >= 0.9 * real["jobs"]["submitted"], real["jobs"]
    here = remeasured(load_profile("local"), name, Case(SCENARIO, nodes, "fit"), real)
    sim, sim_rec = twin_run(sc, name, TIME_SCALE, here)
    r = row(f"{name}-{nodes}n", "guard", real_stats([real]), sim)
    shipped = row(f"{name}-{nodes}n", "guard", real_stats([real]), twin(sc, name, TIME_SCALE))
    real_adm, sim_adm = csv_admissions(tmp_path, name), recorder_admissions(sim_rec)
    assert (len(real_adm), len(sim_adm)) == (real["admission_s"]["count"], sim["admission_s"]["count"])
    tail = round(slowest_mean(real_adm, TAIL_SHARE) / slowest_mean(sim_adm, TAIL_SHARE), 3)
    print(f"{name}: remeasured p50/slowest-tenth mean/p90/p99 ratio {r['p50_ratio']}/{tail}/"
          f"{_p90_ratio(real, sim)}/{r['p99_ratio']} "
          f"(n {r['n']}), shipped profile p50/p99 {shipped['p50_ratio']}/{shipped['p99_ratio']}")
    lo, hi = BAND
    assert lo <= r["p50_ratio"] <= hi and lo <= tail <= hi, r
    assert abs(r["util_diff_pp"]) <= UTIL_PP, r
    if name == "kube":
        _kube_cycle_is_the_serial_part(real, twin(sc, name, TIME_SCALE), wait.share)


def _p90_ratio(real: dict, sim: dict) -> float:
    """Printed, not judged: at 30-80 jobs p90 is one job's wait (the 30th of 33), p99 the maximum.
    One Ray guard run's p90 ratio was 3.8 with its four slowest jobs at 1.09 on average, one kube
    run's p99 ratio 2.75 against 1.36 in a second run of the same twin; the held-out table
    (`make fidelity`, 3 runs of 180-380 jobs) judges p99."""
    return round(real["admission_s"]["p90"] / sim["admission_s"]["p90"], 3)


def _kube_cycle_is_the_serial_part(real: dict, sim: dict, cpu_wait: float) -> None:
    """The twin's scheduling cycle is kube-scheduler's serial part (algorithm + Reserve + Permit),
    not its attempt, which in 1.36 ends with the asynchronous bind (its limiter wait and apiserver
    latency): the real attempt is longer than the real serial cycle, and the twin's cycle (shipped
    profile, measured at 500-10,000 nodes) is within the band of the real serial cycle here.
    The serial cycle is wall time, and at 32 nodes it is about a millisecond: a cycle the kernel
    preempts once for another runnable task lasts several times its work. Measured here for the
    same run: 0.55 ms alone, 0.73 and 1.08 beside a CPU hog, 1.33 inside a full `make test` (its
    own stack on both cores, Linux PSI `some` low), 1.52 beside a CPU hog and two other KWOK
    clusters; the twin's cycle is 0.41 ms. So the upper end is CYCLE_STRETCH, widened further by
    1 / (1 - the share of the run in which a task waited, PSI `some`). The mistake this guards
    against, the attempt taken for the cycle, is 25x (10.5 ms against 0.41)."""
    sched = real["control_plane"]["scheduler"]
    serial, attempt = sched["serial_cycle_ms_mean"], sched["attempt_ms_mean"]
    cycle = sim["control_plane"]["scheduling_cycle_ms_mean"]
    hi = CYCLE_STRETCH / (1 - cpu_wait)
    print(f"kube: real serial cycle {serial} ms, real attempt {attempt} ms, twin cycle {cycle} ms, "
          f"CPU wait {cpu_wait:.2f}, band {BAND[0]:.2f}-{hi:.2f}")
    assert attempt > serial, sched
    assert BAND[0] <= serial / cycle <= hi, (serial, cycle, cpu_wait)
