"""The GPU-sharing vocabulary: MIG placement rules, slice accounting and share text, exact numbers."""
import math

import pytest

from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import GpuLedger, Sharing, gpu_model, milli_share, parse_share

H100 = gpu_model("h100-80gb")
A100_40 = gpu_model("a100-40gb")


def mig(profile):
    return parse_share(f"mig:{profile}")


def test_two_3g_instances_take_starts_4_and_0_and_then_no_4g_fits_on_an_h100():
    gpu = GpuLedger(H100, Sharing("mig"))
    assert gpu.place(mig("3g.40gb"), start=0).start == 0
    assert gpu.place(mig("3g.40gb")).start == 4
    assert not gpu.fits(mig("4g.40gb"))
    assert not gpu.fits(mig("1g.10gb"))
    assert gpu.free_compute() == pytest.approx(1 / 7)     # the seventh compute slice is stranded


def test_an_h100_holds_seven_1g_10gb_and_not_an_eighth():
    gpu = GpuLedger(H100, Sharing("mig"))
    starts = sorted(gpu.place(mig("1g.10gb")).start for _ in range(7))
    assert starts == [0, 1, 2, 3, 4, 5, 6]
    assert gpu.place(mig("1g.10gb")) is None
    assert gpu.free_compute() == 0.0


def test_2g_20gb_may_start_only_at_memory_slices_0_2_and_4():
    gpu = GpuLedger(H100, Sharing("mig"))
    assert gpu.mig_starts("2g.20gb") == [0, 2, 4]
    assert gpu.place(mig("2g.20gb"), start=6) is None
    assert gpu.place(mig("2g.20gb"), start=2).start == 2
    assert gpu.mig_starts("2g.20gb") == [0, 4]
    assert gpu.mig_starts("3g.40gb") == [4]
    assert gpu.mig_starts("4g.40gb") == []


def test_4g_and_3g_fill_an_h100_and_the_dynamic_choice_leaves_room_for_the_4g():
    gpu = GpuLedger(H100, Sharing("mig"))
    assert gpu.place(mig("3g.40gb")).start == 4          # start 0 would block the 4g
    assert gpu.place(mig("4g.40gb")).start == 0
    assert gpu.free_compute() == 0.0


def test_a_released_dynamic_instance_is_destroyed_and_its_slices_reused():
    gpu = GpuLedger(H100, Sharing("mig"))
    slot = gpu.place(mig("7g.80gb"))
    assert not gpu.fits(mig("1g.10gb"))
    gpu.release(slot)
    assert gpu.idle and gpu.mig_starts("1g.10gb") == [0, 1, 2, 3, 4, 5, 6]


