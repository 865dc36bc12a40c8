"""What the kube backend advertises and requests for GPU slices, and how it books the scheduler's
decisions: exact objects and numbers, no cluster (tests/test_kube_gpushare_real.py runs them)."""
import numpy as np
import pytest

from fakes.kube import deviceplugin, dra
from fakes.kube.gpusharing import choose_api
from fakes.kube.pods import pod_spec
from fakes.kube.slicebook import SliceBook
from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing, parse_share

LAYOUT = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")


def fleet(*pools, gpus=2):
    return Fleet(nodes=sum(p.nodes for p in pools), gpus_per_node=gpus, pools=tuple(pools))


MIXED = fleet(NodePool("mig", 1, "h100-80gb", Sharing("mig")), NodePool("frac", 1, "a100-40gb", Sharing("fraction")),
              NodePool("shard", 1, "t4", Sharing("shards", shards_per_gpu=4)), NodePool("whole", 1, "h100-80gb"))


def test_the_mixed_strategy_names_mig_resources_with_plus_as_dot():
    assert deviceplugin.mig_resource("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert deviceplugin.mig_resource("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"


def test_a_fixed_layout_node_advertises_instances_times_gpus_and_no_whole_gpu():
    f = fleet(NodePool("mig", 1, "h100-80gb", Sharing("mig", LAYOUT)), NodePool("whole", 2, "h100-80gb"), gpus=8)
    assert deviceplugin.node_gpus(f, 0) == {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-2g.20gb": "8",
                                            "nvidia.com/mig-1g.10gb": "16"}
    assert deviceplugin.node_gpus(f, 2) == {"nvidia.com/gpu": "8"}
    assert deviceplugin.member_requests(parse_share("mig:2g.20gb"), 1) == {"nvidia.com/mig-2g.20gb": "1"}
    assert choose_api({}, f, existing=False) == "device_plugin"


@pytest.mark.parametrize("pool, said", [
    (NodePool("dyn", 1, "h100-80gb", Sharing("mig")), "dynamic MIG"),
    (NodePool("frac", 1, "t4", Sharing("fraction")), "fraction shares"),
    (NodePool("sh", 1, "t4", Sharing("shards", shards_per_gpu=2)), "shards shares")])
def test_the_device_plugin_refuses_what_it_cannot_express_in_one_line(pool, said):
    with pytest.raises(UserError, match=said) as err:
        choose_api({"gpu_api": "device_plugin"}, fleet(pool), existing=False)
    assert "\n" not in str(err.value) and str(err.value).startswith("kube.gpu_api:")
    assert choose_api({}, fleet(pool), existing=False) == "dra"


def test_bad_gpu_api_and_dra_on_an_existing_cluster_are_one_line():
    with pytest.raises(UserError, match=r"kube.gpu_api: expected one of auto, device_plugin, dra; got 'mps'"):
        choose_api({"gpu_api": "mps"}, MIXED, existing=False)
    with pytest.raises(UserError, match="only on a cluster gangstorm starts"):
        choose_api({"gpu_api": "dra"}, MIXED, existing=True)
    assert choose_api({"gpu_api": "dra"}, Fleet(nodes=2), existing=False) == ""    # no pools: plain nvidia.com/gpu


def test_a_dynamic_mig_node_publishes_25_partitions_per_h100_and_one_counter_set_per_gpu():
    slices = dra.node_slices(MIXED, 0, "n0")
    assert [len(s["spec"].get("devices", [])) for s in slices] == [0, 25, 25]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    sets = slices[0]["spec"]["sharedCounters"]
    assert [c["name"] for c in sets] == ["gpu-0", "gpu-1"]
    assert sorted(sets[0]["counters"]) == sorted([f"memory-slice-{k}" for k in range(8)] + ["media-ext"])
    by_name = {d["name"]: d for d in slices[2]["spec"]["devices"]}
    three_g = by_name["gpu-1-mig-3g-40gb-at-4"]
    assert three_g["consumesCounters"] == [{"counterSet": "gpu-1", "counters": {
        f"memory-slice-{k}": {"value": "1"} for k in (4, 5, 6, 7)}}]
    assert three_g["attributes"]["profile"] == {"string": "3g.40gb"} and three_g["attributes"]["start"] == {"int": 4}
    assert by_name["gpu-1-mig-1g-10gb-me-at-6"]["consumesCounters"][0]["counters"] == {
        "memory-slice-6": {"value": "1"}, "media-ext": {"value": "1"}}


def test_fraction_and_shards_gpus_are_consumable_capacity_and_whole_gpus_plain_devices():
    frac, shard, whole = (dra.node_slices(MIXED, i, f"n{i}")[0]["spec"]["devices"] for i in (1, 2, 3))
    assert frac[1] == {"name": "gpu-1", "attributes": {"mode": {"string": "fraction"}, "model": {"string": "a100-40gb"},
                                                       "gpu": {"int": 1}},
                       "allowMultipleAllocations": True, "capacity": {"milli": {"value": "1000"}}}
    assert shard[0]["capacity"] == {"shards": {"value": "4"}}
    assert [d["name"] for d in whole] == ["gpu-0", "gpu-1"] and "capacity" not in whole[0]


def test_claim_templates_say_the_share_in_cel_and_capacity():
    milli = dra.claim_template(parse_share("milli:250"), 1)["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert milli["capacity"] == {"requests": {"milli": "250"}} and milli["count"] == 1
    assert milli["selectors"][0]["cel"]["expression"] == 'device.attributes["gpu.gangstorm.io"].mode == "fraction"'
    whole = dra.claim_template(parse_share(""), 4)
    assert whole["metadata"]["name"] == "gpu-whole-x4"
    assert whole["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    mig = dra.claim_template(parse_share("mig:1g.10gb+me"), 1)
    assert mig["metadata"]["name"] == "gpu-mig-1g-10gb-me-x1"
    request = mig["spec"]["spec"]["devices"]["requests"][0]
    assert 'profile == "1g.10gb+me"' in request["exactly"]["selectors"][0]["cel"]["expression"]


def test_an_allocated_claim_reads_back_as_node_device_and_share():
    claim = {"metadata": {"annotations": {dra.SHARE_ANNOTATION: "mig:3g.40gb"}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": dra.DRIVER, "pool": "gpu-00000", "device": "gpu-1-mig-3g-40gb-at-4"}]}}}}
    (a,) = dra.allocated(claim)
    assert (a.node, a.device, a.share.text) == ("gpu-00000", "gpu-1-mig-3g-40gb-at-4", "mig:3g.40gb")
    assert dra.node_devices(MIXED, 0)[a.device] == dra.DeviceRef(1, "3g.40gb", 4)
    assert dra.allocated({"metadata": {}, "status": {}}) == []


def test_the_book_counts_compute_memory_fragments_and_records_an_overrun():
    book = SliceBook(MIXED)
    assert book.place_at("a", 0, 0, parse_share("mig:3g.40gb"), 4)
    assert book.place_at("b", 1, 0, parse_share("milli:250"))
    assert book.place_at("c", 3, 1, parse_share(""))
    assert book.place_at("d", 0, 0, parse_share("mig:4g.40gb"), 0)      # 4g at 0 fits beside 3g at 4
    assert not book.place_at("e", 0, 0, parse_share("mig:1g.10gb"), 5)  # overlaps the 3g at 4
    assert book.overruns == ["e: mig:1g.10gb on node 0 GPU 0 start 5"]
    up = np.ones(4, dtype=bool)
    fig = book.sample({("milli:500", 1, ""): 1}, set(), up)
    assert fig["capacity_gpus"] == 8.0 and fig["allocated_whole_gpus"] == 1.0
    assert fig["allocated_compute_gpus"] == pytest.approx(3 / 7 + 4 / 7 + 0.25 + 1)
    assert fig["allocated_memory_gpus"] == pytest.approx(4 / 8 + 4 / 8 + 0.25 + 1)
    # a milli:500 task fits only the fraction node's GPUs; the MIG node's idle GPU 1, the shards
    # node's two and the whole node's GPU 0 are free capacity it cannot use
    assert fig["fragmented_gpus"] == pytest.approx(1 + 2 + 1)
    assert list(book.whole_per_node()) == [0, 0, 0, 1]
    book.release("a")
    assert len(book.placements()) == 3


def test_the_device_plugin_booking_takes_the_first_gpu_with_room():
    f = fleet(NodePool("mig", 1, "h100-80gb", Sharing("mig", LAYOUT)))
    book = SliceBook(f)
    assert all(book.place_on_node(f"p{i}", 0, parse_share("mig:1g.10gb")) for i in range(4))
    assert sorted((p["gpu"], p["start"]) for p in book.placements()) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert not book.place_on_node("p4", 0, parse_share("mig:1g.10gb"))
    assert book.overruns == ["p4: mig:1g.10gb on node 0: no GPU has room"]


def test_pod_spec_limits_every_extended_resource_and_names_its_claims():
    spec = pod_spec({"nvidia.com/mig-1g.10gb": "1", "cpu": "1"})
    assert spec["containers"][0]["resources"] == {"requests": {"nvidia.com/mig-1g.10gb": "1", "cpu": "1"},
                                                  "limits": {"nvidia.com/mig-1g.10gb": "1"}}
    spec = pod_spec({"cpu": "1"}, ("gpu",), **dra.pod_claim_fields(parse_share("shards:2"), 1))
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-shards-2-x1"}]
