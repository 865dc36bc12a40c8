"""GPUs as a DRA driver publishes them (resource.k8s.io/v1), and members' shares as ResourceClaims.

gangstorm plays the DRA driver for its KWOK nodes: one DeviceClass (`gpu.gangstorm.io`, every
device of the driver) and, per node, a resource pool named after the node whose ResourceSlices
list its GPUs by the node pool's sharing mode:
  whole     one device per GPU (`gpu-<g>`), allocated exclusively;
  fraction  one device per GPU with allowMultipleAllocations and capacity `milli` 1000: a
            `milli:N` claim requests capacity milli N (KEP-5075 consumable capacity,
            DRAConsumableCapacity, beta and on by default in 1.36);
  shards    the same with capacity `shards` K;
  mig       a fixed layout: one device per instance (`gpu-<g>-mig-<profile>-at-<start>`);
            dynamic (no layout): one device per (profile, start) the MIG placement rules allow,
            each consuming from its GPU's counter set (KEP-4815 partitionable devices,
            DRAPartitionableDevices, beta and on by default in 1.36, kubernetes v1.36.1
            pkg/features/kube_features.go): one counter per memory slice (value 1; an instance
            consumes the slices it covers, so overlapping instances exclude each other) and
            `media-ext` 1 (the +me profiles' one-per-GPU limit). In 1.36 a ResourceSlice holds either
            devices or sharedCounters, so a dynamic-MIG pool is one counter slice plus one device
            slice per GPU (a slice whose devices consume counters holds at most 64 of them).
Every device carries the attributes mode, gpu (index), model and, for MIG, profile and start. The
allocator walks a pool's slices in name order (k8s.io/dynamic-resource-allocation v0.36.1,
structured/internal/experimental/pools_experimental.go) and each slice's devices in order, so
slice names carry a zero-padded index and devices are listed GPU by GPU.

A member's share is a ResourceClaimTemplate per distinct (share, GPU count) that its pod names;
kube-controller-manager's resourceclaim controller makes each pod's claim, kube-scheduler's
DynamicResources plugin allocates it and writes `status.allocation`, which `allocated` reads back
(pool = node, device = which GPU or MIG instance). A whole-GPU request with no capacity request
consumes the full capacity of a shared device, so it takes only an idle GPU of any non-MIG pool.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from loadgen.model.gpushare import MEMORY_SLICES, GpuShare, parse_share

DRIVER = "gpu.gangstorm.io"
DEVICE_CLASS = DRIVER
API = "resource.k8s.io/v1"
SHARE_ANNOTATION = "gangstorm.io/share"
CLAIM = "gpu"                     # the pod's name for its claim and the claim's one request
MAX_COUNTER_SETS = 8              # per ResourceSlice (resource.k8s.io/v1 validation)


@dataclass(frozen=True)
class DeviceRef:
    """What a published device is: GPU `gpu` of its node, or a MIG instance of `profile` at `start`."""
    gpu: int
    profile: str = ""
    start: int = -1


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_name(ref: DeviceRef) -> str:
    if not ref.profile:
        return f"gpu-{ref.gpu}"
    return f"gpu-{ref.gpu}-mig-{slug(ref.profile)}-at-{ref.start}"


def _attrs(mode: str, model: str, ref: DeviceRef) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": {"string": mode}, "model": {"string": model}, "gpu": {"int": ref.gpu}}
    if ref.profile:
        out["profile"] = {"string": ref.profile}
        out["start"] = {"int": ref.start}
    return out


def device_refs(fleet, i: int) -> list[DeviceRef]:
    """The devices node i publishes, in slice order."""
    pool, gpus = fleet.pool(i), int(fleet.gpus_of[i])
    s, model = pool.sharing, pool.model()
    if s.mode != "mig":
        return [DeviceRef(g) for g in range(gpus)]
    if s.layout:
        return [DeviceRef(g, p, start) for g in range(gpus) for p, start in s.instances(model)]
    return [DeviceRef(g, p.name, start) for g in range(gpus) for p in model.mig for start in p.starts]


def node_devices(fleet, i: int) -> dict[str, DeviceRef]:
    """Device name -> what it is, for reading an allocation on node i back."""
    return {device_name(r): r for r in device_refs(fleet, i)}


def _device(fleet, i: int, ref: DeviceRef) -> dict[str, Any]:
    pool = fleet.pool(i)
    s, model = pool.sharing, pool.model()
    dev: dict[str, Any] = {"name": device_name(ref), "attributes": _attrs(s.mode, model.name, ref)}
    if s.mode == "fraction":
        dev["allowMultipleAllocations"] = True
        dev["capacity"] = {"milli": {"value": "1000"}}
    elif s.mode == "shards":
        dev["allowMultipleAllocations"] = True
        dev["capacity"] = {"shards": {"value": str(s.shards_per_gpu)}}
    elif s.mode == "mig" and not s.layout:
        prof = model.mig_profile(ref.profile)
        counters = {f"memory-slice-{k}": {"value": "1"} for k in range(ref.start, ref.start + prof.memory)}
        if prof.max_count == 1 and prof.name.endswith("+me"):
            counters["media-ext"] = {"value": "1"}
        dev["consumesCounters"] = [{"counterSet": f"gpu-{ref.gpu}", "counters": counters}]
    return dev


def _counter_set(g: int) -> dict[str, Any]:
    counters = {f"memory-slice-{k}": {"value": "1"} for k in range(MEMORY_SLICES)}
    counters["media-ext"] = {"value": "1"}
    return {"name": f"gpu-{g}", "counters": counters}


def node_slices(fleet, i: int, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices of node i's pool (named `node`), complete: resourceSliceCount of them."""
    pool, gpus = fleet.pool(i), int(fleet.gpus_of[i])
    refs = device_refs(fleet, i)
    specs: list[dict[str, Any]] = []
    if pool.sharing.mode == "mig" and not pool.sharing.layout:
        for first in range(0, gpus, MAX_COUNTER_SETS):
            last = min(gpus, first + MAX_COUNTER_SETS)
            specs.append({"sharedCounters": [_counter_set(g) for g in range(first, last)]})
        for g in range(gpus):
            specs.append({"devices": [_device(fleet, i, r) for r in refs if r.gpu == g]})
    else:
        for first in range(0, len(refs), 128):
            specs.append({"devices": [_device(fleet, i, r) for r in refs[first:first + 128]]})
    out = []
    for k, extra in enumerate(specs):
        out.append({"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}-{k:03d}"},
                    "spec": {"driver": DRIVER, "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": len(specs)}, **extra}})
    return out


