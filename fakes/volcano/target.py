"""Real Volcano on a KWOK cluster: a gang is a Volcano Job in a Queue per tenant.

The cluster (started without kube-scheduler), the pod watch, admission and chaos are the
Kubernetes family's (fakes/kube/family/); vc-scheduler and vc-controller-manager run against
its apiserver (fakes/volcano/controlplane.py). What is Volcano's own: the adapter creates the
tenant's Queue and a Job with minAvailable, Volcano's job controller creates the pods, and when a
running member is lost Volcano restarts the whole job (PodEvicted -> RestartJob). Pods complete
after the job's (time-scaled) duration through the KWOK stage driven by the
`gangstorm.io/complete-after` annotation; a finished Job is deleted.

GPU sharing (fakes/volcano/vgpu.py): nodes of a fraction pool carry what HAMi's vGPU device plugin
publishes (register and handshake annotations, vgpu-number/-memory/-cores capacity; the handshake
is kept fresh while the run lasts), vc-scheduler runs the deviceshare plugin, a member's share is
asked for as vGPU resources, and the GPUs each pod got are read back from the annotation the
plugin writes before binding (PlacedSlices: slice-granular allocation, overcommit check).
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fakes.kube.family import TIMEOUT, Gang, RealKubeFamily
from fakes.kube.metrics import fetch
from fakes.kube.pods import COMPLETE_AFTER, GPU, PodView, go_duration, pod_spec
from fakes.kube.refusal import retryable
from fakes.real.procfs import cpu_seconds
from fakes.sim.slices import idle_whole_up, up_mask
from fakes.volcano import vgpu
from fakes.volcano.controlplane import VOLCANO_VERSION, VolcanoControlPlane, require_binaries
from fakes.volcano.metrics import controller_figures, scheduler_figures
from fakes.volcano.traits import VolcanoTraits
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import RUN_LABEL, ClusterRefused, Snapshot, TargetContext

GROUP, VERSION = "batch.volcano.sh", "v1alpha1"
SCHED_GROUP, SCHED_VERSION = "scheduling.volcano.sh", "v1beta1"


def vcjob_name(job_id: int) -> str:
    return f"g{job_id}"


NAME_MAX = 60


def dns_name(text: str) -> str:
    """A valid Queue name (RFC 1123: [a-z0-9-], ends alphanumeric) of at most NAME_MAX characters.
    A longer one keeps a digest of the whole text, so tenants that share a long prefix (or a run
    label that leaves little room) still get a queue each and the cut never ends on '-'."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "q"
    if len(clean) <= NAME_MAX:
        return clean
    digest = hashlib.sha1(clean.encode()).hexdigest()[:8]
    return f"{clean[:NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


