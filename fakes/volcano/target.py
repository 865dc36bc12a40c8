"""Real Volcano on a KWOK cluster: a gang is a Volcano Job in a Queue per tenant.

The KWOK cluster comes from the Kubernetes backend's launcher (fakes/kube/cluster.py, started
without kube-scheduler); vc-scheduler and vc-controller-manager run against its apiserver
(fakes/volcano/controlplane.py). Admission is observed with ONE watch over pods in the namespace:
a gang is admitted at the first instant `min_available` of its current pods are bound.
Pods complete after the job's (time-scaled) duration through the KWOK stage driven by the
`gangstorm.io/complete-after` annotation; a finished Job is deleted.
"""
from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import threading
import time
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.model.fleet import stranded_gpus
from fakes.volcano.controlplane import (VOLCANO_VERSION, VolcanoControlPlane, quantiles, require_binaries as require_volcano,
                                   scheduler_figures)
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

NAMESPACE = "gangstorm"
GROUP, VERSION = "batch.volcano.sh", "v1alpha1"
SCHED_GROUP, SCHED_VERSION = "scheduling.volcano.sh", "v1beta1"
JOB_LABEL = "volcano.sh/job-name"
COMPLETE_AFTER = "gangstorm.io/complete-after"   # read by kwok-config/stages.yaml pod-complete
GPU = "nvidia.com/gpu"
PREFILL_PREFIX = "prefill-"
TIMEOUT = (10, 60)      # connect, read: a call on a dead keep-alive connection must not hang a run


def reason_of(exc: Exception) -> str:
    body = str(getattr(exc, "body", "") or exc)
    if "database space exceeded" in body or "NOSPACE" in body:
        return "etcd-nospace"
    status = getattr(exc, "status", None)
    return f"api-{status}" if status else type(exc).__name__


@dataclass
class PodView:
    uid: str
    name: str
    job: str
    node: str
    phase: str
    gpus: int
    deleting: bool


@dataclass
class GangState:
    job: Job
    name: str
    bound: dict[str, str] = field(default_factory=dict)      # pod uid -> node, current pods only
    succeeded: set[str] = field(default_factory=set)
    admitted: bool = False          # admitted in the current attempt
    first_admit_t: float | None = None
    restart_t: float | None = None  # eviction instant awaiting re-admission
    done: bool = False
    deleted: bool = False


def pod_view(obj: dict[str, Any]) -> PodView:
    meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
    gpus = 0
    for c in spec.get("containers", []):
        gpus += int((c.get("resources", {}).get("requests") or {}).get(GPU, 0) or 0)
    return PodView(uid=meta.get("uid", ""), name=meta.get("name", ""),
                   job=(meta.get("labels") or {}).get(JOB_LABEL, ""), node=spec.get("nodeName") or "",
                   phase=status.get("phase", ""), gpus=gpus,
                   deleting=meta.get("deletionTimestamp") is not None)


def _holds(pv: PodView) -> bool:
    """A pod holds its GPUs from binding until it terminates."""
    return bool(pv.node) and pv.phase not in ("Succeeded", "Failed")


def dns_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:60] or "q"


def go_duration(seconds: float) -> str:
    return f"{max(seconds, 0.001):.3f}s"


