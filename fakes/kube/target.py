"""Real kube-scheduler on KWOK nodes: a gang is N plain pods, binding observed through one watch.

Threads: pod creations and deletions run on a small pool, the namespace watch runs on its own
thread; both only push (t, what, payload) tuples onto a queue. All job state is owned by the
caller's thread and changes in advance(), so submit/advance/snapshot need no locks. Every
blocking client call is off the caller's thread except chaos steps and the final scrape; a gevent
driver (Locust) should call chaos() through gevent's threadpool.

Clock: `now` passed in is wall seconds since run start; observations made on other threads are
stamped with time.monotonic() minus the offset learnt from those calls.
"""
from __future__ import annotations

import json
import queue
import random
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fakes.kube import metrics as kube_metrics
from loadgen.model.fleet import stranded_gpus
from fakes.kube.cluster import ClusterSpec, KubeCluster, get_text
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

NS = "gangstorm"
FILL_NS = "gangstorm-fill"
MANAGED = "app.kubernetes.io/managed-by=gangstorm"
L_JOB, L_TENANT = "gangstorm.io/job-id", "gangstorm.io/tenant"
A_COMPLETE = "gangstorm.io/complete-after"
FAIL_TAINT = "gangstorm.io/node-failed"

SCORING = {"least_allocated": "LeastAllocated", "most_allocated": "MostAllocated"}


def scheduler_config(cfg: dict) -> dict:
    """KubeSchedulerConfiguration for the scenario's kube section."""
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                 {"name": "nvidia.com/gpu", "weight": int(cfg.get("gpu_weight", 3))}]
    scoring = cfg.get("scoring", "least_allocated")
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "pluginConfig": []}
    if scoring == "balanced_allocation":
        profile["plugins"] = {"score": {"disabled": [{"name": "NodeResourcesFit"}],
                                        "enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 1}]}}
        profile["pluginConfig"].append({"name": "NodeResourcesBalancedAllocation",
                                        "args": {"resources": resources}})
    else:
        profile["pluginConfig"].append({"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": SCORING[scoring], "resources": resources}}})
    conf: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": float(cfg.get("api_qps", 50)), "burst": int(cfg.get("api_burst", 100))},
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }
    if cfg.get("percentage_of_nodes_to_score") is not None:
        conf["percentageOfNodesToScore"] = int(cfg["percentage_of_nodes_to_score"])
    return conf


def apiserver_args(cp: dict) -> dict[str, str]:
    return {"max-requests-inflight": str(cp.get("max_requests_inflight", 400)),
            "max-mutating-requests-inflight": str(cp.get("max_mutating_requests_inflight", 200)),
            "etcd-compaction-interval": f"{int(cp.get('compaction_interval_s', 300))}s"}


@dataclass
class Gang:
    job: Job
    first_try: float = 0.0
    pods: dict[str, int] = field(default_factory=dict)    # live pod name -> member index
    created: set[str] = field(default_factory=set)
    bound: dict[str, str] = field(default_factory=dict)   # pod -> node
    succeeded: set[str] = field(default_factory=set)
    replaced: int = 0                                     # pods recreated after a loss
    submitted: bool = False
    admitted_t: float | None = None
    finish_at: float | None = None
    done: bool = False

    @property
    def need(self) -> int:
        return self.job.min_available or self.job.members


def reason_of(exc: Exception) -> str:
    body = str(getattr(exc, "body", "") or exc)
    if "database space exceeded" in body or "NOSPACE" in body:
        return "etcd-nospace"
    status = getattr(exc, "status", None)
    if status == 429:
        return "apiserver-429"
    return f"api-{status}" if status else type(exc).__name__


def retryable(reason: str) -> bool:
    """Refusals a client retries (sim: control_plane.client_retry_s until submit_timeout_s)."""
    return reason in ("etcd-nospace", "apiserver-429") or reason.startswith("api-5") or not reason.startswith("api-")