class RealVolcano(VolcanoTraits, RealKubeFamily):
    name = "volcano"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.vc: VolcanoControlPlane | None = None
        self.custom = None                              # kubernetes CustomObjectsApi
        self.queues: dict[str, Future] = {}             # queue name -> its create on the pool
        self.figures["volcano_version"] = VOLCANO_VERSION
        self.vgpu = vgpu.shares_by_vgpu(self.fleet)      # fraction pools: HAMi vGPU through deviceshare
        self.memory_basis = vgpu.request_memory_basis(self.fleet) if self.vgpu else 0
        # whole GPUs go through vGPU only when no pool hands them out as nvidia.com/gpu
        self.whole_by_vgpu = self.vgpu and all(p.sharing.mode == "fraction" for p in self.fleet.pools)
        self.slices: vgpu.PlacedSlices | None = None
        self.shapes: dict[tuple[str, int, str], float] = {}
        self.handshake: vgpu.Handshake | None = None

    def start(self) -> None:
        if not self.existing:
            require_binaries()      # before the cluster: a missing build fails in a second
        super().start()

    # --- an existing cluster: its own Volcano, if installed -----------------------------------------
    REQUIRED_CRDS = ("jobs.batch.volcano.sh", "queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh")

    def _check_scheduler_installed(self) -> None:
        from kubernetes import client
        ext = client.ApiextensionsV1Api(self.api.api_client)
        names = {c["metadata"]["name"] for c in json.loads(ext.list_custom_resource_definition(
            _preload_content=False, _request_timeout=(10, 60)).data)["items"]}
        missing = [c for c in self.REQUIRED_CRDS if c not in names]
        if missing:
            raise ClusterRefused(f"--kubeconfig {self.existing.kubeconfig} ({self.cluster.url}): Volcano is not "
                                 f"installed there (no CRD {', '.join(missing)}); install Volcano, or start a "
                                 f"cluster with it: gangstorm cluster up volcano")

    def _attach_scheduler(self) -> None:
        from kubernetes import client
        self.custom = client.CustomObjectsApi(self.api.api_client)
        self.figures["volcano_version"] = "the cluster's own (not probed)"
        self._start_vgpu()

    # --- GPU sharing: the vGPU device plugin's part, and what the scheduler chose --------------------
    def node_body(self, body: dict[str, Any], i: int) -> dict[str, Any]:
        """A fraction pool's node advertises vGPUs instead of nvidia.com/gpu (the same GPUs must
        not be handed out twice); every node advertises its own pool's GPU count."""
        ann, cap = vgpu.node_extras(self.fleet, i, body["metadata"]["name"])
        res = dict(body["status"]["capacity"])
        if cap:
            res.pop(GPU, None)
            res.update(cap)
            body["metadata"]["annotations"].update(ann)
        else:
            res[GPU] = str(int(self.fleet.gpus_of[i]))
        body["status"] = {**body["status"], "capacity": res, "allocatable": res}
        return body

    def _start_vgpu(self) -> None:
        if not self.vgpu or self.role == "submit":
            return
        self.slices = vgpu.PlacedSlices(self.fleet, self.node_index)
        names = [n for i, n in enumerate(self.node_names) if vgpu.vgpu_node(self.fleet, i)]
        patch = partial(self._patch_node)
        self.handshake = vgpu.Handshake(patch, names, float(self.cfg.get("vgpu_report_s", vgpu.REPORT_EVERY_S))).start()

    def _patch_node(self, name: str, body: dict[str, Any]) -> None:
        self.api.patch_node(name, body, _preload_content=False, _request_timeout=TIMEOUT)

    def _on_pod(self, t: float, typ: str, pod: PodView) -> None:
        super()._on_pod(t, typ, pod)
        if self.slices is None:
            return
        if typ == "DELETED" or not pod.holds:
            self.slices.release(pod.uid)
            return
        gang = self.gangs.get(pod.job)
        job = gang.job if gang is not None else self.expected.get(pod.job)
        if job is not None and gang is not None and pod.uid not in gang.retired:
            self.slices.hold(pod.uid, pod.name, pod.node, pod.devices, job.gpu_share, job.gpus_per_member)

    def used_per_node(self) -> np.ndarray:
        """With vGPU: whole GPUs held only; a slice is counted in gpu_sharing, as the twins count."""
        return super().used_per_node() if self.slices is None else self.slices.used_whole()

    def free_per_node(self) -> np.ndarray:
        """With vGPU: idle GPUs a whole-GPU member may take, as the twins see them."""
        if self.slices is None:
            return super().free_per_node()
        return idle_whole_up(self.slices.state, self.down)

    def snapshot(self, now: float) -> Snapshot:
        snap = super().snapshot(now)
        if self.slices is None:
            return snap
        up = up_mask(self.fleet.nodes, self.down)
        pending = {(g.job.share, g.job.gpus_per_member, g.job.gpu_spec) for g in self.gangs.values()
                   if g.admitted_t is None}
        return replace(snap, gpu_sharing=self.slices.sample(self.shapes, pending, up))

    def live_control_plane(self) -> dict[str, Any]:
        return {"gpu_slices": self.slices.figures()} if self.slices is not None else {}

    def stop(self) -> None:
        if self.handshake is not None:
            self.handshake.stop()
            self.figures["vgpu_handshake"] = {"reports": self.handshake.reports, "errors": self.handshake.errors}
        if self.slices is not None:
            self.figures["gpu_slices"] = self.slices.figures()
        super().stop()

    def queue_name(self, job: Job) -> str:
        """The tenant's Queue; on an existing cluster prefixed with the run label, so the run never
        writes into a queue it did not create."""
        base = dns_name(job.queue or job.tenant)
        return dns_name(f"gs-{self.label}-{base}") if self.existing else base

    def _labelled_scheduler_objects(self, selector: str) -> dict[str, int]:
        out = {}
        for kind, call in (("volcano_jobs", lambda: self.custom.list_cluster_custom_object(
                               GROUP, VERSION, "jobs", label_selector=selector, _preload_content=False)),
                           ("volcano_queues", lambda: self.custom.list_cluster_custom_object(
                               SCHED_GROUP, SCHED_VERSION, "queues", label_selector=selector, _preload_content=False))):
            try:
                out[kind] = len(json.loads(call().data)["items"])
            except Exception:
                out[kind] = -1          # could not be listed: reported as unknown, never as clean
        return out

    def _remove_scheduler_objects(self) -> None:
        """The run's Jobs first (their pods and PodGroups follow), then its Queues once empty."""
        sel = f"{RUN_LABEL}={self.label}"
        self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.ns, "jobs", label_selector=sel,
                                                               _preload_content=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._labelled_scheduler_objects(sel).get("volcano_jobs"):
            time.sleep(0.5)
        queues = json.loads(self.custom.list_cluster_custom_object(
            SCHED_GROUP, SCHED_VERSION, "queues", label_selector=sel, _preload_content=False).data)["items"]
        for q in queues:
            self.custom.delete_cluster_custom_object(SCHED_GROUP, SCHED_VERSION, "queues", q["metadata"]["name"],
                                                     _preload_content=False)

    def _start_scheduler(self, run_dir: Path) -> None:
        from kubernetes import client
        self.custom = client.CustomObjectsApi(self.api.api_client)
        self._start_vgpu()
        self.vc = VolcanoControlPlane(self.cluster, run_dir, self.cfg, vgpu=self.vgpu)
        self.vc.start(self.api.api_client)
        self._await_vgpu_books()

    def _await_vgpu_books(self, timeout_s: float = 180.0) -> None:
        """Until vc-scheduler has every vGPU node's devices, a session places a share as if the node
        had none (deviceshare: "assertion conversion failed, skip"; the pod gets no GPU written).
        It has them once it answered each node's report with "Requesting_<time>"
        (vgpu/device_info.go NewGPUDevices); the session after the one that saw them is the first
        that certainly did."""
        if self.handshake is None or not self.handshake.names:
            return
        deadline = time.monotonic() + timeout_s
        waiting = set(self.handshake.names)
        while waiting:
            for name in sorted(waiting):
                node = json.loads(self.api.read_node(name, _preload_content=False, _request_timeout=TIMEOUT).data)
                if (node["metadata"].get("annotations") or {}).get(vgpu.HANDSHAKE, "").startswith("Requesting_"):
                    waiting.discard(name)
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"vc-scheduler did not take the vGPU devices of {len(waiting)} node(s) (e.g. "
                                   f"{min(waiting)}) within {timeout_s:.0f} s; see {self.vc.dir / 'vc-scheduler.log'}")
            time.sleep(0.2)
        first = self._sessions()
        while self._sessions() < first + 2:
            self.vc.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"vc-scheduler ran no session within {timeout_s:.0f} s after taking the vGPU "
                                   f"devices; see {self.vc.dir / 'vc-scheduler.log'}")
            time.sleep(0.2)

    def _sessions(self) -> int:
        return int((fetch(self.vc.metrics_url, scheduler_figures).get("session_ms") or {}).get("count") or 0)

    def control_plane(self) -> dict[str, Any]:
        out = super().control_plane()
        sess = out.get("session_ms") or {}
        busy = {}
        if sess.get("count") and sess.get("mean") is not None:
            # vc-scheduler's sessions back to back: their summed length is its busy time
            busy["volcano-session"] = round(sess["count"] * sess["mean"] / 1000.0, 6)
        if self.vc is not None and self.vc.controller_metrics_url:
            ctl = fetch(self.vc.controller_metrics_url, controller_figures)
            out["controller"] = ctl
            if ctl.get("client_requests") is not None:
                # the job controller's client at its full qps: the sim's controller-qps-limiter
                qps = float(self.cfg.get("controller_qps") or 50)
                busy["controller-qps-limiter"] = round(ctl["client_requests"] / qps, 6)
        if busy:
            out["busy_s"] = busy
        # CPU seconds each process of the stack used from its start: against the sessions' wall time,
        # whether vc-scheduler waited for the cores others held
        out["process_cpu_s"] = {n: round(v, 2) for n, pid in sorted(self.cluster.pids().items())
                                if (v := cpu_seconds(pid)) is not None}
        return out

    def _scheduler_figures(self) -> dict[str, Any]:
        if self.vc is None:
            return {}
        figures = fetch(self.vc.metrics_url, scheduler_figures)
        return {"scheduler_error": figures["error"]} if "error" in figures else figures

    # --- what the adapter writes -----------------------------------------------------------------
    def queue_body(self, job: Job, q: str) -> dict[str, Any]:
        qcfg = self.cfg.get("queues") or {}
        weights, caps = qcfg.get("weights") or {}, qcfg.get("capability_gpus") or {}
        weight = weights.get(job.tenant, weights.get(job.queue, 1))
        spec: dict[str, Any] = {"weight": max(1, int(round(float(weight)))), "reclaimable": True}
        cap = caps.get(job.tenant, caps.get(job.queue))
        if cap is not None:
            spec["capability"] = {GPU: str(int(cap))}
        return {"apiVersion": f"{SCHED_GROUP}/{SCHED_VERSION}", "kind": "Queue",
                "metadata": {"name": q, "labels": {RUN_LABEL: self.label}}, "spec": spec}

    def member_resources(self, job: Job) -> tuple[dict[str, str], dict[str, str]]:
        """(requests, limits) of one member: a milli share as vGPU resources (vgpu.requests), whole
        GPUs as nvidia.com/gpu, or as exclusive vGPUs when every pool shares by fraction."""
        cpu = {"cpu": str(max(1, int(job.cpus_per_member or 1)))}
        share = job.gpu_share
        if (self.vgpu and share.kind == "milli") or (self.whole_by_vgpu and share.is_whole):
            dev = vgpu.requests(share, job.gpus_per_member, self.memory_basis)
            return {**dev, **cpu}, dev
        if not share.is_whole:
            raise ValueError(f"job {job.id}: a {share} share needs a node pool that shares by fraction "
                             "(Volcano's vGPU); this fleet has none")
        return {GPU: str(job.gpus_per_member), **cpu}, {GPU: str(job.gpus_per_member)}

    def vcjob(self, job: Job, queue: str) -> dict[str, Any]:
        requests, _limits = self.member_resources(job)   # pod_spec sets every extended resource's limit
        template = {"metadata": {"labels": self.labels(job),          # the watch finds the gang by label
                                 "annotations": {COMPLETE_AFTER: go_duration(job.duration_s),
                                                 **self.startup_annotations()}},
                    "spec": pod_spec(requests, schedulerName="volcano", **self.pod_fields())}
        return {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Job",
            "metadata": {"name": vcjob_name(job.id), "namespace": self.ns, "labels": self.labels(job)},
            "spec": {
                "schedulerName": "volcano",
                "queue": queue,
                "minAvailable": int(job.min_available),
                "maxRetry": 1000,     # restarts are chaos-driven; never give up on a gang
                "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                "tasks": [{"name": "w", "replicas": int(job.members), "minAvailable": int(job.min_available),
                           "template": template}],
            },
        }

    # --- submission ----------------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        """Non-blocking: the Job is created on the client pool; a refusal comes back as REJECTED.
        The tenant's Queue is created on its first job; no wait for the queue controller to open
        it: vc-scheduler leaves the job Pending until the queue is Open."""
        self.clock.sync(now)
        q = self.queue_name(job)
        if q not in self.queues:
            self.queues[q] = self.pool.submit(self._retry, partial(
                self.custom.create_cluster_custom_object, SCHED_GROUP, SCHED_VERSION, "queues", self.queue_body(job, q),
                _request_timeout=TIMEOUT))
        self.gangs[job.id] = Gang(job)
        shape = (job.share, job.gpus_per_member, job.gpu_spec)    # the arrived workload (ATC '23 fragmentation)
        self.shapes[shape] = self.shapes.get(shape, 0.0) + 1.0
        self.pool.submit(self._create_job, job.id, self.vcjob(job, q), self.queues[q])
        self._emit(now, job.id, Kind.SUBMITTED)
        return self._take()

    def _create_job(self, job_id: int, body: dict[str, Any], queue_created: Future) -> None:
        try:
            queue_created.result()
            self._retry(partial(self.custom.create_namespaced_custom_object, GROUP, VERSION, self.ns, "jobs", body,
                                _request_timeout=TIMEOUT))
        except Exception as e:
            if not self._stop.is_set():
                self._post(self._refused, self.clock.now(), job_id, self._note_refusal(e))

    def _refused(self, t: float, job_id: int, reason: str) -> None:
        """A refusal the client retried until it gave up (etcd-nospace, 429, 5xx) fails the job, as
        on kube and in the simulated control plane; anything else (a malformed request) rejects it."""
        gang = self.gangs.get(job_id)
        if gang is not None:
            self._count("submit_errors")
            self._end(gang, t, Kind.FAILED if retryable(reason) else Kind.REJECTED, reason)

    def metrics_endpoints(self) -> list[dict[str, Any]]:
        out = [e for e in super().metrics_endpoints() if e["name"] != "kube-scheduler"]   # not started here
        if self.vc is not None:
            out += [{"name": n, "url": u} for n, u in (("vc-scheduler", self.vc.metrics_url),
                                                        ("vc-controller-manager", self.vc.controller_metrics_url)) if u]
        return out

    def completes_by_kwok(self) -> bool:
        return True

    def _delete(self, gang: Gang) -> None:
        """The Job goes with its pods and PodGroup (owner references)."""
        self._call(partial(self.custom.delete_namespaced_custom_object, GROUP, VERSION, self.ns, "jobs",
                           vcjob_name(gang.job.id),
                           body={"propagationPolicy": "Background"}, _request_timeout=TIMEOUT),
                   ok=(404,), failed="delete_errors")

    # --- observation ---------------------------------------------------------------------------------
    def _observe(self, now: float) -> None:
        if self.vc is not None:
            self.vc.check_alive()
        super()._observe(now)

    def _lost(self, gang: Gang, t: float, pod: PodView, reason: str) -> None:
        """Volcano restarts the whole job: the other members' pods go too (ignored from now on)
        and the gang is admitted again once min_available new pods are bound."""
        if gang.admitted_t is None:
            return
        gang.retired |= gang.bound.keys()
        gang.bound.clear()
        gang.succeeded.clear()
        self._requeue(gang, t, 0, reason)