class PodWatch(threading.Thread):
    """One watch over the namespace's pods; pushes (monotonic time, type, PodView) to a deque."""

    def __init__(self, api_client, namespace: str):
        super().__init__(name="volcano-pod-watch", daemon=True)
        from kubernetes import client
        self.core = client.CoreV1Api(api_client)
        self.ns = namespace
        self.events: deque[tuple[float, str, PodView]] = deque()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.known: dict[str, PodView] = {}
        self.resp = None
        self.restarts = 0

    def _relist(self) -> str:
        raw = self.core.list_namespaced_pod(self.ns, _preload_content=False, _request_timeout=(10, 120))
        body = json.loads(raw.data)
        now = time.monotonic()
        seen = set()
        for item in body.get("items", []):
            pv = pod_view(item)
            seen.add(pv.uid)
            self.known[pv.uid] = pv
            self.events.append((now, "MODIFIED", pv))
        for uid in [u for u in self.known if u not in seen]:
            self.events.append((now, "DELETED", self.known.pop(uid)))
        return body["metadata"]["resourceVersion"]

    def run(self) -> None:
        rv = None
        while not self.stopping.is_set():
            try:
                if rv is None:
                    rv = self._relist()
                self.resp = self.core.list_namespaced_pod(
                    self.ns, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                    timeout_seconds=60, _preload_content=False, _request_timeout=(10, 90))
                for line in self.resp:
                    if self.stopping.is_set():
                        return
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    typ, obj = ev["type"], ev["object"]
                    if typ == "ERROR":
                        rv = None          # 410 Gone: relist
                        break
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if typ == "BOOKMARK":
                        continue
                    pv = pod_view(obj)
                    if typ == "DELETED":
                        self.known.pop(pv.uid, None)
                    else:
                        self.known[pv.uid] = pv
                    self.events.append((time.monotonic(), typ, pv))
            except Exception as e:   # connection reset, apiserver restart: resume from rv
                if self.stopping.is_set():
                    return
                self.restarts += 1
                if self.restarts > 50:
                    self.error = e
                    return
                time.sleep(0.5)
                rv = None

    def stop(self) -> None:
        # Closing the response from this thread can block on the reader; the daemon thread ends
        # when the apiserver goes away (or at the next timeout) and ignores what it reads meanwhile.
        self.stopping.set()