class RealKube(Target):
    name = "kube"
    backend = "real"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.fleet = ctx.fleet
        self.cfg = dict(ctx.config or {})
        self.cp = dict(ctx.control_plane or {})
        self.completion = self.cfg.get("completion", "adapter")   # adapter | kwok
        self.rng = random.Random(ctx.seed)
        self.cluster: KubeCluster | None = None
        self.q: queue.Queue = queue.Queue()
        self.gangs: dict[int, Gang] = {}
        self.pod_gpus: dict[str, tuple[int, int]] = {}      # pod -> (job_id | -1 prefill, gpus)
        self.pod_node: dict[str, str] = {}                  # bound, not yet terminal
        self.pod_sent: dict[str, float] = {}                # client sent the create (pool thread)
        self.pod_latency: list[float] = []                  # create sent -> bound seen, seconds
        self.ours_deleted: set[str] = set()                 # deletions we asked for
        self.node_index = {self.fleet.node_name(i): i for i in range(self.fleet.nodes)}
        self.used = np.zeros(self.fleet.nodes, dtype=np.int32)
        self.failed_nodes: set[int] = set()
        self.prefill_until: list[tuple[float, list[str]]] = []
        self.retries: list[tuple[float, int, str, dict]] = []   # (due, job_id, pod, body)
        self.figures: dict[str, Any] = {}
        self._t0: float | None = None
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._chaos_pool: ThreadPoolExecutor | None = None
        self._scraper: threading.Thread | None = None
        self._cp_cache: dict[str, Any] = {}

    # -- clock ----------------------------------------------------------------------------------
    def _sync(self, now: float) -> None:
        off = time.monotonic() - now
        self._t0 = off if self._t0 is None else min(self._t0, off)

    def _clock(self) -> float:
        return time.monotonic() - (self._t0 if self._t0 is not None else time.monotonic())

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        run_dir = Path(self.ctx.run_dir) if self.ctx.run_dir else Path(tempfile.mkdtemp(prefix="gangstorm-kube-"))
        quota = int(self.cfg.get("etcd_quota_bytes") or self.cp.get("etcd_quota_bytes", 2 * 1024**3))
        spec = ClusterSpec(name=self.cfg.get("cluster_name", "gangstorm"), workdir=run_dir / "kube",
                           scheduler=True, scheduler_config=scheduler_config(self.cfg),
                           etcd_quota_bytes=quota, apiserver_args=apiserver_args(self.cp))
        self.cluster = KubeCluster(spec)
        try:
            self.cluster.start()
            self.figures["cluster_start_s"] = round(self.cluster.started_s, 2)
            from kubernetes import client as k8s
            threads = int(self.cfg.get("client_threads", 8))
            self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
            for ns in (NS, FILL_NS):
                self.api.create_namespace({"metadata": {"name": ns}})
            t0 = time.monotonic()
            self.cluster.create_nodes(self.fleet, threads=int(self.cfg.get("node_threads", 16)))
            self.figures["nodes_registered_s"] = round(time.monotonic() - t0, 2)
            self.figures["nodes_ready_s"] = round(self._wait_nodes_ready(), 2)
            self.figures["nodes"] = self.fleet.nodes
            self._wait_service_account()
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kube-client")
            self._chaos_pool = ThreadPoolExecutor(1, thread_name_prefix="kube-chaos")
            self._watch = threading.Thread(target=self._watch_pods, name="kube-watch", daemon=True)
            self._watch.start()
            self._scraper = threading.Thread(target=self._scrape_loop, name="kube-scrape", daemon=True)
            self._scraper.start()
        except BaseException:
            self.stop()
            raise

    def _wait_service_account(self, timeout: float = 120) -> None:
        """Pods are refused until the controller-manager has created the namespace's default
        ServiceAccount (the admission plugin looks it up even without a token mount)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.api.read_namespaced_service_account("default", NS, _preload_content=False)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no ServiceAccount default in namespace {NS} after {timeout}s")
                self.cluster.revive()
                time.sleep(0.5)

    def _wait_nodes_ready(self, timeout: float = 600) -> float:
        t0 = time.monotonic()
        while True:
            resp = self.api.list_node(_preload_content=False, resource_version="0")
            items = json.loads(resp.data)["items"]
            ready = sum(1 for n in items for c in n.get("status", {}).get("conditions", [])
                        if c["type"] == "Ready" and c["status"] == "True")
            if ready >= self.fleet.nodes:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"only {ready}/{self.fleet.nodes} KWOK nodes Ready after {timeout}s")
            self.cluster.revive()
            time.sleep(1.0)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for pool in (self._pool, self._chaos_pool):
            if pool:
                pool.shutdown(wait=False, cancel_futures=True)
        if self.cluster:
            try:
                self.figures.update(self._scrape())
            except Exception:
                pass
            self.cluster.stop()
        if self._watch:
            self._watch.join(timeout=5)

    # -- submission -----------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        """Create the gang's pods back to back on the pool; SUBMITTED once all are accepted."""
        self._sync(now)
        gang = self.gangs.setdefault(job.id, Gang(job, first_try=now))
        for m in range(job.members):
            self._create_pod(gang, m, f"j{job.id}-m{m}")
        return []

    def _pod_body(self, gang: Gang, name: str) -> dict:
        job = gang.job
        res = {"nvidia.com/gpu": str(job.gpus_per_member)}
        req = dict(res, cpu=str(max(job.cpus_per_member, 1)), memory="1Gi")
        ann = {A_COMPLETE: f"{job.duration_s:.3f}s"} if self.completion == "kwok" else {}
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": ann, "labels": {
                "app.kubernetes.io/managed-by": "gangstorm", L_JOB: str(job.id), L_TENANT: job.tenant}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,   # no token volume: smaller, cheaper pods
                     "containers": [{"name": "main", "image": "gangstorm/fake",
                                     "resources": {"requests": req, "limits": res}}]},
        }

    def _create_pod(self, gang: Gang, member: int, name: str) -> None:
        gang.pods[name] = member
        self.pod_gpus[name] = (gang.job.id, gang.job.gpus_per_member)
        self._pool.submit(self._create_one, gang.job.id, name, self._pod_body(gang, name))

    def _create_one(self, job_id: int, name: str, body: dict) -> None:
        """One create; the outcome goes to the queue (retries are scheduled by advance())."""
        self.pod_sent.setdefault(name, self._clock())   # plain dict store: atomic under the GIL
        try:
            self.api.create_namespaced_pod(NS, body, _preload_content=False, _request_timeout=60)
            self.q.put((self._clock(), "created", (job_id, name, body)))
        except Exception as e:
            if self._stop.is_set():
                return
            if getattr(e, "status", None) == 409:
                self.q.put((self._clock(), "created", (job_id, name, body)))
                return
            self.q.put((self._clock(), "create_failed", (job_id, name, body, reason_of(e))))

    def _delete_gang(self, job_id: int) -> None:
        for name in [p for p, (j, _) in self.pod_gpus.items() if j == job_id]:
            self.ours_deleted.add(name)
        self._pool.submit(self._delete_selector, f"{L_JOB}={job_id}")

    def _delete_selector(self, selector: str) -> None:
        for retry in range(20):
            try:
                self.api.delete_collection_namespaced_pod(NS, label_selector=selector, grace_period_seconds=0,
                                                          _preload_content=False, _request_timeout=60)
                return
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(min(0.5 * (retry + 1), 5))

    # -- the one watch ----------------------------------------------------------------------------
    def _watch_pods(self) -> None:
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    resp = self.api.list_namespaced_pod(NS, label_selector=MANAGED, _preload_content=False)
                    lst = json.loads(resp.data)
                    t = self._clock()
                    for pod in lst["items"]:
                        self.q.put((t, "pod", ("MODIFIED", _pod_view(pod))))
                    rv = lst["metadata"]["resourceVersion"]
                resp = self.api.list_namespaced_pod(
                    NS, label_selector=MANAGED, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                    timeout_seconds=60, _preload_content=False, _request_timeout=(10, 90))
                for line in resp:
                    if self._stop.is_set():
                        break
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    obj = ev.get("object", {})
                    if ev["type"] == "ERROR":
                        if obj.get("code") == 410:
                            rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev["type"] != "BOOKMARK":
                        self.q.put((self._clock(), "pod", (ev["type"], _pod_view(obj))))
                resp.release_conn()
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(0.5)

    # -- state machine (caller's thread) ----------------------------------------------------------
    def advance(self, now: float) -> list[Event]:
        self._sync(now)
        events: list[Event] = []
        while True:
            try:
                t, what, payload = self.q.get_nowait()
            except queue.Empty:
                break
            if what == "pod":
                events += self._on_pod(t, *payload)
            elif what == "created":
                events += self._on_created(t, *payload)
            elif what == "create_failed":
                events += self._on_create_failed(t, *payload)
        if self.retries and self.retries[0][0] <= now:
            due = [r for r in self.retries if r[0] <= now]
            self.retries = [r for r in self.retries if r[0] > now]
            for _, job_id, name, body in due:
                gang = self.gangs.get(job_id)
                if job_id < 0 or (gang and not gang.done and name in gang.pods):
                    self._pool.submit(self._create_one, job_id, name, body)
        if self.completion == "adapter":
            for gang in self.gangs.values():
                if gang.finish_at is not None and not gang.done and now >= gang.finish_at:
                    events.append(self._finish(gang, now))
        if self.prefill_until:
            keep = []
            for until, names in self.prefill_until:
                if now >= until:
                    self.ours_deleted.update(names)
                    self._pool.submit(self._delete_names, names)
                else:
                    keep.append((until, names))
            self.prefill_until = keep
        return events

    def _on_created(self, t: float, job_id: int, name: str, body: dict) -> list[Event]:
        gang = self.gangs.get(job_id)
        if gang is None or gang.done or name not in gang.pods:
            return []
        gang.created.add(name)
        if not gang.submitted and len(gang.created) >= gang.job.members:
            gang.submitted = True
            return [Event(t, job_id, Kind.SUBMITTED)]
        return []

    def _on_create_failed(self, t: float, job_id: int, name: str, body: dict, reason: str) -> list[Event]:
        """Refused create: retried every client_retry_s until submit_timeout_s (time-scaled),
        then the job fails with the refusal as reason; a malformed request is rejected at once."""
        gang = self.gangs.get(job_id)
        if job_id >= 0 and (gang is None or gang.done or name not in gang.pods):
            return []
        scale = max(float(self.ctx.time_scale or 1.0), 1e-9)
        first = gang.first_try if gang else t
        if retryable(reason) and t - first < float(self.cp.get("submit_timeout_s", 900.0)) / scale:
            self.retries.append((t + float(self.cp.get("client_retry_s", 10.0)) / scale, job_id, name, body))
            self.retries.sort(key=lambda r: r[0])
            self.figures["create_refused_" + reason] = self.figures.get("create_refused_" + reason, 0) + 1
            return []
        self.pod_gpus.pop(name, None)
        if gang is None:
            return []
        gang.done = True
        self._delete_gang(job_id)
        kind = Kind.FAILED if retryable(reason) or gang.submitted else Kind.REJECTED
        return [Event(t, job_id, kind, members=0, reason=reason)]

    def _finish(self, gang: Gang, t: float) -> Event:
        gang.done = True
        self._delete_gang(gang.job.id)
        return Event(t, gang.job.id, Kind.FINISHED, members=gang.job.members)

    def _release(self, pod: str) -> None:
        node = self.pod_node.pop(pod, None)
        if node is not None and node in self.node_index:
            self.used[self.node_index[node]] -= self.pod_gpus.get(pod, (0, 0))[1]

    def _on_pod(self, t: float, etype: str, pod: dict) -> list[Event]:
        name, node, phase, job_id = pod["name"], pod["node"], pod["phase"], pod["job"]
        if name not in self.pod_gpus:
            self.pod_gpus[name] = (job_id if job_id is not None else -1, pod["gpus"])
        terminal = etype == "DELETED" or phase in ("Succeeded", "Failed")
        was_bound_node = self.pod_node.get(name)
        if node and name not in self.pod_node and not terminal and not pod["deleting"]:
            self.pod_node[name] = node
            if node in self.node_index:
                self.used[self.node_index[node]] += self.pod_gpus[name][1]
            if name in self.pod_sent:
                self.pod_latency.append(t - self.pod_sent[name])
        if terminal:
            self._release(name)
        gang = self.gangs.get(job_id) if job_id is not None else None
        events: list[Event] = []
        if gang is not None and not gang.done and name in gang.pods:
            if node and name not in gang.bound and not terminal:
                gang.bound[name] = node
                events.append(Event(t, gang.job.id, Kind.BOUND, members=len(gang.bound)))
                if gang.admitted_t is None and len(gang.bound) >= gang.need:
                    gang.admitted_t = t
                    gang.finish_at = t + gang.job.duration_s
                    events += [Event(t, gang.job.id, Kind.ADMITTED, members=len(gang.bound)),
                               Event(t, gang.job.id, Kind.STARTED, members=len(gang.bound))]
            if phase == "Succeeded" and etype != "DELETED":
                gang.succeeded.add(name)
                if self.completion == "kwok" and len(gang.succeeded) >= gang.job.members:
                    events.append(self._finish(gang, t))
            elif terminal and name not in self.ours_deleted:
                node_i = self.node_index.get(was_bound_node or node or "")
                reason = "node-failure" if node_i in self.failed_nodes else "evicted"
                events += self._lost(gang, t, name, reason)
        if etype == "DELETED":
            self.pod_gpus.pop(name, None)
            self.pod_sent.pop(name, None)
            self.ours_deleted.discard(name)
        return events

    def _lost(self, gang: Gang, t: float, pod: str, reason: str) -> list[Event]:
        """A member went away under us (eviction, node failure). As with a Job controller, the
        lost pod is recreated and its siblings keep their nodes (fakes/kube/sim.py does the same);
        the gang counts as admitted again once every member is bound again."""
        member = gang.pods.pop(pod)
        gang.bound.pop(pod, None)
        gang.created.discard(pod)
        gang.admitted_t = gang.finish_at = None
        events = [Event(t, gang.job.id, Kind.EVICTED, members=len(gang.bound), reason=reason)]
        events.append(Event(t, gang.job.id, Kind.REQUEUED, members=len(gang.bound), reason=reason))
        gang.replaced += 1
        self._create_pod(gang, member, f"j{gang.job.id}-m{member}-r{gang.replaced}")
        return events

    def _delete_names(self, names: list[str]) -> None:
        for n in names:
            try:
                self.api.delete_namespaced_pod(n, NS, grace_period_seconds=0, _preload_content=False)
            except Exception:
                pass

    # -- observation ------------------------------------------------------------------------------
    def snapshot(self, now: float) -> Snapshot:
        pending = [g for g in self.gangs.values() if not g.done and g.admitted_t is None]
        partial = [g for g in pending if g.bound]
        running = [g for g in self.gangs.values() if not g.done and g.admitted_t is not None]
        free = self.fleet.gpus_per_node - self.used
        if self.failed_nodes:
            free = free.copy()
            free[list(self.failed_nodes)] = 0
        smallest = min((g.job.gpus_per_member for g in pending), default=None)
        return Snapshot(
            t=now,
            gpus_allocated=int(self.used.sum()),
            gpus_partial=sum(len([p for p in g.bound if p in self.pod_node]) * g.job.gpus_per_member
                             for g in partial),
            gpus_stranded=stranded_gpus(np.clip(free, 0, None), smallest),
            pending_jobs=len(pending), partial_gangs=len(partial), running_jobs=len(running),
            control_plane=self._cp_cache,
        )

    def _scrape_loop(self) -> None:
        """Keeps the latest control-plane figures for snapshots, off the caller's thread."""
        every = float(self.cfg.get("scrape_interval_s", 10))
        while not self._stop.wait(every):
            try:
                self._cp_cache = self._scrape()
            except Exception:
                pass

    def _scrape(self) -> dict[str, Any]:
        """Scheduler, apiserver and etcd /metrics, condensed."""
        out: dict[str, Any] = {}
        try:
            out["apiserver"] = kube_metrics.apiserver_figures(get_text(self.api.api_client, "/metrics"))
        except Exception as e:
            out["apiserver_error"] = reason_of(e)
        out["scheduler"] = self._plain_metrics(self.cluster.scheduler_metrics_url, kube_metrics.scheduler_figures)
        out["etcd"] = self._plain_metrics(self.cluster.etcd_url + "/metrics", kube_metrics.etcd_figures)
        return out

    @staticmethod
    def _plain_metrics(url: str, condense) -> dict:
        import warnings
        import urllib3
        http = urllib3.PoolManager(cert_reqs="CERT_NONE", retries=False, timeout=10)
        try:
            with warnings.catch_warnings():   # kube-scheduler's self-signed serving cert on 127.0.0.1
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                return condense(http.request("GET", url).data.decode())
        except Exception as e:
            return {"error": type(e).__name__}

    def control_plane(self) -> dict[str, Any]:
        out = dict(self.figures)
        if self.cluster and self.cluster.restarts:
            out["component_restarts"] = self.cluster.restarts
        if self.cluster and not self._stop.is_set():
            out.update(self._scrape())
        lat = np.array(self.pod_latency)
        if lat.size:
            out["client_pod_bind_p50_s"] = float(np.quantile(lat, 0.5))
            out["client_pod_bind_p99_s"] = float(np.quantile(lat, 0.99))
            out["client_pod_bind_count"] = int(lat.size)
        sched = out.get("scheduler", {})
        if lat.size and sched.get("sli_p99_s") is not None:
            # Client: create sent -> bind seen on the watch; scheduler: queue add -> bind.
            out["bind_latency_check"] = {
                "client_p50_s": out["client_pod_bind_p50_s"], "scheduler_sli_p50_s": sched["sli_p50_s"],
                "client_p99_s": out["client_pod_bind_p99_s"], "scheduler_sli_p99_s": sched["sli_p99_s"]}
        if self.cfg.get("coscheduling"):
            out["coscheduling"] = "not implemented on the real backend: plain kube-scheduler ran"
        out["backend"] = "real"
        return out

    # -- chaos ------------------------------------------------------------------------------------
    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        self._sync(now)
        kind, p = action.kind, action.params
        if kind == "evict":
            return self._evict(int(p.get("members", 1)), now)
        if kind == "node_fail":
            return self._node_fail([int(n) for n in p.get("nodes", [])], fail=True)
        if kind == "node_recover":
            return self._node_fail([int(n) for n in p.get("nodes", [])], fail=False)
        # etcd steps take seconds to minutes: they run in order on one chaos thread so the
        # runner keeps submitting (and observing the refusals) meanwhile.
        if kind == "etcd_fill":
            self._chaos_pool.submit(self._etcd_fill, int(p.get("bytes", 0)), int(p.get("object_bytes", 900 * 1024)))
            return []
        if kind == "etcd_recover":
            self._chaos_pool.submit(self._etcd_recover)
            return []
        if kind == "prefill":
            return self._prefill(p.get("placements", []), float(p.get("duration_s") or 0), now)
        raise ChaosUnsupported(f"kube/real does not support chaos kind {kind!r}")

    def _evict(self, members: int, now: float) -> list[Event]:
        running = sorted(p for g in self.gangs.values() if not g.done and g.admitted_t is not None
                         for p in g.bound if p in self.pod_node)
        victims = self.rng.sample(running, min(members, len(running)))
        done = Counter()
        for pod in victims:
            try:
                self.api.create_namespaced_pod_eviction(
                    pod, NS, {"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": pod, "namespace": NS},
                              "deleteOptions": {"gracePeriodSeconds": 0}}, _preload_content=False)
                done["evicted"] += 1
            except Exception as e:
                done[reason_of(e)] += 1
        self.figures.setdefault("chaos", []).append({"t": now, "kind": "evict", **done})
        return []   # EVICTED/REQUEUED follow from the watch (DELETED events we did not ask for)

    def _node_fail(self, nodes: list[int], fail: bool) -> list[Event]:
        for i in nodes:
            name = self.fleet.node_name(i)
            node = self.api.read_node(name, _preload_content=False)
            taints = [t for t in json.loads(node.data)["spec"].get("taints", []) or [] if t["key"] != FAIL_TAINT]
            if fail:
                taints.append({"key": FAIL_TAINT, "value": "true", "effect": "NoExecute"})
                self.failed_nodes.add(i)
            else:
                self.failed_nodes.discard(i)
            self.api.patch_node(name, {"metadata": {"annotations": {"gangstorm.io/fail": "true" if fail else None}},
                                       "spec": {"taints": taints}}, _preload_content=False)
        # NotReady comes from the KWOK node-fail stage; pods go through the controller-manager's
        # taint-eviction controller (NoExecute, no toleration) and reach us as watch DELETEs.
        return []

    def _etcd_fill(self, total_bytes: int, object_bytes: int) -> list[Event]:
        from kubernetes.client import ApiException
        object_bytes = min(object_bytes, 1000 * 1024)        # ConfigMaps are capped at 1 MiB
        blob = "x" * object_bytes
        t0, written, i, stop_reason = time.monotonic(), 0, 0, "bytes"
        while total_bytes <= 0 or written < total_bytes:
            try:
                self.api.create_namespaced_config_map(FILL_NS, {"metadata": {"name": f"fill-{i}"},
                                                                "data": {"blob": blob}},
                                                      _preload_content=False, _request_timeout=60)
                written += object_bytes
            except ApiException as e:
                if e.status == 409:
                    pass
                else:
                    stop_reason = reason_of(e)
                    break
            i += 1
        self.figures["etcd_fill"] = {"t_done": round(self._clock(), 2) if hasattr(self, "_t0") else None,
                                     "bytes_written": written, "objects": i, "stopped_by": stop_reason,
                                     "seconds": round(time.monotonic() - t0, 2)}
        return []

    def _etcd_recover(self) -> list[Event]:
        """Delete the filler, compact, defragment, disarm the NOSPACE alarm; timed end to end."""
        t0 = time.monotonic()
        steps = {}
        for retry in range(10):
            try:
                self.api.delete_collection_namespaced_config_map(FILL_NS, _preload_content=False,
                                                                 _request_timeout=120)
                break
            except Exception as e:
                steps["delete_error"] = reason_of(e)
                time.sleep(1)
        st = self.cluster.etcdctl("endpoint", "status", "-w", "json")
        rev = json.loads(st.stdout)[0]["Status"]["header"]["revision"]
        for step, args in (("compact", ["compaction", str(rev), "--physical"]), ("defrag", ["defrag"]),
                           ("disarm", ["alarm", "disarm"])):
            r = self.cluster.etcdctl(*args, timeout=300)
            steps[step] = "ok" if r.returncode == 0 else (r.stderr.strip()[-200:] or str(r.returncode))
        alarms = self.cluster.etcdctl("alarm", "list").stdout.strip()
        self.figures["etcd_recover"] = {"seconds": round(time.monotonic() - t0, 2), "revision": rev,
                                        "alarms_after": alarms, **steps}
        return []

    def _prefill(self, placements: list, duration_s: float, now: float) -> list[Event]:
        names = []
        for k, (node, gpus) in enumerate(placements):
            name = f"prefill-{int(now * 1000)}-{k}"
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gangstorm",
                                                          "gangstorm.io/prefill": "true"}},
                    "spec": {"nodeName": self.fleet.node_name(int(node)), "restartPolicy": "Never",
                             "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
                             "containers": [{"name": "main", "image": "gangstorm/fake", "resources": {
                                 "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"},
                                 "limits": {"nvidia.com/gpu": str(gpus)}}}]}}
            self.pod_gpus[name] = (-1, int(gpus))
            self._pool.submit(self._create_one, -1, name, body)
            names.append(name)
        if duration_s > 0:
            self.prefill_until.append((now + duration_s, names))
        return []


def _pod_view(pod: dict) -> dict:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    labels = meta.get("labels") or {}
    gpus = 0
    for c in spec.get("containers", []):
        gpus += int((c.get("resources", {}).get("requests") or {}).get("nvidia.com/gpu", 0))
    job = labels.get(L_JOB)
    return {"name": meta.get("name"), "node": spec.get("nodeName"), "phase": status.get("phase"),
            "deleting": meta.get("deletionTimestamp") is not None, "gpus": gpus,
            "job": int(job) if job is not None else None,
            "reason": status.get("reason") or ("evicted" if meta.get("deletionTimestamp") else "")}
