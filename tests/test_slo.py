"""SLO tests through the gangstorm pytest plugin: the behaviours the seed describes."""
import pytest

FRAG = "scenarios/fragmentation.yaml"


@pytest.mark.gangstorm(FRAG, nodes=2000)
def test_fragmentation_kube_holds_partial_gangs_gang_schedulers_do_not(gangstorm_summary):
    s = gangstorm_summary["schedulers"]
    assert s["kube"]["partial_gang_gpu_hours"] > 10
    assert s["kube"]["gangs_ever_partial"] > 0
    for name in ("volcano", "ray", "slurm"):
        assert s[name]["partial_gang_gpu_hours"] == 0, name
    assert (s["volcano"]["by_class"]["large"]["admission_s"]["p99"]
            < s["kube"]["by_class"]["large"]["admission_s"]["p99"])


def test_coscheduling_removes_kubes_partial_gangs(gangstorm_run):
    vanilla = gangstorm_run(FRAG, schedulers="kube", nodes=2000)
    cosched = gangstorm_run(FRAG, schedulers="kube", nodes=2000, **{"schedulers.kube.coscheduling": True})
    assert vanilla["schedulers"]["kube"]["partial_gang_gpu_hours"] > 10
    assert cosched["schedulers"]["kube"]["partial_gang_gpu_hours"] == 0
    assert cosched["schedulers"]["kube"]["control_plane"]["coscheduling"] is True


def test_raising_kube_api_qps_lowers_its_p99(gangstorm_run):
    p99 = {}
    for qps in (10, 20, 100):
        s = gangstorm_run("scenarios/api-qps.yaml", schedulers="kube", nodes=2000,
                          **{"schedulers.kube.api_qps": qps})
        p99[qps] = s["schedulers"]["kube"]["admission_s"]["p99"]
    assert p99[10] > p99[20] > p99[100]
    assert p99[100] < 1.0 < p99[10]


@pytest.mark.gangstorm("scenarios/etcd-quota.yaml", nodes=2000)
def test_etcd_quota_stalls_kube_and_volcano_until_recovery(gangstorm_summary):
    s = gangstorm_summary["schedulers"]
    for name in ("kube", "volcano"):
        cp = s[name]["control_plane"]
        assert cp["nospace_alarms"] == 1 and cp["writes_refused_nospace"] > 0
        rec = cp["nospace_recoveries"]
        assert len(rec) == 1 and rec[0]["outage_s"] >= 1800          # operator at +30 min, then recovery
        assert s[name]["admission_s"]["max"] >= 900                    # admissions stalled through it
        assert s[name]["jobs"]["failed"] > 0                          # some gave up (submit timeout)
        assert s[name]["failure_reasons"] == {"etcd-nospace": s[name]["jobs"]["failed"]}
        assert cp["etcd_nospace_alarm"] is False                      # recovered by the end
        assert s[name]["jobs"]["pending_at_end"] == 0                  # and caught up afterwards
    for name in ("ray", "slurm"):                                      # no etcd in their path
        assert s[name]["chaos_applied"]["etcd_fill"] == {"applied": 0, "unsupported": 1}
        assert s[name]["admission_s"]["p99"] < 60
