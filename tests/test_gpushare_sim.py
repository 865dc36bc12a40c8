"""GPU sharing in the simulated fleet: slice accounting against the vocabulary's ledger, the ATC '23
fragmentation measure on a hand-built case, stranded capacity, pricing, every twin placing slices
without ever exceeding a GPU, and the frag experiment's determinism."""
import numpy as np
import pytest

from fakes.sim.slices import SliceState
from fakes.sim.state import ClusterState
from loadgen.drive.frag import FragSettings, experiment
from loadgen.input.scenario import from_dict
from loadgen.measure.statistics import gpu_sharing
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import MILLI, Sharing, parse_share
from loadgen.model.target import Snapshot
from support.paths import OPENB_SLICE, TRACE_SLICES

NODES_SLICE = TRACE_SLICES / "openb_node_list_gpu_node-every19th.csv"


def fleet(*pools: NodePool, gpn: int = 8) -> Fleet:
    return Fleet(nodes=sum(p.nodes for p in pools), gpus_per_node=gpn, pools=pools)


def test_two_3g_slices_on_one_h100_leave_no_4g_and_count_six_sevenths_of_compute_and_all_memory():
    s = SliceState(fleet(NodePool("infer", 1, "h100-80gb", Sharing("mig"), 1), gpn=1))
    three = parse_share("mig:3g.40gb")
    assert s.place(1, 0, three) == 0 and s.place(2, 0, three) == 0
    assert not s.gpu_fits(parse_share("mig:4g.40gb"))[0, 0]
    assert not s.gpu_fits(parse_share("mig:1g.10gb"))[0, 0]
    assert s.allocated_compute == pytest.approx(6 / 7) and s.allocated_memory == pytest.approx(1.0)
    assert [slot.start for _, _, slot in s.holdings[1] + s.holdings[2]] == [4, 0]
    s.give_back(1)
    assert s.gpu_fits(parse_share("mig:3g.40gb"))[0, 0] and not s.gpu_fits(parse_share("mig:4g.40gb"))[0, 0]
    assert s.allocated_compute == pytest.approx(3 / 7)


def test_whole_gpus_and_slices_share_a_fraction_node_and_free_gpus_counts_idle_ones():
    state = ClusterState(fleet(NodePool("nb", 1, "t4", Sharing("fraction"), 4)))
    assert int(state.free_gpus[0]) == 4 and state.count_ge(4) == 1
    state.take(7, 0, 2, 0)                                  # a 2-GPU pod: GPUs 0 and 1
    state.take(8, 0, 1, 0, parse_share("milli:300"))        # on GPU 2, the first that fits
    state.take(9, 0, 1, 0, parse_share("milli:600"), "best")   # best fit: GPU 2 again (0.7 free)
    assert int(state.free_gpus[0]) == 1 and state.allocated == 2
    assert list(state.slices.free_milli[0, :4]) == [0, 0, 100, MILLI]
    assert state.slices.allocated_compute == pytest.approx(2.9)
    state.give_back(7)
    assert int(state.free_gpus[0]) == 3 and state.allocated == 0
    assert state.slices.allocated_compute == pytest.approx(0.9)


def test_mig_nodes_offer_no_whole_gpu():
    state = ClusterState(fleet(NodePool("t", 1, "h100"), NodePool("m", 1, "h100-80gb", Sharing("mig"))))
    assert list(state.free_gpus) == [8, 0]
    assert state.count_ge(1) == 1


