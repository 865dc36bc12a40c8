"""GPU sharing on the real kube backend: what the KWOK nodes advertise, how a member asks for its
share, and where the real kube-scheduler put each slice (fakes/kube/slicebook.py).

`kube.gpu_api` picks the mechanism:
  device_plugin  extended resources as the NVIDIA device plugin's mixed MIG strategy advertises
                 them (fakes/kube/deviceplugin.py): whole GPUs and fixed-layout MIG instances;
                 the scheduler picks the node, the slice is booked on the node's first GPU where it fits;
  dra            gangstorm publishes ResourceSlices for its nodes and each member's pod gets a
                 ResourceClaim from a template (fakes/kube/dra.py): every sharing mode, and the
                 allocation (which GPU, which MIG instance) is read back from the claim's status;
  auto           (default) device_plugin when it can express every pool, else dra
(the choice: fakes/kube/gpuapi.py). A fleet without node pools keeps the plain nvidia.com/gpu path and no book.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from fakes.kube import deviceplugin, dra
from fakes.kube.claims import ClaimWatch
from fakes.kube.gpuapi import choose_api
from fakes.kube.slicebook import SliceBook
from loadgen.model.errors import UserError
from loadgen.model.gpushare import GpuShare
from loadgen.model.target import Snapshot

# Both beta and on by default in kube 1.36 (pkg/features/kube_features.go); named so that a build
# where they are missing or locked off fails at start rather than allocating without them.
DRA_GATES = "DRAPartitionableDevices=true,DRAConsumableCapacity=true"
# Makes each pod's ResourceClaim from its template and deletes it once the pod is gone (which frees
# the devices); kwokctl.yaml leaves it out. A repeated --controllers adds to the list.
CLAIM_CONTROLLER = "resourceclaim-controller"


class KubeGpuSharing:
    """Part of RealKube (fakes/kube/target.py); reads and sets its attributes."""

    def _init_sharing(self) -> None:
        self.gpu_api = choose_api(self.cfg, self.fleet, bool(self.existing))
        self.book = SliceBook(self.fleet) if self.gpu_api else None
        self.templates: set[str] = set()
        self.claim_watch: ClaimWatch | None = None
        self.slice_samples: list[dict[str, float]] = []
        self.shapes: dict[tuple[str, int, str], int] = {}   # the arrived jobs' task shapes -> count
        self.slice_log: list[dict[str, Any]] = []       # every placement, as the scheduler decided it

    # --- cluster ----------------------------------------------------------------------------------
    def sharing_cluster_options(self) -> dict[str, Any]:
        if self.gpu_api != "dra":
            return {}
        return {"feature_gates": DRA_GATES, "controller_manager_args": {"controllers": CLAIM_CONTROLLER}}

    def node_gpus(self, fleet, i: int) -> dict[str, str]:
        if self.gpu_api == "device_plugin":
            return deviceplugin.node_gpus(fleet, i)
        if self.gpu_api == "dra":
            return {}          # every GPU is a DRA device; the node lists no GPU resource
        return super().node_gpus(fleet, i)

    def scoring_resources(self) -> list[str]:
        return deviceplugin.fleet_resources(self.fleet) if self.gpu_api == "device_plugin" else []

    def _publish_devices(self, threads: int) -> None:
        """DRA: the DeviceClass, then every node's ResourceSlices (a complete pool per node)."""
        if self.gpu_api != "dra":
            return
        from kubernetes import client as k8s
        self.resource_api = k8s.ResourceV1Api(self.cluster.api_client(threads))
        self._retry(partial(self.resource_api.create_device_class, dra.device_class(), _preload_content=False))
        slices = [s for i in range(self.fleet.nodes) for s in dra.node_slices(self.fleet, i, self.node_names[i])]
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda body: self._retry(partial(self.resource_api.create_resource_slice, body,
                                                           _preload_content=False, _request_timeout=60)), slices))
        self.figures["resource_slices"] = len(slices)
        self.devices = {self.node_names[i]: dra.node_devices(self.fleet, i) for i in range(self.fleet.nodes)}
        self.claim_watch = ClaimWatch(k8s.ResourceV1Api(self.cluster.api_client(2)), self.ns,
                                      partial(self._post, self._on_claim), self.clock.now)
        self.claim_watch.start()

    # --- a member's request -----------------------------------------------------------------------
    def member_resources(self, job) -> tuple[dict[str, str], dict[str, Any], tuple[str, ...]]:
        """(container requests for GPUs, pod spec fields, container claim names) of one member."""
        share: GpuShare = job.gpu_share
        models = job.gpu_models
        if self.gpu_api == "dra":
            self._ensure_template(share, job.gpus_per_member, models)
            return {}, dra.pod_claim_fields(share, job.gpus_per_member, models), (dra.CLAIM,)
        if self.gpu_api == "device_plugin":
            return deviceplugin.member_requests(share, job.gpus_per_member), deviceplugin.model_affinity(models), ()
        if not share.is_whole:
            raise UserError(f"job {job.id}: share {share} needs a fleet with node pools that share GPUs")
        return {deviceplugin.GPU: str(job.gpus_per_member)}, {}, ()

    def _ensure_template(self, share: GpuShare, gpus: int, models: tuple[str, ...]) -> None:
        """The claim template for (share, gpus, models), created once on the caller's thread before
        the first pod that names it (a pod naming a missing template waits on the claim controller)."""
        name = dra.template_name(share, gpus, models)
        if name in self.templates:
            return
        self._retry(partial(self.resource_api.create_namespaced_resource_claim_template, self.ns,
                            dra.claim_template(share, gpus, models), _preload_content=False, _request_timeout=60))
        self.templates.add(name)

    # --- where slices landed ----------------------------------------------------------------------
    def _book_pod(self, t: float, pod) -> None:
        """Device plugin: the pod was bound to a node; book its share there."""
        if self.gpu_api != "device_plugin" or pod.job not in self.gangs:
            return
        i = self.node_index.get(pod.node)
        if i is None:
            return
        job = self.gangs[pod.job].job
        before = len(self.book.holdings.get(pod.uid, ()))
        self.book.place_on_node(pod.uid, i, job.gpu_share, job.gpus_per_member)
        self._log_placements(t, pod.uid, before)

    def _unbook_pod(self, t: float, pod) -> None:
        if self.gpu_api == "device_plugin":
            self.book.release(pod.uid)

    def _on_claim(self, t: float, typ: str, claim: dict[str, Any]) -> None:
        """DRA: a claim was allocated (book each device the scheduler chose) or went away."""
        uid = claim["metadata"]["uid"]
        devices = [] if typ == "DELETED" else dra.allocated(claim)
        if not devices:
            self.book.release(uid)
            return
        if self.book.holds(uid):
            return
        for d in devices:
            i, ref = self.node_index.get(d.node), self.devices.get(d.node, {}).get(d.device)
            if i is None or ref is None:
                self._count("claims_on_unknown_devices")
                continue
            self.book.place_at(uid, i, ref.gpu, d.share, ref.start)
        self._log_placements(t, uid, 0)

    def _log_placements(self, t: float, holder: str, before: int) -> None:
        for node, gpu, slot in self.book.holdings.get(holder, [])[before:]:
            self.slice_log.append({"t": round(t, 3), "node": self.node_names[node], "gpu": gpu,
                                   "share": slot.share.text or "whole",
                                   **({"start": slot.start} if slot.start >= 0 else {})})

    def sharing_used(self, used: np.ndarray) -> np.ndarray:
        """Whole GPUs held per node: DRA claims hold whole GPUs too (their pods request none)."""
        return used + self.book.whole_per_node() if self.gpu_api == "dra" else used

    def sharing_snapshot(self, snap: Snapshot) -> Snapshot:
        """The book's slice figures now (the twins' keys) as the Snapshot's gpu_sharing."""
        if self.book is None:
            return snap
        pending = {self._shape(g.job) for g in self.gangs.values() if g.admitted_t is None}
        up = np.ones(self.fleet.nodes, dtype=bool)
        up[sorted(self.down)] = False
        snap.gpu_sharing = self.book.sample(self.shapes, pending, up)
        self.slice_samples.append(snap.gpu_sharing)
        return snap

    @staticmethod
    def _shape(job) -> tuple[str, int, str]:
        """A job's task shape as the twins' fragmentation measure weighs it."""
        return job.share, job.gpus_per_member, job.gpu_spec

    def note_shape(self, job) -> None:
        if self.book is not None:
            key = self._shape(job)
            self.shapes[key] = self.shapes.get(key, 0) + 1

    def sharing_figures(self) -> dict[str, Any]:
        """The slice-level result of the real scheduler's decisions: time averages over every
        snapshot of the run (summary.json's gpu_sharing averages over the measurement window)."""
        if self.book is None:
            return {}
        rows = self.slice_samples
        cap = float(self.fleet.total_gpus)

        def mean(key: str) -> float | None:
            return round(float(np.mean([r[key] for r in rows])) / cap, 6) if rows else None

        by_share: dict[str, int] = {}
        for p in self.slice_log:
            by_share[p["share"]] = by_share.get(p["share"], 0) + 1
        return {"gpu_api": self.gpu_api, "allocation_ratio": mean("allocated_compute_gpus"),
                "allocation_ratio_memory": mean("allocated_memory_gpus"),
                "fragmentation_ratio": mean("fragmented_gpus"), "stranded_ratio": mean("stranded_gpus"),
                "allocation_ratio_peak": round(max((r["allocated_compute_gpus"] for r in rows), default=0.0) / cap, 6),
                "samples": len(rows), "slices_placed": len(self.slice_log), "slices_by_share": by_share,
                "capacity_overruns": len(self.book.overruns), "overrun_examples": self.book.overruns[:5],
                "device_choice": ("node only: the instance is the kubelet's pick, booked on the first GPU that fits"
                                  if self.gpu_api == "device_plugin" else
                                  "kube-scheduler's DRA allocator: device read back from ResourceClaim status")}

    def save_slice_log(self, run_dir) -> None:
        if self.book is None or run_dir is None:
            return
        with open(run_dir / "gpu-slices.jsonl", "w") as f:
            for row in self.slice_log:
                f.write(json.dumps(row) + "\n")
