"""HAMi vGPU on Volcano's deviceshare plugin: what gangstorm writes on a fake node in place of the
volcano-vgpu-device-plugin, how a share becomes a vGPU request, and where vc-scheduler put it.

Sources (Volcano v1.14.1, the module tools/volcano/build.sh builds; HAMi's
Project-HAMi/volcano-vgpu-device-plugin for the node side):
* pkg/scheduler/api/devices/config/vgpu.go: the resource names volcano.sh/vgpu-number,
  volcano.sh/vgpu-memory (MiB), volcano.sh/vgpu-cores (percent of one GPU) and the node
  annotations volcano.sh/node-vgpu-register and volcano.sh/node-vgpu-handshake.
* pkg/scheduler/api/devices/nvidia/vgpu/utils.go decodeNodeDevices: the register annotation is one
  "UUID,count,memoryMiB,type,health,mode:" entry per GPU (six fields; the device plugin's
  util.EncodeNodeDevices writes the same), count = how many vGPUs may share the GPU
  (deviceSplitCount, default 10), type must contain "NVIDIA", mode "hami-core" (time-sliced,
  memory- and SM-limited by HAMi-core) or "mig".
* vgpu/device_info.go NewGPUDevices: the scheduler uses a node's GPUs only while the handshake
  says neither "Requesting_<time>" older than 60 s nor "Deleted"; it answers a fresh report by
  writing "Requesting_<now>", and the device plugin re-reports every 30 s (register.go
  WatchAndRegister). `Handshake` plays the device plugin's part of that exchange.
* vgpu/utils.go checkNodeGPUSharingPredicateAndScore: a container asking for vgpu-number n takes
  n GPUs of one node, each with memory and cores left (cores <= 100 in total, cores 100 = the GPU
  alone), walking the node's GPUs from the highest index down; Allocate then writes the choice on
  the pod as volcano.sh/vgpu-ids-new = "UUID,NVIDIA,memMiB,cores:" per GPU before binding.
* The node's capacity carries the three resources, as kubelet publishes them from the device
  plugin's ListAndWatch (vgpu-number: count per GPU; vgpu-memory: one virtual device per MiB,
  gpuMemoryFactor 1); vc-scheduler's resource fit compares a pod's scalar requests to it.

A share is asked for as (loadgen.model.gpushare): milli:N -> one vGPU with N/10 cores (rounded
up: HAMi limits SMs in whole percent) and N/1000 of the smallest shared GPU's memory (so that the
cores, not the memory, decide what fits, as the milli ledger does); a whole GPU on a vGPU node ->
vgpu-number k with 100 cores (exclusive) and no memory asked (the scheduler then takes all of it).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from fakes.sim.slices import SliceState
from loadgen.model.fleet import Fleet
from loadgen.model.gpushare import MILLI, GpuModel, GpuShare, parse_share

NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
REGISTER, HANDSHAKE = "volcano.sh/node-vgpu-register", "volcano.sh/node-vgpu-handshake"
ASSIGNED = "volcano.sh/vgpu-ids-new"     # written on the pod by the deviceshare plugin at allocation
SPLIT = 10                               # deviceSplitCount: vGPUs per GPU (the plugin's default)
MODE = "hami-core"
FULL_CORES = 100
# A catalogue model without published memory (openb's anonymised G2/G3) registers this much, so
# that memory never decides a fit there either.
UNKNOWN_MEMORY_MIB = 16 * 1024
REPORT_EVERY_S = 30.0                    # the device plugin's re-registration period
TIME_FORMAT = "%Y.%m.%d %H:%M:%S"        # Go's "2006.01.02 15:04:05", as the scheduler parses it


def shares_by_vgpu(fleet: Fleet) -> bool:
    """Whether any node pool shares its GPUs by fraction: those nodes get the vGPU device plugin."""
    return any(p.sharing.mode == "fraction" for p in fleet.pools)


def vgpu_node(fleet: Fleet, i: int) -> bool:
    return bool(fleet.pools) and fleet.sharing_of(i).mode == "fraction"


def memory_mib(model: GpuModel) -> int:
    return int(model.memory_gib * 1024) or UNKNOWN_MEMORY_MIB


def gpu_uuid(node: str, k: int) -> str:
    """GPU k of `node`. Fixed width: the scheduler matches a pod's assignment to a GPU by substring
    (strings.Contains), so no GPU's id may be part of another's on the same node."""
    return f"GPU-{node}-{k:03d}"


def gpu_index(uuid: str) -> int:
    return int(uuid.rsplit("-", 1)[1])


def register_annotation(node: str, model: GpuModel, gpus: int) -> str:
    return "".join(f"{gpu_uuid(node, k)},{SPLIT},{memory_mib(model)},NVIDIA-{model.name},true,{MODE}:"
                   for k in range(gpus))


def capacity(model: GpuModel, gpus: int) -> dict[str, str]:
    return {NUMBER: str(gpus * SPLIT), MEMORY: str(gpus * memory_mib(model)), CORES: str(gpus * FULL_CORES)}


def reported(now: float | None = None) -> str:
    return "Reported_" + time.strftime(TIME_FORMAT, time.localtime(now))


def node_extras(fleet: Fleet, i: int, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(annotations, capacity) the vGPU device plugin gives fleet node i; empty off fraction pools."""
    if not vgpu_node(fleet, i):
        return {}, {}
    model, gpus = fleet.gpu_model_of(i), int(fleet.gpus_of[i])
    return {REGISTER: register_annotation(name, model, gpus), HANDSHAKE: reported()}, capacity(model, gpus)


