"""GPU slices on the real kube-scheduler 1.36 (kube-apiserver, etcd, kwok; needs `make k8s-bins`).

Two small clusters, one per mechanism fakes/kube/gpusharing.py offers:
  device_plugin  a node of fixed-layout MIG H100s advertises nvidia.com/mig-* as the NVIDIA device
                 plugin's mixed strategy does; the scheduler counts instances per node;
  dra            gangstorm's ResourceSlices for a dynamic-MIG node (partitionable devices with
                 memory-slice counters), a fraction node (consumable milli capacity) and a shards
                 node; each member's claim is allocated by kube-scheduler and read back.
Members are submitted one at a time and each waits until it is bound or the scheduler calls it
unschedulable, so the device each lands on is the allocator's deterministic in-order choice.
"""
from __future__ import annotations

import json
import time

import pytest

from fakes.kube.cluster import leftover_processes
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.job import Job
from loadgen.model.target import TargetContext
from support.kube import KUBE_DEFAULTS

pytestmark = pytest.mark.real

LAYOUT = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")


def make_target(run_dir, pools, gpu_api):
    from fakes.kube.target import RealKube
    fleet = Fleet(nodes=sum(p.nodes for p in pools), gpus_per_node=2, pools=tuple(pools))
    ctx = TargetContext(fleet=fleet, config={**KUBE_DEFAULTS, "gpu_api": gpu_api},
                        control_plane={"etcd_quota_bytes": 2 * 1024**3}, seed=1, run_dir=run_dir)
    return RealKube(ctx)


@pytest.fixture(scope="module")
def cluster_of(bins, tmp_path_factory):
    started = []

    def start(pools, gpu_api):
        run_dir = tmp_path_factory.mktemp(f"kube-gpushare-{gpu_api}")
        target = make_target(run_dir, pools, gpu_api)
        started.append((target, run_dir))
        target.start()
        return target

    yield start
    for target, run_dir in started:
        target.stop()
        assert leftover_processes(under=run_dir) == [], "control-plane processes left behind"


def pod(target, name):
    return json.loads(target.api.read_namespaced_pod(name, target.ns, _preload_content=False).data)


