"""Real Kueue on a KWOK cluster: a gang is a Kueue pod group in its tenant's LocalQueue.

The cluster, the pod watch, gang admission, completion by KWOK and chaos are the Kubernetes
family's (fakes/kube/family/); kube-scheduler runs with the kube backend's profile and binds every
pod. Kueue's manager (fakes/kueue/controlplane.py) decides *when* a gang may start: each tenant's
queue is a LocalQueue over a ClusterQueue with a nominal GPU quota, all ClusterQueues share one
cohort (a queue may borrow GPUs the others leave idle, and reclaim its own by preemption), and a
ResourceFlavor with a Topology from the nodes' spine/leaf/hostname labels turns on topology-aware
scheduling. The adapter creates the group's pods gated (fakes/kueue/pods.py); Kueue creates the
Workload once all are there, reserves quota for the whole group, assigns each pod a node (TAS)
and ungates them together, so kube-scheduler only binds a gang Kueue admitted whole. kube-scheduler
binds rather than a gang-aware scheduler because Kueue's admission already is all-or-nothing and
TAS already chose the nodes: what is left is one Filter and Bind per pod.

Admission is measured as for every scheduler (intended submit -> min_available members bound);
Kueue's own admission (Workload seen -> QuotaReserved -> Admitted, on the run clock) is a
component, reported per ClusterQueue with the GPUs each borrowed (control_plane()["kueue"]).

A lost member (evicted, node failed) is recreated in the same group, as a Job controller would:
Kueue keeps the Workload admitted (its quota stays reserved) and ungates the replacement, so the
gang is not requeued through Kueue; only the lost member is scheduled again (see docs/kueue.md).
"""
from __future__ import annotations

import json
import time
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fakes.kube.family import TIMEOUT, Gang, RealKubeFamily
from fakes.kube.metrics import fetch, quantiles
from fakes.kube.pods import COMPLETE_AFTER, GPU, L_JOB, PodView, go_duration, pod_spec
from fakes.kube.poster import encode, pods_path
from fakes.kube.refusal import retryable
from fakes.kube.target import scheduler_config
from fakes.kueue.controlplane import (
    GROUP,
    KUEUE_VERSION,
    LEAF,
    VERSION,
    KueueControlPlane,
    manager_figures,
    queue_objects,
    require_binaries,
)
from fakes.kueue.pods import MANAGED, PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY, as_group_member, group_name
from fakes.kueue.traits import KueueTraits, nominal_gpus, queue_name
from fakes.kueue.workloads import AdmissionBook, KueueWatch
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import RUN_LABEL, ClusterRefused, TargetContext

FINISH_WAIT_S = 60.0    # a finished gang's pods go when Kueue marked its Workload Finished, or after this
KINDS = ("localqueues", "clusterqueues", "resourceflavors", "topologies")       # deletion order
NAMESPACED = {"localqueues", "workloads"}
REQUIRED_CRDS = tuple(f"{k}.{GROUP}" for k in (*KINDS, "workloads"))


def kube_scheduler_config(cfg: dict[str, Any]) -> dict:
    """kube-scheduler's configuration: the kube backend's, with the scenario's scoring and its
    own client defaults (api_qps and api_burst here are kueue-manager's)."""
    return scheduler_config({k: cfg[k] for k in ("scoring", "gpu_weight") if k in cfg})