def test_fragmentation_is_the_free_capacity_the_shape_mix_cannot_use():
    s = SliceState(fleet(NodePool("nb", 1, "t4", Sharing("fraction"), 2), gpn=2))
    s.place(1, 0, parse_share("milli:700"))                 # GPU 0: 0.3 free; GPU 1 idle
    up = np.ones(1, dtype=bool)
    # milli:200 fits GPU 0 and GPU 1: nothing lost. A whole GPU fits GPU 1 only: GPU 0's 0.3 is lost.
    assert s.fragmentation({("milli:200", 1, ""): 3, ("", 1, ""): 1}, up) == pytest.approx(0.25 * 0.3)
    # milli:500 cannot use GPU 0's 0.3; two whole GPUs fit nowhere here: all 1.3 free GPUs are lost
    assert s.fragmentation({("milli:500", 1, ""): 1, ("", 2, ""): 1}, up) == pytest.approx(0.5 * 0.3 + 0.5 * 1.3)
    # a model the node does not have: everything free is lost for it
    assert s.fragmentation({("milli:200", 1, "v100m16"): 1}, up) == pytest.approx(1.3)
    assert s.stranded({("milli:500", 1, "")}, up) == pytest.approx(0.3)
    assert s.stranded({("milli:200", 1, "")}, up) == 0.0
    assert s.stranded(set(), up) == 0.0


def test_slices_are_priced_by_compute_memory_or_a_weight_between():
    # 8 H100s, each cut into seven 1g.10gb held: compute 8 x 7/7, memory 8 x 7/8
    row = {"capacity_gpus": 8.0, "allocated_compute_gpus": 8.0, "allocated_memory_gpus": 7.0,
           "fragmented_gpus": 0.0, "stranded_gpus": 1.0, "allocated_whole_gpus": 0}
    snaps = [Snapshot(t, 0, 0, 0, 0, 0, 0, gpu_sharing=row) for t in (0.0, 60.0)]
    g = gpu_sharing(snaps, {"gpu_hour_usd": 2.0, "slice_memory_weight": 0.5}, active_util=1.0, tax=0.0)
    assert g["allocation_ratio"] == 1.0 and g["allocation_ratio_memory"] == 0.875
    assert g["cost_per_million_gpu_hours_by"] == {"compute": 2_000_000.0, "memory": round(2e6 / 0.875, 2)}
    assert g["charged_allocation_ratio"] == 0.9375
    assert g["cost_per_million_gpu_hours"] == round(2e6 / 0.9375, 2)
    assert g["stranded_ratio"] == 0.125


MIXED = {
    "seed": 3, "duration_h": 1, "drain_h": 0.5, "warmup_h": 0.1,
    "fleet": {"nodes": 24, "pools": {
        "train": {"fraction": 0.5}, "infer": {"fraction": 0.25, "sharing": "mig"},
        "nb": {"fraction": 0.125, "gpu_model": "a100-80gb", "sharing": "fraction"},
        "sh": {"fraction": 0.125, "gpu_model": "a100-40gb", "sharing": "shards", "shards_per_gpu": 4}}},
    "workload": {"target_allocation": 0.8, "classes": {
        "train": {"share": 0.2, "shapes": [{"members": 2, "gpus": 8}], "duration_s": {"median": 900}},
        "infer3g": {"share": 0.3, "shapes": [{"members": 1, "gpus": 1}], "duration_s": {"median": 300},
                    "gpu_share": "mig:3g.40gb"},
        "infer1g": {"share": 0.3, "shapes": [{"members": 2, "gpus": 1}], "duration_s": {"median": 300},
                    "gpu_share": "mig:1g.10gb"},
        "nb": {"share": 0.1, "shapes": [{"members": 1, "gpus": 1}], "duration_s": {"median": 600},
               "gpu_share": "milli:250"},
        "sh": {"share": 0.1, "shapes": [{"members": 1, "gpus": 1}], "duration_s": {"median": 600},
               "gpu_share": "shards:2"}}},
}