def unschedulable(body) -> str:
    """The scheduler's message when it called the pod unschedulable, else ''."""
    for c in (body.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return c.get("message", "")
    return ""


def place(target, job_id, share="", gpus=1):
    """Submit one single-member job; advance until its pod is bound (True) or unschedulable (False)."""
    job = Job(id=job_id, tenant="t", queue="default", cls="c", members=1, gpus_per_member=gpus, duration_s=3600,
              submit_s=0.0, min_available=1, cpus_per_member=1, share=share)
    t0 = time.monotonic()
    target.submit(job, 0.0)
    name = f"j{job_id}-m0"
    for _ in range(600):                      # bounded by checks (0.1 s apart), not by a deadline
        target.advance(time.monotonic() - t0)
        body = pod(target, name) if any(p.name == name for p in target.pods.values()) else {}
        if (body.get("spec") or {}).get("nodeName"):
            for _ in range(100):              # the booking follows the claim watch / pod watch
                target.advance(time.monotonic() - t0)
                if _booked(target, job_id):
                    break
                time.sleep(0.05)
            return True
        if body and unschedulable(body):
            return False
        time.sleep(0.1)
    raise AssertionError(f"{name}: neither bound nor unschedulable after 600 checks")


def _booked(target, job_id):
    uid = next((u for u, p in target.pods.items() if p.job == job_id), None)
    if target.gpu_api == "device_plugin":
        return uid is not None and target.book.holds(uid)
    claims = target.claim_watch.known.values()
    return any(target.book.holds(c["metadata"]["uid"]) and
               any(o.get("uid") == uid for o in c["metadata"].get("ownerReferences") or []) for c in claims)


def where(target):
    """(node, gpu, share, start) of every slice held, sorted."""
    return sorted((p["node"], p["gpu"], p["share"], p.get("start", -1)) for p in target.book.placements())


def test_device_plugin_mixed_strategy_counts_mig_instances_per_node(cluster_of):
    kube = cluster_of([NodePool("mig", 1, "h100-80gb", Sharing("mig", LAYOUT)),
                       NodePool("whole", 1, "h100-80gb")], "device_plugin")
    node = json.loads(kube.api.read_node("gpu-00000", _preload_content=False).data)
    gpus = {k: v for k, v in node["status"]["allocatable"].items() if k.startswith("nvidia.com/")}
    assert gpus == {"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-2g.20gb": "2", "nvidia.com/mig-1g.10gb": "4"}
    assert "nvidia.com/gpu" not in gpus          # a MIG-enabled GPU is not advertised whole

    assert [place(kube, i, "mig:1g.10gb") for i in range(5)] == [True] * 4 + [False]
    assert [place(kube, 10 + i, "mig:3g.40gb") for i in range(3)] == [True, True, False]
    assert [place(kube, 20 + i) for i in range(3)] == [True, True, False]      # the whole node's 2 GPUs
    assert "Insufficient nvidia.com/mig-1g.10gb" in unschedulable(pod(kube, "j4-m0"))
    booked = where(kube)
    assert sum(1 for n, _, s, _ in booked if s == "mig:1g.10gb") == 4
    assert {(n, s) for n, _, s, _ in booked} == {("gpu-00000", "mig:1g.10gb"), ("gpu-00000", "mig:3g.40gb"),
                                                 ("gpu-00001", "whole")}
    fig = kube.sharing_figures()
    assert fig["capacity_overruns"] == 0 and fig["slices_placed"] == 8


def test_dra_allocates_mig_partitions_milli_and_shards_by_the_published_slices(cluster_of):
    kube = cluster_of([NodePool("mig", 1, "h100-80gb", Sharing("mig")),
                       NodePool("frac", 1, "h100-80gb", Sharing("fraction")),
                       NodePool("shard", 1, "h100-80gb", Sharing("shards", shards_per_gpu=4))], "dra")
    assert kube.figures["resource_slices"] == 3 + 1 + 1   # counters + one device slice per MIG GPU; one each
    # dynamic MIG: partitions in slice order, memory-slice counters keep instances apart
    assert [place(kube, i, s) for i, s in enumerate(
        ["mig:3g.40gb", "mig:4g.40gb", "mig:3g.40gb", "mig:3g.40gb", "mig:1g.10gb"])] == [True] * 4 + [False]
    assert [b for b in where(kube) if b[0] == "gpu-00000"] == [
        ("gpu-00000", 0, "mig:3g.40gb", 0), ("gpu-00000", 0, "mig:3g.40gb", 4),
        ("gpu-00000", 1, "mig:3g.40gb", 4), ("gpu-00000", 1, "mig:4g.40gb", 0)]
    # fraction: consumable milli capacity, first device with room
    assert [place(kube, 10 + i, s) for i, s in enumerate(
        ["milli:600", "milli:600", "milli:300", "milli:500"])] == [True, True, True, False]
    assert [b for b in where(kube) if b[0] == "gpu-00001"] == [
        ("gpu-00001", 0, "milli:300", -1), ("gpu-00001", 0, "milli:600", -1), ("gpu-00001", 1, "milli:600", -1)]
    # shards: 3 + 1 on GPU 0, 2 on GPU 1; then a whole GPU finds no idle GPU anywhere
    assert [place(kube, 20 + i, s) for i, s in enumerate(["shards:3", "shards:2", "shards:1"])] == [True] * 3
    assert place(kube, 30) is False
    assert [b for b in where(kube) if b[0] == "gpu-00002"] == [
        ("gpu-00002", 0, "shards:1", -1), ("gpu-00002", 0, "shards:3", -1), ("gpu-00002", 1, "shards:2", -1)]
    for ledgers in kube.book.ledgers:        # nothing exceeds a GPU's capacity
        for led in ledgers:
            assert led.used_milli <= 1000 and led.used_shards <= 4
    fig = kube.sharing_figures()
    assert fig["capacity_overruns"] == 0 and fig["slices_placed"] == 10