class RealKueue(KueueTraits, RealKubeFamily):
    name = "kueue"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.kueue: KueueControlPlane | None = None
        self.custom = None                          # kubernetes CustomObjectsApi
        self.shared: Future | None = None           # Topology and ResourceFlavor created
        self.queues: dict[str, Future] = {}         # LocalQueue name -> its objects' creation
        self.book = AdmissionBook()
        self.kueue_watches: list[KueueWatch] = []
        self.replaced: dict[int, int] = {}          # job id -> members recreated
        # the stages of one admission, on the run clock (kueue_figures()["stages_s"])
        self.created_t: dict[int, float] = {}       # job id -> its last pod's create returned
        self.placed_t: dict[int, list[float]] = {}  # job id -> when each member was seen bound
        self.finished_t: dict[int, float] = {}
        self.deferred: dict[int, float] = {}        # finished job id -> when its pods may go at the latest
        self.figures["kueue_version"] = KUEUE_VERSION
        self.figures["binds_with"] = "kube-scheduler (after Kueue admitted the group and TAS chose its nodes)"

    def start(self) -> None:
        if not self.existing:
            require_binaries()      # before the cluster: a missing build fails in a second
        super().start()

    def scheduler_profile(self) -> dict:
        return kube_scheduler_config(self.cfg)

    @property
    def prefix(self) -> str:
        """Cluster-scoped objects on an existing cluster carry the run label in their names."""
        return f"gs-{self.label}-" if self.existing else ""

    # --- starting ---------------------------------------------------------------------------------------
    def _start_scheduler(self, run_dir: Path) -> None:
        self.kueue = KueueControlPlane(self.cluster, run_dir, self.cfg)
        self.kueue.start(self.api.api_client)
        self._clients(watch=True)

    def _clients(self, watch: bool) -> None:
        from kubernetes import client
        self.custom = client.CustomObjectsApi(self.cluster.api_client(4))
        if not watch:
            return
        watch = client.CustomObjectsApi(self.cluster.api_client(2))      # watches hold a connection each
        wl = partial(watch.list_namespaced_custom_object, GROUP, VERSION, self.ns, "workloads", _preload_content=False)
        cq = partial(watch.list_cluster_custom_object, GROUP, VERSION, "clusterqueues",
                     label_selector=f"{RUN_LABEL}={self.label}", _preload_content=False)
        self.kueue_watches = [KueueWatch("kueue-workloads", wl, self.book.on_workload, self.clock.now),
                              KueueWatch("kueue-clusterqueues", cq, self.book.on_cluster_queue, self.clock.now)]
        for w in self.kueue_watches:
            w.start()

    def _label(self) -> dict[str, str]:
        return {RUN_LABEL: self.label, "app.kubernetes.io/managed-by": "gangstorm"}

    # --- an existing cluster: its own Kueue -------------------------------------------------------------
    def _check_scheduler_installed(self) -> None:
        from kubernetes import client
        ext = client.ApiextensionsV1Api(self.api.api_client)
        names = {c["metadata"]["name"] for c in json.loads(ext.list_custom_resource_definition(
            _preload_content=False, _request_timeout=(10, 60)).data)["items"]}
        missing = [c for c in REQUIRED_CRDS if c not in names]
        if missing:
            raise ClusterRefused(f"--kubeconfig {self.existing.kubeconfig} ({self.cluster.url}): Kueue is not "
                                 f"installed there (no CRD {', '.join(missing)}); install Kueue, or start a "
                                 f"cluster with it: gangstorm cluster up kueue")

    def _attach_scheduler(self) -> None:
        self.figures["kueue_version"] = "the cluster's own (not probed)"
        self._clients(watch=self.role != "submit")

    # --- queues ---------------------------------------------------------------------------------------
    def queue_name(self, job: Job) -> str:
        return queue_name(job)

    def _create_all(self, objects: list[tuple[str, dict[str, Any]]]) -> None:
        for plural, body in objects:
            if plural in NAMESPACED:
                call = partial(self.custom.create_namespaced_custom_object, GROUP, VERSION,
                               body["metadata"]["namespace"], plural, body, _preload_content=False,
                               _request_timeout=TIMEOUT)
            else:
                call = partial(self.custom.create_cluster_custom_object, GROUP, VERSION, plural, body,
                               _preload_content=False, _request_timeout=TIMEOUT)
            self._retry(call)

    def _create_queue(self, lq: str, nominal: int) -> None:
        self.shared.result()
        objs = queue_objects(self._label(), self.ns, {lq: nominal}, self.cfg, self.prefix)
        self._create_all([o for o in objs if o[0] in ("clusterqueues", "localqueues")])

    # --- submission -----------------------------------------------------------------------------------
    def topology_request(self, job: Job) -> tuple[str, str] | None:
        mode = self.cfg.get("topology", "preferred")
        if mode == "none" or job.members < 2:
            return None
        return (REQUIRED_TOPOLOGY if mode == "required" else PREFERRED_TOPOLOGY, LEAF)

    def pod_body(self, job: Job, member: int, name: str, lq: str) -> dict[str, Any]:
        ann = {COMPLETE_AFTER: go_duration(job.duration_s), **self.startup_annotations()}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "annotations": ann, "labels": self.labels(job)},
                "spec": pod_spec({GPU: str(job.gpus_per_member), "cpu": str(max(1, int(job.cpus_per_member or 1))),
                                  "memory": "1Gi"}, **self.pod_fields())}
        return as_group_member(body, job.id, job.members, lq, self.topology_request(job))

    def submit(self, job: Job, now: float) -> list[Event]:
        """Non-blocking: the group's pods are created on the client pool once the tenant's queue is;
        a refusal comes back as FAILED (retryable) or REJECTED."""
        self.clock.sync(now)
        lq = self.queue_name(job)
        if self.shared is None:         # the Topology and ResourceFlavor every queue uses
            self.shared = self.pool.submit(self._create_all, queue_objects(self._label(), self.ns, {}, self.cfg,
                                                                           self.prefix))
        if lq not in self.queues:
            self.queues[lq] = self.pool.submit(self._create_queue, lq,
                                               nominal_gpus(job, self.cfg, self.fleet.nodes * self.fleet.gpus_per_node))
        self.gangs[job.id] = Gang(job)
        bodies = [self.pod_body(job, m, f"j{job.id}-m{m}", lq) for m in range(job.members)]
        self.pool.submit(self._create_group, job.id, bodies, self.queues[lq])
        self._emit(now, job.id, Kind.SUBMITTED)
        return self._take()

    def _create_group(self, job_id: int, bodies: list[dict[str, Any]], queue_created: Future) -> None:
        try:
            queue_created.result()
            for body in bodies:
                self._retry(partial(self.poster.post, pods_path(self.ns), encode(body), timeout=TIMEOUT))
            self.created_t[job_id] = self.clock.now()
        except Exception as e:
            if not self._stop.is_set():
                self._post(self._refused, self.clock.now(), job_id, self._note_refusal(e))

    def _refused(self, t: float, job_id: int, reason: str) -> None:
        gang = self.gangs.get(job_id)
        if gang is not None:
            self._count("submit_errors")
            self._end(gang, t, Kind.FAILED if retryable(reason) else Kind.REJECTED, reason)

    def completes_by_kwok(self) -> bool:
        return True

    def _placed(self, t: float, pod: PodView) -> None:
        if pod.job is not None:
            self.placed_t.setdefault(pod.job, []).append(t)

    def _end(self, gang: Gang, t: float, kind: Kind, reason: str = "") -> None:
        if kind == Kind.FINISHED:
            self.finished_t[gang.job.id] = t
        super()._end(gang, t, kind, reason)

    def _delete(self, gang: Gang) -> None:
        """The group's pods, once Kueue has marked its Workload Finished: Kueue's finalizer is
        there so that it sees every pod's end, but KWOK's pod-delete stage strips finalizers, and a
        group whose pods vanish before Kueue saw them succeed is a Workload waiting for
        replacement pods that keeps its quota. Failed or refused jobs go at once."""
        if gang.job.id in self.finished_t:
            self.deferred[gang.job.id] = self.clock.now() + FINISH_WAIT_S
            return
        self._delete_pods(gang.job.id)

    def _delete_pods(self, job_id: int) -> None:
        self._call(partial(self.api.delete_collection_namespaced_pod, self.ns, label_selector=f"{L_JOB}={job_id}",
                           grace_period_seconds=0, _preload_content=False, _request_timeout=TIMEOUT),
                   failed="delete_errors")

    def _lost(self, gang: Gang, t: float, pod: PodView, reason: str) -> None:
        """The lost member is recreated in the same group (Kueue leaves the admitted Workload as it
        is and ungates the replacement); the gang is admitted again once it is bound."""
        self._requeue(gang, t, len(gang.bound), reason)
        n = self.replaced[gang.job.id] = self.replaced.get(gang.job.id, 0) + 1
        member = int(pod.name.split("-m", 1)[1].split("-", 1)[0]) if "-m" in pod.name else 0
        body = self.pod_body(gang.job, member, f"j{gang.job.id}-m{member}-r{n}", self.queue_name(gang.job))
        self._call(partial(self.poster.post, pods_path(self.ns), encode(body), timeout=TIMEOUT),
                   failed="replace_errors")

    # --- observation ------------------------------------------------------------------------------------
    def _observe(self, now: float) -> None:
        if self.kueue is not None:
            self.kueue.check_alive()
        for w in self.kueue_watches:
            if w.error is not None:
                raise RuntimeError(f"{w.name} watch failed: {w.error!r}")
        super()._observe(now)
        for job_id, latest in list(self.deferred.items()):
            if group_name(job_id) in self.book.finished or self.clock.now() >= latest:
                if group_name(job_id) not in self.book.finished:
                    self._count("deleted_before_workload_finished")
                del self.deferred[job_id]
                self._delete_pods(job_id)

    def kueue_figures(self) -> dict[str, Any]:
        """Kueue's admission per ClusterQueue: Workloads admitted, seen -> QuotaReserved and
        seen -> Admitted (s, run clock), evictions, most GPUs borrowed at once, nominal quota."""
        per: dict[str, dict[str, Any]] = {}
        for wl in list(self.book.workloads.values()):
            if not wl.queue:
                continue
            q = per.setdefault(wl.queue, {"reserved_s": [], "admitted_s": [], "evictions": 0})
            q["admitted_s"].extend(wl.admissions)
            q["evictions"] += wl.evictions
        out = {}
        for name in sorted(set(per) | set(self.book.nominal)):
            q = per.get(name, {"admitted_s": [], "evictions": 0})
            out[name] = {"workloads_admitted": len(q["admitted_s"]),
                         "admission_s": quantiles(np.array(q["admitted_s"])),
                         "evictions": q["evictions"],
                         "nominal_gpus": self.book.nominal.get(name),
                         "borrowed_gpus_max": self.book.borrowed_max.get(name, 0.0)}
        return {"queues": out, "workloads_seen": len(self.book.workloads),
                "pending_without_quota": sum(1 for w in list(self.book.workloads.values()) if w.quota_reserved is None),
                "stages_s": self.stages()}

    def stages(self) -> dict[str, dict[str, float]]:
        """Each gang's first admission cut into the simulated Kueue's stages (fakes/kueue/sim.py),
        between instants this client saw: last pod created -> Workload seen (workload_create),
        seen -> Admitted (admission), Admitted -> first member bound (ungate), then the gap
        between members bound (pod_bind)."""
        create, admit, ungate, per_pod = [], [], [], []
        for job_id, created in list(self.created_t.items()):
            wl = self.book.workloads.get(group_name(job_id))
            placed = sorted(self.placed_t.get(job_id, ()))
            if wl is None or not wl.admissions:
                continue
            create.append(wl.first_seen - created)
            admit.append(wl.admissions[0])
            if placed and wl.first_admitted is not None:
                ungate.append(placed[0] - wl.first_admitted)
                if len(placed) > 1:
                    per_pod.append((placed[-1] - placed[0]) / (len(placed) - 1))
        return {k: quantiles(np.array(v)) | ({"mean": round(float(np.mean(v)), 4)} if v else {})
                for k, v in (("workload_create", create), ("admission", admit), ("ungate", ungate),
                             ("pod_bind", per_pod))}

    def _scheduler_figures(self) -> dict[str, Any]:
        from fakes.kube import metrics as kube_metrics
        url = self.cluster.scheduler_metrics_url if self.cluster else ""
        out: dict[str, Any] = {}
        if url:
            out["scheduler"] = kube_metrics.fetch(url, kube_metrics.scheduler_figures)
        out["kueue"] = self.kueue_figures()
        out["queues"] = out["kueue"].pop("queues")         # per ClusterQueue: admission and borrowing
        if self.kueue is not None:
            out["kueue"]["manager"] = fetch(self.kueue.metrics_url, manager_figures)
        return out

    def metrics_endpoints(self) -> list[dict[str, Any]]:
        out = super().metrics_endpoints()
        if self.kueue is not None and self.kueue.metrics_url:
            out.append({"name": "kueue-manager", "url": self.kueue.metrics_url})
        return out

    # --- cleanup --------------------------------------------------------------------------------------
    def stop(self) -> None:
        for w in self.kueue_watches:
            w.stop()
        super().stop()

    def _labelled_scheduler_objects(self, selector: str) -> dict[str, int]:
        out = {}
        for plural in (*KINDS, "workloads"):
            try:
                if plural == "workloads":       # Kueue's, unlabelled: those left in the run's namespace
                    data = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, plural,
                                                                     _preload_content=False).data
                elif plural in NAMESPACED:
                    data = self.custom.list_custom_object_for_all_namespaces(
                        GROUP, VERSION, plural, label_selector=selector, _preload_content=False).data
                else:
                    data = self.custom.list_cluster_custom_object(GROUP, VERSION, plural, label_selector=selector,
                                                                  _preload_content=False).data
                out[f"kueue_{plural}"] = len(json.loads(data)["items"])
            except Exception:
                out[f"kueue_{plural}"] = -1     # could not be listed: unknown, never clean
        return out

    def _remove_scheduler_objects(self) -> None:
        """The run's pods lose Kueue's finalizer (a pod never bound has no KWOK to remove it), then
        the queue objects go, LocalQueues first; the Workloads follow their pods (owner references)."""
        items = json.loads(self.api.list_namespaced_pod(self.ns, label_selector=f"{RUN_LABEL}={self.label}",
                                                        _preload_content=False).data)["items"]
        for pod in items:
            if MANAGED in (pod["metadata"].get("finalizers") or ()):
                try:
                    self.api.patch_namespaced_pod(pod["metadata"]["name"], self.ns,
                                                  {"metadata": {"finalizers": None}}, _preload_content=False)
                except Exception as e:
                    if getattr(e, "status", None) != 404:
                        raise
        sel = f"{RUN_LABEL}={self.label}"
        for plural in KINDS:
            if plural in NAMESPACED:
                self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.ns, plural,
                                                                       label_selector=sel, _preload_content=False)
            else:
                self.custom.delete_collection_cluster_custom_object(GROUP, VERSION, plural, label_selector=sel,
                                                                    _preload_content=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(v > 0 for v in self._labelled_scheduler_objects(sel).values()):
            time.sleep(0.5)
