"""GPU sharing in the input: node pools, class shares, the openb trace's gpu_milli and gpu_spec, the
openb node list as a fleet, and bad input as one line with exit status 2."""
import pytest

from loadgen.input.plan import workload_for
from loadgen.input.pools import openb_node_pools
from loadgen.input.scenario import from_dict
from loadgen.input.traces import export_jsonl, import_jsonl, import_openb
from loadgen.input.workload import generate
from loadgen.model.errors import TraceError
from support.fuzzkit import run_cli
from support.paths import OPENB_SLICE, TRACE_SLICES

NODES_SLICE = TRACE_SLICES / "openb_node_list_gpu_node-every19th.csv"
CLASS = "{share: 1, shapes: [{members: 1, gpus: 1}], duration_s: {median: 300}, gpu_share: '%s'}"


def scenario(pools: str, share: str) -> bytes:
    return (f"name: t\nduration_h: 0.1\ndrain_h: 0.05\nwarmup_h: 0\nfleet: {{nodes: 16, pools: {pools}}}\n"
            f"workload: {{classes: {{infer: {CLASS % share}}}}}\n").encode()


MIG = "{a: {fraction: 1, gpu_model: h100-80gb, sharing: mig}}"
FRACTION = "{a: {fraction: 1, gpu_model: t4, sharing: fraction}}"
SHARDS = "{a: {fraction: 1, sharing: shards, shards_per_gpu: 4}}"
BAD = {
    "fraction over 1": (scenario(FRACTION, "milli:1500"), "workload.classes.infer.gpu_share: a fraction must be "
                        "in (0, 1], milli 1..1000; got 'milli:1500'"),
    "fraction 0": (scenario(FRACTION, "milli:0"), "workload.classes.infer.gpu_share: a fraction must be in (0, 1], "
                   "milli 1..1000; got 'milli:0'"),
    "NaN": (scenario(FRACTION, "milli:nan"), "workload.classes.infer.gpu_share: milli:N needs a whole number N; "
            "got 'milli:nan'"),
    "unknown profile": (scenario(MIG, "mig:9g.90gb"), "workload.classes.infer.gpu_share: unknown MIG profile "
                        "'9g.90gb'; expected one of "),
    "profile not offered": (scenario(MIG, "mig:1g.5gb"), "workload.classes.infer.gpu_share: pool a: MIG profile "
                            "'1g.5gb' is not offered by h100-80gb; expected one of 1g.10gb, 1g.10gb+me, 1g.20gb, "
                            "2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"),
    "shards over shards_per_gpu": (scenario(SHARDS, "shards:5"), "workload.classes.infer.gpu_share: pool a: "
                                   "shards:5 exceeds shards_per_gpu 4"),
    "MIG on a model without it": (scenario("{a: {fraction: 1, gpu_model: t4, sharing: mig}}", "mig:1g.10gb"),
                                  "fleet.pools.a: t4 has no MIG; expected a MIG model"),
    "layout against the rules": (scenario("{a: {fraction: 1, sharing: mig, mig_layout: [3g.40gb@0, 4g.40gb]}}",
                                          "mig:3g.40gb"),
                                 "fleet.pools.a.mig_layout[1]: '4g.40gb' does not fit beside 3g.40gb@0 on h100-80gb"),
    "no sharing pool": (scenario("{a: {fraction: 1}}", "milli:250"),
                        "workload.classes.infer.gpu_share: no pool can hold 'milli:250': expected a pool with "
                        "sharing fraction"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_gpu_sharing_input_is_one_line_and_exit_2(name):
    body, expected = BAD[name]
    o = run_cli(["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet"], {"s.yaml": body})
    line = o.stderr.strip()
    assert o.code == 2 and "\n" not in line
    assert line.startswith("gangstorm: error: ") and expected in line


def test_openb_gpu_milli_becomes_a_milli_share_on_a_fraction_fleet_and_a_whole_gpu_otherwise():
    shared, _ = import_openb(OPENB_SLICE, shares=True)
    whole, meta = import_openb(OPENB_SLICE)
    assert [j.id for j in shared] == [j.id for j in whole]
    fractions = [j for j in shared if j.share]
    assert len(fractions) == meta["fractions_as_whole"] == 329
    assert all(j.gpus_per_member == 1 and j.share.startswith("milli:") and j.cpus_per_member == 0 for j in fractions)
    pod1 = next(j for j in shared if j.name == "openb-pod-0001")
    assert pod1.share == "milli:460" and pod1.cls == "openb-frac"
    assert not any(j.share for j in whole)


def test_gpu_spec_and_share_survive_a_jsonl_round_trip(tmp_path):
    jobs, _ = import_openb(OPENB_SLICE, shares=True, limit=20)
    jobs = [jobs[0].__class__(**{**{f: getattr(jobs[0], f) for f in jobs[0].__slots__}, "gpu_spec": "v100m16|t4"}),
            *jobs[1:]]
    export_jsonl(jobs, tmp_path / "t.jsonl")
    back, _ = import_jsonl(tmp_path / "t.jsonl")
    assert [(j.share, j.gpu_spec) for j in back] == [(j.share, j.gpu_spec) for j in jobs]
    (tmp_path / "bad.jsonl").write_text('{"id": 1, "members": 1, "gpus_per_member": 2, "duration_s": 5, '
                                        '"submit_s": 0, "share": "milli:250"}\n')
    with pytest.raises(TraceError, match="takes one slice of one GPU; expected 1, got 2"):
        import_jsonl(tmp_path / "bad.jsonl")


def test_the_openb_node_list_becomes_fraction_pools_by_model_and_gpu_count():
    pools = openb_node_pools(NODES_SLICE, 8)
    # one pool per model and GPU count, in order of first appearance
    assert [(p.name, p.nodes) for p in pools] == [("p100-2gpu", 8), ("g2-8gpu", 28), ("t4-4gpu", 2),
                                                  ("t4-2gpu", 20), ("v100m32-4gpu", 2), ("v100m16-1gpu", 2),
                                                  ("g3-8gpu", 2)]
    assert all(p.sharing.mode == "fraction" for p in pools)
    sc = from_dict({"fleet": {"nodes_from": str(NODES_SLICE)}, "workload": {"trace": str(OPENB_SLICE)}})
    fleet = sc.fleet()
    assert fleet.nodes == sc.data["fleet"]["nodes"] == 64
    assert fleet.total_gpus == sc.total_gpus == 8 * 2 + 28 * 8 + 2 * 4 + 20 * 2 + 2 * 4 + 2 * 1 + 2 * 8
    jobs, info = workload_for(sc)
    assert sum(1 for j in jobs if j.share) == 329
    assert info["trace_meta"].get("fractions_as_whole") is None


def test_a_generated_class_with_a_share_asks_for_slices_and_offered_load_counts_them_by_share():
    sc = from_dict({"duration_h": 1, "fleet": {"nodes": 20, "pools": {"a": {"fraction": 1, "sharing": "mig"}}},
                    "workload": {"offered_load": 0.5, "classes": {"infer": {
                        "share": 1, "shapes": [{"members": 1, "gpus": 1}], "duration_s": {"median": 600, "sigma": 0},
                        "gpu_share": "mig:1g.10gb"}}}})
    jobs, info = generate(sc)
    assert {j.share for j in jobs} == {"mig:1g.10gb"}
    # 0.5 x 160 GPUs / (1/7 GPU x 600 s) = 0.9333 jobs per s, x the default churn 3
    assert info.arrival_rate_per_s == pytest.approx(0.5 * 160 / (600 / 7) * 3)