def request_memory_basis(fleet: Fleet) -> int:
    """MiB of the smallest GPU any fraction pool holds: a milli share asks for its part of that."""
    return min(memory_mib(p.model()) for p in fleet.pools if p.sharing.mode == "fraction")


def requests(share: GpuShare, gpus: int, memory_basis: int) -> dict[str, str]:
    """The vGPU resources a member with `share` (or `gpus` whole GPUs) asks for."""
    if share.kind == "milli":
        return {NUMBER: "1", CORES: str(math.ceil(share.amount * FULL_CORES / MILLI)),
                MEMORY: str(share.amount * memory_basis // MILLI)}
    if share.kind == "whole":
        return {NUMBER: str(max(1, gpus)), CORES: str(FULL_CORES)}
    raise ValueError(f"a {share} share has no vGPU request (only milli and whole GPUs)")


def assigned(text: str) -> list[tuple[int, int, int]]:
    """(GPU index, memory MiB, cores) per GPU of a volcano.sh/vgpu-ids-new annotation."""
    out = []
    for container in text.split(";"):
        for dev in container.split(":"):
            if "," in dev:
                uuid, _, mem, cores = dev.split(",")[:4]
                out.append((gpu_index(uuid), int(mem), int(cores)))
    return out


class Handshake:
    """The device plugin's side of the handshake for the vGPU nodes: every REPORT_EVERY_S, each
    node's handshake annotation says "Reported_<now>" again (one patch per node, on `submit`).

    Each report is a Node event, and only a Node event makes v1.14.1's scheduler rebuild a node's
    vGPU books (api/node_info.go setNode); until then every share placed since the last rebuild
    stays booked, finished or not (docs/gpu-sharing.md, "## Volcano"). So `every_s` decides how
    soon a GPU is usable again, as the real plugin's 30 s does on a real node."""

    def __init__(self, patch: Callable[[str, dict[str, Any]], None], names: list[str],
                 every_s: float = REPORT_EVERY_S):
        self.patch, self.names, self.every_s = patch, list(names), every_s
        self.reports = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vgpu-handshake", daemon=True)

    def start(self) -> Handshake:
        if self.names:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            body = {"metadata": {"annotations": {HANDSHAKE: reported()}}}
            for name in self.names:
                if self._stop.is_set():
                    return
                try:
                    self.patch(name, body)
                    self.reports += 1
                except Exception:
                    self.errors += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


class PlacedSlices:
    """Where vc-scheduler put each slice, read back from the pods' volcano.sh/vgpu-ids-new and
    accounted on exactly that GPU of the twins' slice state (fakes/sim/slices.py SliceState), so
    a real run's allocation, fragmentation and stranded capacity are measured as the twins' are.
    Whole-GPU pods on nodes outside the fraction pools take idle GPUs of their node.

    A placement the ledger refuses (the scheduler put more on a GPU than it holds) holds nothing
    and is counted in `overcommitted`, never silently dropped."""

    def __init__(self, fleet: Fleet, node_index: dict[str, int]):
        self.fleet, self.node_index = fleet, node_index
        self.state = SliceState(fleet)
        self.vgpu_gpus = sum(int(fleet.gpus_of[i]) for i in range(fleet.nodes) if vgpu_node(fleet, i))
        self.owner: dict[str, int] = {}                           # pod uid -> owner id in the state
        self.placements: list[tuple[str, int, int, str]] = []     # (pod name, node, gpu, share) in bind order
        self.peak = 0.0
        self.overcommitted = 0
        self.mismatched = 0             # the annotation's cores differ from what the share asked for

    def hold(self, uid: str, name: str, node: str, text: str, share: GpuShare, gpus: int = 1) -> bool:
        """Record pod `uid` on `node` as its assignment `text` says (a vGPU node) or on idle GPUs
        (a whole-GPU node); False while a vGPU pod carries no assignment yet."""
        if uid in self.owner:
            return True
        i = self.node_index.get(node)
        if i is None:
            return False
        owner = self.owner[uid] = len(self.owner) + 1
        if not vgpu_node(self.fleet, i):
            for k in self.state.take_whole(owner, i, gpus):
                self.placements.append((name, i, k, ""))
            return True
        devices = assigned(text) if text else []
        if not devices:
            del self.owner[uid]
            return False
        one = share if share.kind == "milli" else parse_share("")
        want = requests(one, 1, 0)[CORES]
        for k, _, cores in devices:
            self.mismatched += str(cores) != want
            if self.state.place_at(owner, i, k, one) is None:
                self.overcommitted += 1
            self.placements.append((name, i, k, one.text))
        self.peak = max(self.peak, self.state.allocated_compute)
        return True

    def release(self, uid: str) -> None:
        owner = self.owner.pop(uid, None)
        if owner is not None:
            self.state.give_back(owner)

    def used_whole(self) -> np.ndarray:
        """Whole GPUs held per node (a slice is counted in gpu_sharing, as the twins count)."""
        return self.state.whole_held_per_node()

    def sample(self, shapes: dict, pending: set, up: np.ndarray) -> dict[str, float]:
        """What a snapshot carries (Snapshot.gpu_sharing), as the twins' fakes/sim/base.py does."""
        return self.state.real_sample(shapes, pending, up)

    def figures(self) -> dict[str, Any]:
        cap = self.state.capacity or 1.0
        return {"vgpu_gpus": self.vgpu_gpus, "slices_held": sum(len(v) for v in self.state.holdings.values()),
                "slices_placed": len(self.placements),
                "allocated_gpus": round(self.state.allocated_compute, 6),
                "allocation_ratio": round(self.state.allocated_compute / cap, 6),
                "peak_allocation_ratio": round(self.peak / cap, 6),
                "overcommitted": self.overcommitted, "mismatched": self.mismatched}