@pytest.mark.parametrize("name", ["kube", "volcano", "ray", "slurm", "kube-gang", "kueue"])
def test_every_twin_places_slices_within_each_gpu_and_admits_every_kind(name, monkeypatch):
    from loadgen.drive.comparative import RunOptions, run_one
    from loadgen.input.plan import plan_run
    sc = from_dict(MIXED)
    plan = plan_run(sc)
    seen = []

    original = SliceState._refresh

    def checked(self, node, k):        # the real refresh, then a look at the GPU it refreshed
        original(self, node, k)
        led = self.ledgers[node][k]
        assert 0 <= led.used_milli <= MILLI and 0 <= led.used_shards <= led.sharing.shards_per_gpu
        assert led.free_compute() >= -1e-9
        assert sum(led.model.mig_profile(p).compute for p, _, held in led.mig if held) <= 7
        seen.append(1)

    monkeypatch.setattr(SliceState, "_refresh", checked)
    result, rec = run_one(sc, name, RunOptions(schedulers=[name]), plan, None)
    assert seen
    admitted = {c: v["admitted"] for c, v in result["by_class"].items()}
    assert all(admitted[c] > 0 for c in ("train", "infer3g", "infer1g", "nb", "sh")), admitted
    g = result["gpu_sharing"]
    assert 0 < g["allocation_ratio"] <= 1 and 0 <= g["fragmentation_ratio"] <= 1


def test_the_frag_experiment_is_deterministic_and_allocation_never_exceeds_capacity():
    sc = from_dict({"seed": 5, "fleet": {"nodes_from": str(NODES_SLICE)}, "workload": {"trace": str(OPENB_SLICE)}})
    settings = FragSettings(max_load=1.3, step=0.1, gap_s=30.0)
    a = experiment(sc, ["kube", "slurm"], settings)
    b = experiment(sc, ["kube", "slurm"], settings)
    assert a == b
    assert [(r["scheduler"], r["policy"]) for r in a["runs"]] == [("kube", "least-allocated"),
                                                                  ("kube", "most-allocated"), ("slurm", "best-fit")]
    for run in a["runs"]:
        alloc = [p["allocation_ratio"] for p in run["points"]]
        assert all(0 <= x <= 1 + 1e-9 for x in alloc) and alloc == sorted(alloc)
        assert run["points"][-1]["arrived_load"] >= 1.3
        assert run["points"][4]["allocation_ratio"] == pytest.approx(run["points"][4]["arrived_load"], abs=0.02)


def test_a_fixed_mig_layout_advertises_its_instances_and_hands_out_only_them():
    layout = Sharing("mig", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    f = fleet(NodePool("infer", 2, "h100-80gb", layout, 1), gpn=1)
    assert f.pool(0).sharing.per_gpu(f.gpu_model_of(0)) == {"mig:3g.40gb": 1, "mig:2g.20gb": 1, "mig:1g.10gb": 2}
    s = SliceState(f)
    one = parse_share("mig:1g.10gb")
    assert list(s.node_fits(parse_share("mig:1g.20gb"))) == [False, False]     # not in the layout
    for owner in (1, 2, 3, 4):
        s.place(owner, 0 if owner < 3 else 1, one)
    assert list(s.node_fits(one)) == [False, False] and list(s.node_fits(parse_share("mig:3g.40gb"))) == [True, True]
    assert s.allocated_compute == pytest.approx(4 / 7) and s.allocated_memory == pytest.approx(4 / 8)
    s.give_back(2)
    assert list(s.node_fits(one)) == [True, False]


def test_gpu_spec_keeps_a_member_to_the_models_it_names():
    from loadgen.model.job import Job
    state = ClusterState(fleet(NodePool("t4", 2, "t4", Sharing("fraction"), 2),
                               NodePool("v100", 2, "v100m16", Sharing("fraction"), 2), gpn=2))

    def job(share: str, spec: str) -> Job:
        return Job(1, "t", "q", "c", 1, 1, 60.0, 0.0, 1, share=share, gpu_spec=spec)

    assert list(state.member_nodes(job("milli:500", "v100m16"))) == [False, False, True, True]
    assert list(state.member_nodes(job("", "t4|v100m16"))) == [True, True, True, True]
    assert list(state.member_nodes(job("", "t4"))) == [True, True, False, False]
    assert list(state.member_capacity(job("milli:500", "v100m16"))) == [0, 0, 2, 2]