def device_class() -> dict[str, Any]:
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _attr(name: str) -> str:
    return f'device.attributes["{DRIVER}"].{name}'


def template_name(share: GpuShare, gpus: int, models: tuple[str, ...] = ()) -> str:
    return f"gpu-{slug(share.text) or 'whole'}-x{gpus}" + "".join(f"-{slug(m)}" for m in models)


def claim_template(share: GpuShare, gpus: int, models: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ResourceClaimTemplate a member with `share` (whole: `gpus` GPUs) names in its pod,
    on a GPU of one of `models` (catalogue names, as Job.gpu_spec lists them; empty: any)."""
    exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1}
    if share.is_whole:
        exactly["count"] = gpus
        sel = f'{_attr("mode")} != "mig"'
    elif share.kind == "mig":
        sel = f'{_attr("mode")} == "mig" && {_attr("profile")} == "{share.profile}"'
    else:
        mode = "fraction" if share.kind == "milli" else "shards"
        cap = "milli" if share.kind == "milli" else "shards"
        sel = f'{_attr("mode")} == "{mode}"'
        exactly["capacity"] = {"requests": {cap: str(share.amount)}}
    if models:
        sel += f' && {_attr("model")} in [{", ".join(chr(34) + m + chr(34) for m in models)}]'
    exactly["selectors"] = [{"cel": {"expression": sel}}]
    ann = {SHARE_ANNOTATION: share.text or f"whole:{gpus}"}
    return {"apiVersion": API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": template_name(share, gpus, models), "annotations": ann},
            "spec": {"metadata": {"annotations": ann},
                     "spec": {"devices": {"requests": [{"name": CLAIM, "exactly": exactly}]}}}}


def pod_claim_fields(share: GpuShare, gpus: int, models: tuple[str, ...] = ()) -> dict[str, Any]:
    """The pod spec's resourceClaims entry for the member's template."""
    return {"resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": template_name(share, gpus, models)}]}


@dataclass(frozen=True)
class Allocated:
    """One device of an allocated claim: node pool, device name, what it took."""
    node: str
    device: str
    share: GpuShare


def claim_share(claim: dict[str, Any]) -> GpuShare:
    text = ((claim.get("metadata") or {}).get("annotations") or {}).get(SHARE_ANNOTATION, "")
    return parse_share("" if text.startswith("whole") else text)


def allocated(claim: dict[str, Any]) -> list[Allocated]:
    """The devices kube-scheduler allocated to `claim` (empty while it is unallocated)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    results = (alloc.get("devices") or {}).get("results") or []
    share = claim_share(claim)
    return [Allocated(r["pool"], r["device"], share) for r in results if r.get("driver") == DRIVER]


def consumed(claim: dict[str, Any]) -> list[dict[str, str]]:
    """What each allocated device's consumedCapacity says (consumable-capacity devices only)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [r.get("consumedCapacity") or {} for r in (alloc.get("devices") or {}).get("results") or []]