class RealVolcano(Target):
    name = "volcano"
    backend = "real"
    with_kube_scheduler = False     # a comparative run starts its own kube cluster for kube

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cluster = None
        self.vc: VolcanoControlPlane | None = None
        self.watch: PodWatch | None = None
        self.gangs: dict[str, GangState] = {}        # vcjob name -> state
        self.queues: dict[str, Future] = {}
        self.node_used = np.zeros(ctx.fleet.nodes, dtype=np.int32)
        self.node_index = {ctx.fleet.node_name(i): i for i in range(ctx.fleet.nodes)}
        self.pods: dict[str, PodView] = {}           # uid -> last view, bound pods counted in node_used
        self._t0: float | None = None
        self._tmp: str | None = None
        self.rng = random.Random(ctx.seed)
        self.counters: dict[str, float] = defaultdict(float)
        self.readmission_s: list[float] = []
        self._last_scrape = (-1e9, {})
        self._prefill_ids = 0
        self._pending_deletes: deque[str] = deque()
        self.results: deque[tuple[float, str, str, str]] = deque()
        self.pool: ThreadPoolExecutor | None = None
        self._stopping = False
        self._stop_scrape = threading.Event()
        self.failed_nodes: set[int] = set()
        self._final: dict[str, Any] | None = None
        self.chaos_figures: dict[str, Any] = {}

    # --- clock --------------------------------------------------------------------------------
    def _clock(self, now: float) -> None:
        if self._t0 is None:
            self._t0 = time.monotonic() - now

    def _t(self, mono: float) -> float:
        return mono - (self._t0 if self._t0 is not None else mono)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        from fakes.kube.cluster import ClusterSpec, KubeCluster, require_binaries as require_kube
        from fakes.kube.target import apiserver_args as kube_apiserver_args
        require_kube()
        require_volcano()
        if self.ctx.run_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="gangstorm-volcano-")
        run_dir = Path(self.ctx.run_dir or self._tmp) / "volcano-real"
        run_dir.mkdir(parents=True, exist_ok=True)
        cp = self.ctx.control_plane or {}
        spec = ClusterSpec(name=f"gsvc{self.ctx.seed % 10000}-{int(time.time()) % 100000}",
                           workdir=run_dir / "kube", scheduler=self.with_kube_scheduler,
                           etcd_quota_bytes=int(cp.get("etcd_quota_bytes", 2 * 1024**3)),
                           apiserver_args=kube_apiserver_args(cp))
        self.cluster = KubeCluster(spec)
        self.cluster.start()
        try:
            self.api = self.cluster.api_client(qps_threads=int(self.ctx.config.get("client_threads", 8)) + 4)
            self._make_clients()
            self._ensure_namespace()
            self.counters["cluster_start_s"] = round(self.cluster.started_s or 0, 2)
            self.counters["nodes_registered_s"] = round(self.cluster.create_nodes(self.ctx.fleet), 2)
            from fakes.kube.target import RealKube
            self.counters["nodes_ready_s"] = round(RealKube._wait_nodes_ready(_KubeShim(self)), 2)
            self.vc = VolcanoControlPlane(self.cluster.kubeconfig, run_dir, self.ctx.config)
            self.vc.start(self.api, spawn=self.cluster.add_component)
            self.watch = PodWatch(self.cluster.api_client(qps_threads=2), NAMESPACE)
            self.watch.start()
            self.pool = ThreadPoolExecutor(int(self.ctx.config.get("client_threads", 8)),
                                           thread_name_prefix="volcano-client")
            interval = float(self.ctx.config.get("scrape_interval_s", 10))
            threading.Thread(target=self._scrape_loop, args=(interval,), name="volcano-scrape",
                             daemon=True).start()
        except BaseException:
            self.stop()
            raise

    def _make_clients(self) -> None:
        from kubernetes import client
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def _ensure_namespace(self) -> None:
        from kubernetes.client.rest import ApiException
        from fakes.kube.target import FILL_NS
        for ns in (NAMESPACE, FILL_NS):
            try:
                self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            except ApiException as e:
                if e.status != 409:
                    raise

    def stop(self) -> None:
        self._stopping = True
        self._stop_scrape.set()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.vc is not None and self.cluster is not None and self._final is None:
            try:
                self._final = self._collect()
            except Exception as e:
                self._final = {"final_scrape_error": repr(e)[:200]}
        if self.watch is not None:
            self.watch.stop()
        if self.vc is not None:
            self.vc.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # --- submission ---------------------------------------------------------------------------
    def queue_body(self, job: Job, q: str) -> dict[str, Any]:
        qcfg = self.ctx.config.get("queues") or {}
        weights, caps = qcfg.get("weights") or {}, qcfg.get("capability_gpus") or {}
        weight = weights.get(job.tenant, weights.get(job.queue, 1))
        spec: dict[str, Any] = {"weight": max(1, int(round(float(weight)))), "reclaimable": True}
        cap = caps.get(job.tenant, caps.get(job.queue))
        if cap is not None:
            spec["capability"] = {GPU: str(int(cap))}
        return {"apiVersion": f"{SCHED_GROUP}/{SCHED_VERSION}", "kind": "Queue",
                "metadata": {"name": q}, "spec": spec}

    def _queue_future(self, job: Job) -> tuple[str, Future]:
        """The tenant's Queue, created once on the client pool. No wait for the queue controller
        to open it: vc-scheduler leaves the job Pending until the queue is Open."""
        q = dns_name(job.queue or job.tenant)
        if q not in self.queues:
            self.queues[q] = self.pool.submit(self._create_queue, self.queue_body(job, q))
        return q, self.queues[q]

    def _create_queue(self, body: dict[str, Any]) -> None:
        from kubernetes.client.rest import ApiException
        for retry in range(6):
            try:
                self.custom.create_cluster_custom_object(SCHED_GROUP, SCHED_VERSION, "queues", body,
                                                         _request_timeout=TIMEOUT)
                return
            except ApiException as e:
                if e.status == 409:
                    return
                if e.status not in (429, 500, 503, 504) or retry == 5:
                    raise
            except OSError:
                if retry == 5:
                    raise
            time.sleep(0.2 * 2 ** retry)

    def vcjob(self, job: Job, queue: str) -> dict[str, Any]:
        name = f"g{job.id}"
        cpus = max(1, int(job.cpus_per_member or 1))
        req = {GPU: str(job.gpus_per_member), "cpu": str(cpus)}
        template = {
            "metadata": {"annotations": {COMPLETE_AFTER: go_duration(job.duration_s)}},
            "spec": {
                "schedulerName": "volcano",
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "worker", "image": "gangstorm/fake-worker",
                                "resources": {"requests": req, "limits": req}}],
            },
        }
        return {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"gangstorm.io/job-id": str(job.id), "gangstorm.io/tenant": job.tenant[:63]}},
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

    def submit(self, job: Job, now: float) -> list[Event]:
        """Non-blocking: the Job is created on the client pool; a refusal comes back as REJECTED."""
        self._clock(now)
        queue, qf = self._queue_future(job)
        body = self.vcjob(job, queue)
        name = body["metadata"]["name"]
        self.gangs[name] = GangState(job, name)
        self.pool.submit(self._create_job, name, body, qf)
        return [Event(now, job.id, Kind.SUBMITTED)]

    def _create_job(self, name: str, body: dict[str, Any], queue_created: Future) -> None:
        from kubernetes.client.rest import ApiException
        try:
            queue_created.result()
            for retry in range(6):
                try:
                    self.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "jobs", body,
                                                                _request_timeout=TIMEOUT)
                    return
                except ApiException as e:
                    if e.status == 409:
                        return
                    if e.status != 429 or retry == 5:
                        raise
                time.sleep(0.2 * 2 ** retry)
        except Exception as e:
            if not self._stopping:
                self.results.append((time.monotonic(), "create_failed", name, reason_of(e)))

    def _now(self) -> float:
        return self._t(time.monotonic())

    # --- observation --------------------------------------------------------------------------
    def advance(self, now: float) -> list[Event]:
        self._clock(now)
        if self.watch is None:
            return []
        if self.watch.error is not None:
            raise RuntimeError(f"pod watch failed: {self.watch.error!r}")
        if self.vc is not None:
            self.vc.check_alive()
        out: list[Event] = []
        while self.results:
            mono, what, name, reason = self.results.popleft()
            g = self.gangs.get(name)
            if what == "create_failed" and g is not None and not g.done:
                g.done = True
                self.counters["submit_errors"] += 1
                out.append(Event(self._t(mono), g.job.id, Kind.REJECTED, reason=reason))
        q = self.watch.events
        while q:
            mono, typ, pv = q.popleft()
            self._apply(self._t(mono), typ, pv, out)
        self._flush_deletes()
        return out

    def _apply(self, t: float, typ: str, pv: PodView, out: list[Event]) -> None:
        prev = self.pods.get(pv.uid)
        was_holding = prev is not None and _holds(prev)
        now_holding = typ != "DELETED" and _holds(pv)
        if was_holding and not now_holding:
            self._release(prev)
        if now_holding and not was_holding:
            i = self.node_index.get(pv.node)
            if i is not None:
                self.node_used[i] += pv.gpus
        if typ == "DELETED":
            self.pods.pop(pv.uid, None)
        else:
            self.pods[pv.uid] = pv
        g = self.gangs.get(pv.job)
        if g is None or g.done:
            return
        jid = g.job.id
        if typ == "DELETED" or pv.phase == "Failed":
            if pv.uid in g.bound and pv.uid not in g.succeeded:
                g.bound.pop(pv.uid)
                if g.admitted and g.restart_t is None:
                    # A running gang lost a member: Volcano restarts the whole job (PodEvicted policy).
                    g.admitted, g.restart_t = False, t
                    self.counters["restarts"] += 1
                    out.append(Event(t, jid, Kind.EVICTED, 0, "evicted"))
                    out.append(Event(t, jid, Kind.REQUEUED, 0, "evicted"))
            return
        if pv.node and pv.uid not in g.bound and not pv.deleting:
            g.bound[pv.uid] = pv.node
            out.append(Event(t, jid, Kind.BOUND, len(g.bound)))
            if not g.admitted and len(g.bound) >= g.job.min_available:
                g.admitted = True
                if g.first_admit_t is None:
                    g.first_admit_t = t
                if g.restart_t is not None:
                    self.readmission_s.append(t - g.restart_t)
                    g.restart_t = None
                out.append(Event(t, jid, Kind.ADMITTED, len(g.bound)))
                out.append(Event(t, jid, Kind.STARTED, len(g.bound)))
        if pv.phase == "Succeeded" and g.admitted:
            g.succeeded.add(pv.uid)
            if len(g.succeeded) >= g.job.members:
                g.done = True
                out.append(Event(t, jid, Kind.FINISHED, 0))
                self._pending_deletes.append(g.name)

    def _release(self, pv: PodView) -> None:
        i = self.node_index.get(pv.node)
        if i is not None:
            self.node_used[i] -= pv.gpus

    def _flush_deletes(self) -> None:
        while self._pending_deletes:
            name = self._pending_deletes.popleft()
            self.gangs.pop(name, None)
            self.pool.submit(self._delete_job, name)

    def _delete_job(self, name: str) -> None:
        from kubernetes.client.rest import ApiException
        for retry in range(6):
            try:
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, "jobs", name, body={"propagationPolicy": "Background"},
                    _request_timeout=TIMEOUT)
                return
            except ApiException as e:
                if e.status == 404:
                    return
            except OSError:
                pass
            if self._stopping:
                return
            time.sleep(0.2 * 2 ** retry)
        self.counters["delete_errors"] += 1

    def snapshot(self, now: float) -> Snapshot:
        self._clock(now)
        waiting = [g for g in self.gangs.values() if not g.done and not g.admitted]
        partial = [g for g in waiting if g.bound]
        running = [g for g in self.gangs.values() if not g.done and g.admitted]
        free = np.clip(self.ctx.fleet.gpus_per_node - self.node_used, 0, None)
        if self.failed_nodes:
            free[list(self.failed_nodes)] = 0
        smallest = min((g.job.gpus_per_member for g in waiting), default=None)
        return Snapshot(
            t=now,
            gpus_allocated=int(self.node_used.sum()),
            gpus_partial=sum(len(g.bound) * g.job.gpus_per_member for g in partial),
            gpus_stranded=stranded_gpus(free, smallest),
            pending_jobs=len(waiting),
            partial_gangs=len(partial),
            running_jobs=len(running),
            control_plane=self._scrape(now, max_age_s=1.0),
        )

    # --- control plane ------------------------------------------------------------------------
    def _scrape(self, now: float, max_age_s: float) -> dict[str, Any]:
        """Latest figures from the scraper thread (max_age_s=0: scrape now, on this thread)."""
        if max_age_s <= 0:
            figures = scheduler_figures(self.vc.metrics_text() if self.vc else "")
            figures.update(apiserver_figures(self.cluster, self.api))
            self._last_scrape = (now, figures)
        return self._last_scrape[1]

    def _scrape_loop(self, interval_s: float) -> None:
        while not self._stop_scrape.wait(interval_s):
            try:
                self._scrape(0.0, 0.0)
            except Exception:
                pass

    def _collect(self) -> dict[str, Any]:
        return dict(self._scrape(float("inf"), max_age_s=0.0))

    def control_plane(self) -> dict[str, Any]:
        if self._final is not None:
            figures = dict(self._final)
        else:
            figures = self._collect() if self.vc else {}
        figures.update({k: v for k, v in self.counters.items()})
        figures.update(self.chaos_figures)
        figures["backend"] = "real"
        figures["restart_to_readmission_s"] = quantiles(self.readmission_s)
        figures["volcano_version"] = VOLCANO_VERSION
        return figures

    # --- chaos --------------------------------------------------------------------------------
    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        self._clock(now)
        handler = getattr(self, f"_chaos_{action.kind}", None)
        if handler is None:
            raise ChaosUnsupported(f"volcano/real does not support chaos kind {action.kind!r}")
        return handler(action, now)

    def _chaos_evict(self, action: ChaosAction, now: float) -> list[Event]:
        """Evict random running members through the Eviction API (what a drain or preemption does)."""
        out = self.advance(now)
        running = [(uid, g) for g in self.gangs.values() if g.admitted and not g.done
                   for uid in g.bound if uid not in g.succeeded]
        victims = self.rng.sample(running, min(int(action.params.get("members", 1)), len(running)))
        from kubernetes.client.rest import ApiException
        for uid, g in victims:
            pv = self.pods.get(uid)
            if pv is None:
                continue
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": pv.name, "namespace": NAMESPACE}}
            try:
                self.core.create_namespaced_pod_eviction(pv.name, NAMESPACE, body, _request_timeout=TIMEOUT)
                self.counters["evictions"] += 1
            except (ApiException, OSError) as e:
                if getattr(e, "status", None) != 404:
                    self.counters["eviction_errors"] += 1
        return out

    def _chaos_prefill(self, action: ChaosAction, now: float) -> list[Event]:
        """Pinned 'foreign' pods (spec.nodeName set, no scheduler) that fragment the fleet."""
        dur = action.params.get("duration_s")
        from kubernetes.client.rest import ApiException
        for node, gpus in action.params["placements"]:
            self._prefill_ids += 1
            ann = {COMPLETE_AFTER: go_duration(float(dur))} if dur is not None else {}
            req = {GPU: str(int(gpus)), "cpu": "1"}
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{PREFILL_PREFIX}{self._prefill_ids}", "annotations": ann},
                    "spec": {"nodeName": self.ctx.fleet.node_name(int(node)), "restartPolicy": "Never",
                             "tolerations": [{"operator": "Exists"}],
                             "containers": [{"name": "pin", "image": "gangstorm/fake-pin",
                                             "resources": {"requests": req, "limits": req}}]}}
            try:
                self.core.create_namespaced_pod(NAMESPACE, body, _request_timeout=TIMEOUT)
                self.counters["prefill_gpus"] += int(gpus)
            except (ApiException, OSError):
                self.counters["prefill_errors"] += 1
        return self.advance(now)

    # etcd pressure and node failure are the same API operations as on the kube backend: reuse them.
    def _chaos_etcd_fill(self, action: ChaosAction, now: float) -> list[Event]:
        from fakes.kube.target import RealKube
        p = action.params
        RealKube._etcd_fill(_KubeShim(self), int(p.get("bytes", 0)), int(p.get("object_bytes", 900 * 1024)))
        return self.advance(now)

    def _chaos_etcd_recover(self, action: ChaosAction, now: float) -> list[Event]:
        from fakes.kube.target import RealKube
        RealKube._etcd_recover(_KubeShim(self))
        return self.advance(now)

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> list[Event]:
        from fakes.kube.target import RealKube
        RealKube._node_fail(_KubeShim(self), [int(n) for n in action.params.get("nodes", [])], fail=True)
        return self.advance(now)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> list[Event]:
        from fakes.kube.target import RealKube
        RealKube._node_fail(_KubeShim(self), [int(n) for n in action.params.get("nodes", [])], fail=False)
        return self.advance(now)


def apiserver_figures(cluster, api_client) -> dict[str, Any]:
    """The apiserver and etcd figures the kube target reports, with its scrapers."""
    from fakes.kube import metrics as kube_metrics
    from fakes.kube.cluster import get_text
    from fakes.kube.target import RealKube
    out: dict[str, Any] = {}
    try:
        out["apiserver"] = kube_metrics.apiserver_figures(get_text(api_client, "/metrics"))
    except Exception as e:     # a scrape must never take the run down
        out["apiserver_error"] = type(e).__name__
    out["etcd"] = RealKube._plain_metrics(cluster.etcd_url + "/metrics", kube_metrics.etcd_figures)
    return out


class _KubeShim:
    """What RealKube's chaos and readiness helpers read from `self`, for reuse on our cluster."""

    def __init__(self, target: "RealVolcano"):
        self.api, self.cluster, self.fleet = target.core, target.cluster, target.ctx.fleet
        self.failed_nodes = target.failed_nodes
        self.figures = target.chaos_figures
