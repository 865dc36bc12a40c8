"""What gangstorm writes for Volcano's HAMi vGPU path and how it reads the scheduler's choice back
(fakes/volcano/vgpu.py): exact strings and numbers, no cluster."""
from __future__ import annotations

import numpy as np
import yaml

from fakes.volcano import vgpu
from fakes.volcano.controlplane import scheduler_conf
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing, gpu_model, parse_share

H100 = gpu_model("h100-80gb")


def fraction_fleet() -> Fleet:
    return Fleet(nodes=3, gpus_per_node=4, pools=(NodePool("whole", 1, "h100-80gb"),
                                                  NodePool("frac", 2, "a10", Sharing("fraction"), 2)))


def test_register_annotation_is_what_decode_node_devices_reads():
    # UUID,count,memoryMiB,type,health,mode per GPU, ':'-terminated (vgpu/utils.go decodeNodeDevices)
    assert vgpu.register_annotation("gpu-00001", H100, 2) == (
        "GPU-gpu-00001-000,10,81920,NVIDIA-h100-80gb,true,hami-core:"
        "GPU-gpu-00001-001,10,81920,NVIDIA-h100-80gb,true,hami-core:")
    assert vgpu.capacity(H100, 2) == {vgpu.NUMBER: "20", vgpu.MEMORY: "163840", vgpu.CORES: "200"}


def test_gpu_ids_are_never_part_of_one_another():
    # the scheduler matches an assignment to a GPU with strings.Contains
    ids = [vgpu.gpu_uuid("gpu-00001", k) for k in range(16)]
    assert not any(a != b and a in b for a in ids for b in ids)
    assert [vgpu.gpu_index(u) for u in ids] == list(range(16))


def test_node_extras_only_on_fraction_pools():
    fleet = fraction_fleet()
    assert vgpu.node_extras(fleet, 0, "gpu-00000") == ({}, {})
    ann, cap = vgpu.node_extras(fleet, 2, "gpu-00002")
    assert ann[vgpu.REGISTER] == ("GPU-gpu-00002-000,10,24576,NVIDIA-a10,true,hami-core:"
                                  "GPU-gpu-00002-001,10,24576,NVIDIA-a10,true,hami-core:")
    assert ann[vgpu.HANDSHAKE].startswith("Reported_")
    assert cap == {vgpu.NUMBER: "20", vgpu.MEMORY: "49152", vgpu.CORES: "200"}


def test_requests_for_a_milli_share_and_whole_gpus():
    basis = vgpu.request_memory_basis(fraction_fleet())
    assert basis == 24576
    assert vgpu.requests(parse_share("milli:470"), 1, basis) == {vgpu.NUMBER: "1", vgpu.CORES: "47",
                                                                 vgpu.MEMORY: "11550"}
    assert vgpu.requests(parse_share("milli:5"), 1, basis)[vgpu.CORES] == "1"       # whole percent, up
    assert vgpu.requests(parse_share(""), 2, basis) == {vgpu.NUMBER: "2", vgpu.CORES: "100"}


def test_assignment_annotation_is_read_back_per_gpu():
    text = "GPU-gpu-00002-001,NVIDIA,11550,47:;"
    assert vgpu.assigned(text) == [(1, 11550, 47)]
    assert vgpu.assigned("GPU-n-000,NVIDIA,0,100:GPU-n-003,NVIDIA,0,100:") == [(0, 0, 100), (3, 0, 100)]


def test_placed_slices_accounting_and_overcommit():
    fleet = fraction_fleet()
    book = vgpu.PlacedSlices(fleet, {fleet.node_name(i): i for i in range(fleet.nodes)})
    assert book.vgpu_gpus == 4 and book.state.capacity == 8
    share = parse_share("milli:470")
    on = "GPU-gpu-00001-001,NVIDIA,11550,47:"
    assert book.hold("a", "pa", "gpu-00001", on, share)
    assert book.hold("b", "pb", "gpu-00001", on, share)
    assert not book.hold("c", "pc", "gpu-00001", "", share)               # no assignment yet
    assert book.hold("c", "pc", "gpu-00001", on, share)                   # 1410 milli on one GPU: refused
    f = book.figures()
    assert (f["slices_held"], f["overcommitted"], f["allocated_gpus"]) == (2, 1, 0.94)
    assert f["allocation_ratio"] == 0.1175 and f["mismatched"] == 0
    assert book.hold("w", "pw", "gpu-00000", "", parse_share(""), 3)       # whole GPUs on the whole pool
    assert book.used_whole().tolist() == [3, 0, 0]
    sample = book.sample({("milli:470", 1, ""): 1.0}, set(), np.ones(3, dtype=bool))
    assert (sample["capacity_gpus"], sample["allocated_compute_gpus"], sample["allocated_whole_gpus"]) == (8.0, 3.94, 3)
    book.release("w")
    book.release("a")
    book.release("c")
    assert book.figures()["allocated_gpus"] == 0.47
    assert book.placements == [("pa", 1, 1, "milli:470"), ("pb", 1, 1, "milli:470"), ("pc", 1, 1, "milli:470"),
                               ("pw", 0, 0, ""), ("pw", 0, 1, ""), ("pw", 0, 2, "")]


def test_scheduler_conf_with_vgpu_turns_on_deviceshare():
    conf = yaml.safe_load(scheduler_conf({"plugins": ["gang", "binpack"], "vgpu_policy": "spread"}, vgpu=True))
    second = {p["name"]: p.get("arguments", {}) for p in conf["tiers"][1]["plugins"]}
    assert second["deviceshare"] == {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": "spread",
                                     "deviceshare.ScheduleWeight": 10}
    assert "predicates" in second            # its allocate handler writes the chosen GPUs on the pod
    assert second["binpack"]["binpack.resources"] == "nvidia.com/gpu,volcano.sh/vgpu-cores"
    plain = yaml.safe_load(scheduler_conf({"plugins": ["gang", "binpack"]}))
    assert [p["name"] for p in plain["tiers"][1]["plugins"]] == ["binpack"]
