"""Which mechanism carries GPUs to kube-scheduler for a fleet (`kube.gpu_api`): shared by the real
backend (fakes/kube/gpusharing.py), which advertises and requests GPUs that way, and the twin
(fakes/kube/sim.py), whose node score follows from it: under DRA a node lists no GPU resource and a
pod requests none, so NodeResourcesFit scores cpu and memory only."""
from __future__ import annotations

from fakes.kube import deviceplugin
from loadgen.model.errors import UserError

GPU_APIS = ("auto", "device_plugin", "dra")


def choose_api(cfg: dict, fleet, existing: bool) -> str:
    """The mechanism for this fleet (None of it without node pools), or a one-line UserError."""
    api = str(cfg.get("gpu_api", "auto"))
    if api not in GPU_APIS:
        raise UserError(f"kube.gpu_api: expected one of {', '.join(GPU_APIS)}; got {api!r}")
    if not fleet.pools:
        return ""
    if api == "auto":
        try:
            deviceplugin.check_fleet(fleet)
            api = "device_plugin"
        except UserError:
            api = "dra"
    if api == "device_plugin":
        deviceplugin.check_fleet(fleet)
    if api == "dra" and existing:
        raise UserError("kube.gpu_api: dra publishes cluster-wide DeviceClass and ResourceSlices: only on a "
                        "cluster gangstorm starts (no --kubeconfig)")
    return api