def test_a_fixed_layout_hands_out_only_its_instances():
    layout = Sharing("mig", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    assert layout.instances(H100) == [("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)]
    assert layout.per_gpu(H100) == {"mig:3g.40gb": 1, "mig:2g.20gb": 1, "mig:1g.10gb": 2}
    gpu = GpuLedger(H100, layout)
    assert not gpu.fits(mig("1g.20gb"))
    assert [gpu.place(mig("1g.10gb")).start for _ in range(2)] == [2, 3]
    assert gpu.place(mig("1g.10gb")) is None


def test_a_layout_that_breaks_the_placement_rules_is_one_line():
    with pytest.raises(UserError, match=r"layout\[1\]: '4g.40gb' does not fit"):
        Sharing("mig", ("3g.40gb@0", "4g.40gb")).check(H100, "pools.infer.sharing")


def test_a100_40gb_profiles_and_the_media_extension_limit():
    gpu = GpuLedger(A100_40, Sharing("mig"))
    assert [p.name for p in A100_40.mig] == ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                                             "7g.40gb"]
    assert gpu.place(mig("1g.5gb+me")) is not None
    assert not gpu.fits(mig("1g.5gb+me"))
    assert gpu.fits(mig("1g.5gb"))


def test_fractions_pack_onto_one_gpu_up_to_1000_milli():
    gpu = GpuLedger(gpu_model("t4"), Sharing("fraction"))
    for m in (460, 300, 240):
        assert gpu.place(parse_share(f"milli:{m}")) is not None
    assert gpu.free_compute() == 0.0
    assert gpu.place(parse_share("milli:1")) is None
    assert not gpu.fits(parse_share(""))


def test_shards_and_whole_gpus_in_a_shards_pool():
    gpu = GpuLedger(H100, Sharing("shards", shards_per_gpu=4))
    assert gpu.fits(parse_share(""))
    slot = gpu.place(parse_share("shards:3"))
    assert not gpu.fits(parse_share("shards:2")) and not gpu.fits(parse_share(""))
    assert gpu.free_compute() == 0.25
    gpu.release(slot)
    assert gpu.idle


def test_share_text_round_trips_and_milli_1000_is_a_whole_gpu():
    for text in ("", "milli:250", "mig:1g.10gb", "shards:2"):
        assert parse_share(text).text == text
    assert parse_share("milli:1000").text == ""
    assert milli_share(0.46).text == "milli:460"


@pytest.mark.parametrize("text, message", [
    ("milli:1500", "a fraction must be in (0, 1]"),
    ("milli:0", "a fraction must be in (0, 1]"),
    ("milli:-5", "a fraction must be in (0, 1]"),
    ("mig:9g.90gb", "unknown MIG profile '9g.90gb'"),
    ("shards:0", "shards:K needs K >= 1"),
    ("gpus:2", 'expected "", "milli:N"'),
])
def test_bad_share_text_is_one_line(text, message):
    with pytest.raises(UserError) as e:
        parse_share(text, "classes.infer.share")
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("classes.infer.share:")


def test_bad_fractions_and_profiles_not_offered():
    for f in (math.nan, 1.5, 0.0, -0.1):
        with pytest.raises(UserError, match="a GPU fraction must be in"):
            milli_share(f)
    with pytest.raises(UserError, match="'1g.5gb' is not offered by h100-80gb"):
        mig("1g.5gb").check(H100, Sharing("mig"))
    with pytest.raises(UserError, match="shards:5 exceeds shards_per_gpu 4"):
        parse_share("shards:5").check(H100, Sharing("shards", shards_per_gpu=4))
    with pytest.raises(UserError, match="t4 has no MIG"):
        Sharing("mig").check(gpu_model("t4"))


def test_slice_sizes_and_the_price_weight():
    s = mig("3g.40gb")
    assert s.compute_share(H100) == pytest.approx(3 / 7) and s.memory_share(H100) == 0.5
    assert s.charged_share(H100, memory_weight=0.0) == pytest.approx(3 / 7)
    assert s.charged_share(H100, memory_weight=1.0) == 0.5
    assert s.charged_share(H100, memory_weight=0.5) == pytest.approx((3 / 7 + 0.5) / 2)
    assert parse_share("shards:1").compute_share(H100, Sharing("shards", shards_per_gpu=4)) == 0.25


def test_node_pools_lay_out_models_gpu_counts_and_sharing_in_order():
    fleet = Fleet(nodes=5, pools=(NodePool("train", 2, "h100"), NodePool("infer", 3, "a100-80gb", Sharing("mig"), 4)))
    assert fleet.total_gpus == 2 * 8 + 3 * 4
    assert list(fleet.gpus_of) == [8, 8, 4, 4, 4]
    assert fleet.model_names() == ["h100-80gb", "a100-80gb"]
    assert fleet.gpu_model_of(4).name == "a100-80gb" and fleet.sharing_of(4).mode == "mig"
    assert fleet.node_labels(0)["gangstorm.io/pool"] == "train"
    assert NodePool.from_dict(fleet.pools[1].to_dict()) == fleet.pools[1]


def test_a_fleet_without_pools_keeps_its_labels_and_counts():
    fleet = Fleet(nodes=3)
    assert fleet.total_gpus == 24 and not fleet.shared
    assert set(fleet.node_labels(0)) == {"gangstorm.io/leaf", "gangstorm.io/spine", "nvidia.com/gpu.product"}
    assert fleet.pool(1).sharing.mode == "whole" and fleet.gpu_model_of(0).name == "h100-80gb"
