"""The seeded bimodal workload: Little's law, churn multiplier, traces."""
import pytest

from loadgen.input.scenario import from_dict
from loadgen.input.traces import TraceError, export_jsonl, import_jsonl, import_openb
from loadgen.input.workload import generate
from loadgen.model.job import Job
from support.paths import OPENB_SLICE, TRACES


def small(**over):
    base = {"fleet": {"nodes": 1000}, "duration_h": 4, "seed": 9}
    sc = from_dict(base)
    return sc.with_overrides(**over) if over else sc


def test_same_seed_same_jobs():
    a, _ = generate(small())
    b, _ = generate(small())
    assert a == b
    c, _ = generate(small(seed=10))
    assert a != c


def test_arrival_rate_follows_littles_law():
    jobs, info = generate(small())
    # offered demand = rate x E[gpus x duration] = target allocation x fleet GPUs
    assert info.baseline_arrival_rate_per_s * info.churn_multiplier == pytest.approx(info.arrival_rate_per_s)
    measured = len(jobs) / (4 * 3600)
    assert measured == pytest.approx(info.arrival_rate_per_s, rel=0.05)
    demand = sum(j.gpus * j.duration_s for j in jobs) / (4 * 3600) / 8000
    assert demand == pytest.approx(0.85, rel=0.12)


def test_churn_multiplier_keeps_demand_and_multiplies_churn():
    j1, i1 = generate(small(**{"workload.churn_multiplier": 1}))
    j3, i3 = generate(small(**{"workload.churn_multiplier": 3}))
    assert i3.arrival_rate_per_s == pytest.approx(3 * i1.arrival_rate_per_s)
    assert i3.mean_duration_s == pytest.approx(i1.mean_duration_s / 3)
    target = 0.85 * 8000 * 4 * 3600          # GPU-seconds offered over the 4 hours
    for jobs in (j1, j3):
        assert sum(j.gpus * j.duration_s for j in jobs) == pytest.approx(target, rel=0.25)


def test_offered_load_pushes_demand_past_capacity():
    _, base = generate(small())
    _, over = generate(small(**{"workload.offered_load": 1.7}))
    assert over.arrival_rate_per_s == pytest.approx(2 * base.arrival_rate_per_s)
    assert over.offered_load == 1.7


def test_bimodal_shapes_and_tenants():
    jobs, info = generate(small())
    large = [j for j in jobs if j.cls == "large"]
    assert {j.members for j in large} <= {8, 16, 32, 64}
    assert all(j.gpus_per_member == 8 for j in large)
    assert 0.04 < len(large) / len(jobs) < 0.10
    assert {j.gpus_per_member for j in jobs if j.members == 1} == {1, 2, 4, 8}
    assert len(info.tenants) == 6 and all(j.tenant in info.tenants for j in jobs)
    assert all(j.cpus_per_member == j.gpus_per_member * 12 for j in jobs)


def test_jsonl_round_trip(tmp_path):
    jobs, _ = generate(small(duration_h=0.5))
    export_jsonl(jobs, tmp_path / "t.jsonl", {"seed": 9})
    back, meta = import_jsonl(tmp_path / "t.jsonl")
    assert back == jobs and meta["seed"] == 9


def test_jobs_without_a_name_round_trip(tmp_path):
    jobs = [Job(id=i, tenant="t0", queue="q", cls="small", members=1, gpus_per_member=1, duration_s=60.0,
                submit_s=float(i), min_available=1) for i in range(3)]
    export_jsonl(jobs, tmp_path / "t.jsonl")
    back, _ = import_jsonl(tmp_path / "t.jsonl")
    assert back == jobs and [j.name for j in back] == ["", "", ""]


def test_jsonl_errors_name_line_and_field(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"id": 1, "members": 2, "gpus_per_member": "eight", "duration_s": 5, "submit_s": 0}\n')
    with pytest.raises(TraceError, match=r"t.jsonl: line 1: gpus_per_member: expected a number"):
        import_jsonl(p)
    p.write_text("not json\n")
    with pytest.raises(TraceError, match=r"line 1: expected a JSON object"):
        import_jsonl(p)


def test_openb_pods_of_the_slice_in_the_repository_become_one_member_jobs():
    jobs, meta = import_openb(OPENB_SLICE)
    # the first 1,000 pods of the default list: 116 CPU-only skipped, every other pod a job
    assert meta["skipped"] == {"cpu_only": 116, "no_deletion_time": 0, "too_many_gpus": 0}
    assert len(jobs) == 884
    assert all(j.members == 1 and 1 <= j.gpus_per_member <= 8 for j in jobs)
    assert jobs[0].submit_s == 0.0
    first = [j for j in jobs if j.name == "openb-pod-0000"][0]
    assert first.duration_s == 12537496.0


@pytest.mark.skipif(not (TRACES / "openb_pod_list_default.csv").is_file(),
                    reason="the full openb trace is an optional input (../shared/traces)")
def test_openb_pods_become_one_member_jobs():
    jobs, meta = import_openb(TRACES / "openb_pod_list_default.csv")
    # 8,152 pods: 1,088 CPU-only skipped; pods without a deletion time skipped and counted.
    assert meta["skipped"]["cpu_only"] == 1088
    assert len(jobs) + sum(meta["skipped"].values()) == 8152
    assert all(j.members == 1 and 1 <= j.gpus_per_member <= 8 for j in jobs)
    assert jobs[0].submit_s == 0.0
    first = [j for j in jobs if j.name == "openb-pod-0000"][0]
    assert first.duration_s == 12537496.0
