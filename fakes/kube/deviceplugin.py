"""GPUs as the NVIDIA device plugin advertises them: extended resources on the node, counted per node.

The mixed MIG strategy (NVIDIA/k8s-device-plugin, internal/rm/rm.go AddDefaultResourcesToConfig,
commit 014b4ec; device_map.go buildGPUDeviceMap) advertises
  * every GPU without MIG as one `nvidia.com/gpu`, and a MIG-enabled GPU not at all as a GPU;
  * every MIG instance as one `nvidia.com/mig-<profile>` with "+" replaced by "." (so
    1g.10gb+me is `nvidia.com/mig-1g.10gb.me`).
A node of a MIG pool therefore reports, per profile of its fixed layout, layout count x GPUs. A
member asking for `mig:P` requests one `nvidia.com/mig-P`; a whole-GPU member `nvidia.com/gpu`.

kube-scheduler counts these like any extended resource: NodeResourcesFit filters by count and
scores by the resources its scoring strategy lists; which instance of the node the pod then gets is
the kubelet device manager's choice, so without a kubelet (KWOK) a slice lands on a node, not on
a particular instance. What the device plugin cannot express exactly, and therefore refuses here:
dynamic MIG (the plugin advertises only instances that exist; a MIG manager reconfigures the whole
node from a label, not per pod), milli fractions and shards (time-slicing or MPS advertise
`replicas` equal copies of a GPU; a request cannot name its size nor keep K copies on one GPU).
Those need DRA (fakes/kube/dra.py).
"""
from __future__ import annotations

from loadgen.model.errors import UserError
from loadgen.model.gpushare import GpuShare

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
PRODUCT = "nvidia.com/gpu.product"      # the node label Fleet.node_labels sets to the GPU model


def mig_resource(profile: str) -> str:
    """The extended resource the mixed strategy names a MIG profile by."""
    return (MIG_PREFIX + profile).replace("+", ".")


def check_fleet(fleet, where: str = "kube.gpu_api") -> None:
    """UserError unless every pool of `fleet` can be advertised as device-plugin resources."""
    for pool in fleet.pools:
        s = pool.sharing
        if s.mode == "mig" and not s.layout:
            raise UserError(f"{where}: device_plugin cannot advertise pool {pool.name!r}: dynamic MIG (no layout) "
                            "has no fixed instances; give the pool a mig_layout or use gpu_api: dra")
        if s.mode in ("fraction", "shards"):
            raise UserError(f"{where}: device_plugin cannot advertise pool {pool.name!r}: {s.mode} shares have no "
                            "device-plugin resource of their size; use gpu_api: dra")


def node_gpus(fleet, i: int) -> dict[str, str]:
    """Node i's GPU capacity as the device plugin reports it (whole GPUs or MIG instances)."""
    pool, gpus = fleet.pool(i), int(fleet.gpus_of[i])
    if pool.sharing.mode != "mig":
        return {GPU: str(gpus)}
    counts = pool.sharing.per_gpu(pool.model())
    return {mig_resource(text.split(":", 1)[1]): str(n * gpus) for text, n in counts.items()}


def fleet_resources(fleet) -> list[str]:
    """Every extended resource the fleet's nodes report (for the scheduler's scoring list)."""
    names = {GPU}
    for pool in fleet.pools:
        if pool.sharing.mode == "mig":
            names.update(mig_resource(p) for p, _ in pool.sharing.instances(pool.model()))
    return sorted(names)


def member_requests(share: GpuShare, gpus: int) -> dict[str, str]:
    """What one member's container requests for its GPUs (whole: `gpus` of nvidia.com/gpu)."""
    if share.is_whole:
        return {GPU: str(gpus)}
    if share.kind == "mig":
        return {mig_resource(share.profile): "1"}
    raise UserError(f"share {share}: the device plugin has no resource for it; use kube.gpu_api: dra")


def model_affinity(models: tuple[str, ...]) -> dict:
    """Pod spec fields keeping a member on nodes of the GPU `models` it accepts (none: any)."""
    if not models:
        return {}
    term = {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": list(models)}]}
    required = {"nodeSelectorTerms": [term]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}
