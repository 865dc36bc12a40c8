"""What the real kube and Volcano adapters share: a KWOK cluster, one pod watch, etcd and node chaos.

The real counterpart of fakes/sim/kubefamily.py. start() brings up the cluster
(fakes/kube/cluster.py) with the scenario's apiserver flags and etcd quota, registers the fleet as
KWOK nodes and waits until they are Ready. One thread watches the namespace's pods
(fakes/kube/pods.py); the caller's thread turns each change into GPUs held per node and into gang
events: BOUND per member, ADMITTED and STARTED once min_available members are bound, FINISHED once
every member Succeeded (KWOK's pod-complete stage), EVICTED and REQUEUED when a bound member is
lost. Client calls run on a pool and report back through the same inbox as the watch, so job state
stays on the caller's thread. A scraper thread keeps apiserver, etcd and scheduler figures.

A subclass implements:
  submit(job, now)               create the job's objects on self.pool (events via _emit)
  scheduler_profile()            KubeSchedulerConfiguration for kube-scheduler, or None to run none
  _start_scheduler(run_dir)      start a scheduler of its own once the nodes are Ready
  _scheduler_figures()           the scheduler's /metrics, condensed
  _lost(gang, t, pod, reason)    a bound member went away (it calls _requeue)
  _delete(gang)                  remove an ended gang's objects (on the pool)
"""
from __future__ import annotations

import base64
import itertools
import json
import queue
import random
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from fakes.kube import chaos as cluster_chaos, metrics as kube_metrics
from fakes.kube.cluster import ClusterSpec, KubeCluster, get_text, ready_nodes
from fakes.kube.pods import COMPLETE_AFTER, GPU, PodView, PodWatch, go_duration, pod_spec
from fakes.kube.refusal import reason_of, retryable
from fakes.real.base import RealTarget
from loadgen.model.events import Kind
from loadgen.model.job import Job
from loadgen.model.target import ChaosAction, TargetContext

NS = "gangstorm"
TIMEOUT = (10, 60)      # connect, read: a call on a dead keep-alive connection must not hang a run


def apiserver_args(cp: dict) -> dict[str, str]:
    return {"max-requests-inflight": str(cp.get("max_requests_inflight", 400)),
            "max-mutating-requests-inflight": str(cp.get("max_mutating_requests_inflight", 200)),
            "etcd-compaction-interval": f"{int(cp.get('compaction_interval_s', 300))}s"}


@dataclass(eq=False)
class Gang:
    job: Job
    bound: dict[str, str] = field(default_factory=dict)     # pod uid -> node, current attempt
    succeeded: set[str] = field(default_factory=set)
    retired: set[str] = field(default_factory=set)          # pods of an attempt given up on: ignored
    admitted_t: float | None = None                         # admitted in the current attempt
    requeued_t: float | None = None                         # lost members, not yet admitted again

    @property
    def need(self) -> int:
        return self.job.min_available or self.job.members


class RealKubeFamily(RealTarget):
    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cp = dict(ctx.control_plane or {})
        self.rng = random.Random(ctx.seed)
        self.gangs: dict[int, Gang] = {}                # job id -> every live job
        self.pods: dict[str, PodView] = {}              # uid -> latest view, until deleted
        self.used = np.zeros(self.fleet.nodes, dtype=np.int32)
        self.node_index = {self.fleet.node_name(i): i for i in range(self.fleet.nodes)}
        self.figures: dict[str, Any] = {}
        self.readmission_s: list[float] = []            # lost members -> admitted again
        self.cluster: KubeCluster | None = None
        self.api = None                                 # kubernetes CoreV1Api
        self.pool: ThreadPoolExecutor | None = None
        self._chaos_pool: ThreadPoolExecutor | None = None
        self.watch: PodWatch | None = None
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()   # (fn, args) for the caller's thread
        self._stop = threading.Event()
        self._live: dict[str, Any] = {}
        self._final: dict[str, Any] | None = None
        self._prefills = itertools.count()
        self._tmp: str | None = None

    # --- subclass hooks ---------------------------------------------------------------------------
    def scheduler_profile(self) -> dict | None:
        return None

    def _start_scheduler(self, run_dir: Path) -> None:
        """kube-scheduler, when there is one, came up with the cluster."""

    def _scheduler_figures(self) -> dict[str, Any]:
        return {}

    def _lost(self, gang: Gang, t: float, pod: PodView, reason: str) -> None:
        raise NotImplementedError

    def _delete(self, gang: Gang) -> None:
        raise NotImplementedError

    def _placed(self, t: float, pod: PodView) -> None:
        """A pod started holding its GPUs on a node."""

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        from kubernetes import client as k8s
        if self.ctx.run_dir is None:
            self._tmp = tempfile.mkdtemp(prefix=f"gangstorm-{self.name}-")
        # absolute: the components run in their own working directories and read config by path
        run_dir = Path(self.ctx.run_dir or self._tmp).resolve()
        profile = self.scheduler_profile()
        spec = ClusterSpec(name=self.cfg.get("cluster_name") or f"gangstorm-{self.name}", workdir=run_dir / "kube",
                           scheduler=profile is not None, scheduler_config=profile,
                           etcd_quota_bytes=int(self.cp.get("etcd_quota_bytes", 2 * 1024**3)),
                           apiserver_args=apiserver_args(self.cp))
        try:
            self.cluster = KubeCluster(spec)
            self.cluster.start()
            self.figures["cluster_start_s"] = round(self.cluster.started_s, 2)
            threads = int(self.cfg.get("client_threads", 8))
            self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
            for ns in (NS, cluster_chaos.FILL_NS):
                self.api.create_namespace({"metadata": {"name": ns}}, _preload_content=False)
            self.figures["nodes_registered_s"] = round(
                self.cluster.create_nodes(self.fleet, threads=int(self.cfg.get("node_threads", 16))), 2)
            self.figures["nodes_ready_s"] = round(self._wait_nodes_ready(), 2)
            self.figures["nodes"] = self.fleet.nodes
            self._wait_service_account()
            self._start_scheduler(run_dir)
            self.pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{self.name}-client")
            self._chaos_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-chaos")
            self.watch = PodWatch(k8s.CoreV1Api(self.cluster.api_client(2)), NS, partial(self._post, self._on_pod),
                                  self.clock.now)
            self.watch.start()
            threading.Thread(target=self._scrape_loop, name=f"{self.name}-scrape", daemon=True).start()
        except BaseException:
            self.stop()
            raise

    def _wait_nodes_ready(self, timeout: float = 600) -> float:
        t0 = time.monotonic()
        while True:
            ready = ready_nodes(self.api)
            if ready >= self.fleet.nodes:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"only {ready}/{self.fleet.nodes} KWOK nodes Ready after {timeout}s")
            self.cluster.revive()
            time.sleep(1.0)

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

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for pool in (self.pool, self._chaos_pool):
            if pool:
                pool.shutdown(wait=False, cancel_futures=True)
        if self.watch:
            self.watch.stop()
        if self.api is not None:
            self._final = self._scrape()
        if self.cluster:
            self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # --- client calls (pool threads) ----------------------------------------------------------------
    def _post(self, fn: Callable, *args: Any) -> None:
        """Run fn(*args) on the caller's thread at the next advance."""
        self._inbox.put((fn, args))

    def _retry(self, call: Callable[[], Any], ok: tuple[int, ...] = (409,), attempts: int = 6) -> None:
        """call() until it succeeds or answers a status in `ok`; retryable refusals are retried
        with backoff, anything else (or the last attempt's refusal) raises."""
        for attempt in range(attempts):
            try:
                call()
                return
            except Exception as e:
                if getattr(e, "status", None) in ok:
                    return
                if attempt == attempts - 1 or self._stop.is_set() or not retryable(reason_of(e)):
                    raise
            time.sleep(min(0.2 * 2 ** attempt, 5.0))

    def _call(self, call: Callable[[], Any], ok: tuple[int, ...] = (409,), failed: str = "") -> None:
        """_retry(call) on the client pool; a call that fails for good is counted as `failed`."""
        def run() -> None:
            try:
                self._retry(call, ok)
            except Exception:
                if failed and not self._stop.is_set():
                    self._post(self._count, failed)
        self.pool.submit(run)

    def _count(self, key: str, n: float = 1) -> None:
        self.figures[key] = self.figures.get(key, 0) + n

    # --- observation (caller's thread) ---------------------------------------------------------------
    def _observe(self, now: float) -> None:
        if self.watch is not None and self.watch.error is not None:
            raise RuntimeError(f"pod watch failed: {self.watch.error!r}")
        while True:
            try:
                fn, args = self._inbox.get_nowait()
            except queue.Empty:
                return
            fn(*args)

    def _on_pod(self, t: float, typ: str, pod: PodView) -> None:
        prev = self.pods.pop(pod.uid, None)
        if typ != "DELETED":
            self.pods[pod.uid] = pod
        held, holds = prev is not None and prev.holds, typ != "DELETED" and pod.holds
        if held != holds:
            changed = pod if holds else prev
            i = self.node_index.get(changed.node)
            if i is not None:
                self.used[i] += changed.gpus if holds else -changed.gpus
            if holds:
                self._placed(t, pod)
        gang = self.gangs.get(pod.job)
        if gang is None or pod.uid in gang.retired:
            return
        if typ == "DELETED" or pod.phase == "Failed":
            if pod.uid in gang.bound and pod.uid not in gang.succeeded:
                del gang.bound[pod.uid]
                self._lost(gang, t, pod, "node-failure" if self.node_index.get(pod.node) in self.down else "evicted")
            return
        if pod.node and pod.uid not in gang.bound and not pod.deleting:
            gang.bound[pod.uid] = pod.node
            self._emit(t, gang.job.id, Kind.BOUND, len(gang.bound))
            if gang.admitted_t is None and len(gang.bound) >= gang.need:
                self._admit(gang, t)
        if pod.phase == "Succeeded":
            gang.succeeded.add(pod.uid)
            if len(gang.succeeded) >= gang.job.members:
                self._end(gang, t, Kind.FINISHED)

    def _admit(self, gang: Gang, t: float) -> None:
        gang.admitted_t = t
        if gang.requeued_t is not None:
            self.readmission_s.append(t - gang.requeued_t)
            gang.requeued_t = None
        for kind in (Kind.ADMITTED, Kind.STARTED):
            self._emit(t, gang.job.id, kind, len(gang.bound))

    def _requeue(self, gang: Gang, t: float, members: int, reason: str) -> None:
        """The gang lost members and waits to be admitted again with `members` still bound."""
        gang.admitted_t = None
        if gang.requeued_t is None:
            gang.requeued_t = t
        self._count("restarts")
        for kind in (Kind.EVICTED, Kind.REQUEUED):
            self._emit(t, gang.job.id, kind, members, reason)

    def _end(self, gang: Gang, t: float, kind: Kind, reason: str = "") -> None:
        """FINISHED, FAILED or REJECTED: forget the gang and delete what is left of it."""
        del self.gangs[gang.job.id]
        self._emit(t, gang.job.id, kind, reason=reason)
        self._delete(gang)

    def live_gangs(self) -> Iterator[tuple[Job, int, bool]]:
        return ((g.job, len(g.bound.keys() - g.succeeded), g.admitted_t is not None) for g in self.gangs.values())

    def used_per_node(self) -> np.ndarray:
        return self.used

    def live_control_plane(self) -> dict[str, Any]:
        return self._live

    # --- control plane ----------------------------------------------------------------------------
    def _scrape(self) -> dict[str, Any]:
        """Scheduler, apiserver and etcd /metrics, condensed; never raises."""
        out = self._scheduler_figures()
        try:
            out["apiserver"] = kube_metrics.apiserver_figures(get_text(self.api.api_client, "/metrics"))
        except Exception as e:
            out["apiserver_error"] = reason_of(e)
        out["etcd"] = kube_metrics.fetch(self.cluster.etcd_url + "/metrics", kube_metrics.etcd_figures)
        return out

    # etcd key prefixes of the objects whose size the simulated control plane uses
    OBJECTS = {"pod": "/registry/pods/", "node": "/registry/minions/", "lease": "/registry/leases/kube-node-lease/",
               "podgroup": "/registry/scheduling.volcano.sh/podgroups/"}

    def _object_bytes(self, sample: int = 50) -> dict[str, float | None]:
        """Mean stored size of each kind of object, read from etcd itself (what its database holds)."""
        out: dict[str, float | None] = {}
        for kind, prefix in self.OBJECTS.items():
            try:
                r = self.cluster.etcdctl("get", prefix, "--prefix", f"--limit={sample}", "-w", "json", timeout=30)
                kvs = json.loads(r.stdout).get("kvs") or []
                sizes = [len(base64.b64decode(kv["value"])) for kv in kvs]
                out[kind] = round(sum(sizes) / len(sizes), 1) if sizes else None
            except Exception:       # a figure, never a reason for the run to fail
                out[kind] = None
        return out

    def _scrape_loop(self) -> None:
        """Keeps the latest figures for snapshots, off the caller's thread."""
        every = float(self.cfg.get("scrape_interval_s", 10))
        while not self._stop.wait(every):
            self._live = self._scrape()

    def control_plane(self) -> dict[str, Any]:
        out = dict(self.figures)
        if self.cluster and self.cluster.restarts:
            out["component_restarts"] = self.cluster.restarts
        if self._final is not None:
            out.update(self._final)
        elif self.api is not None:
            out.update(self._scrape())
            out["etcd_object_bytes"] = self._object_bytes()
        out["restart_to_readmission_s"] = kube_metrics.quantiles(self.readmission_s)
        out["backend"] = "real"
        return out

    # --- chaos (Target.chaos dispatches to these) -----------------------------------------------------
    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        """The Eviction API on random running members (what a drain or a preemption does); the
        losses come back through the watch."""
        self._observe(now)
        running = sorted(self.pods[uid].name for g in self.gangs.values() if g.admitted_t is not None
                         for uid in g.bound if uid in self.pods and self.pods[uid].holds)
        for name in self.rng.sample(running, min(int(action.params.get("members", 1)), len(running))):
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS},
                    "deleteOptions": {"gracePeriodSeconds": 0}}
            try:
                self.api.create_namespaced_pod_eviction(name, NS, body, _preload_content=False,
                                                        _request_timeout=TIMEOUT)
                self._count("evictions")
            except Exception as e:
                self._count(f"eviction_refused_{reason_of(e)}")

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        """KWOK flips the nodes NotReady and the taint-eviction controller deletes their pods: the
        losses come back through the watch, as node-failure."""
        self._mark_failed(action, True)

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        self._mark_failed(action, False)

    def _mark_failed(self, action: ChaosAction, failed: bool) -> None:
        nodes = {int(n) for n in action.params.get("nodes", [])}
        for i in sorted(nodes):
            cluster_chaos.mark_failed(self.api, self.fleet.node_name(i), failed)
        if failed:
            self.down |= nodes
        else:
            self.down -= nodes

    # etcd steps take seconds to minutes: they run in order on one chaos thread so the runner keeps
    # submitting (and observing the refusals) meanwhile; their figures land in self.figures.
    def _chaos_etcd_fill(self, action: ChaosAction, now: float) -> None:
        p = action.params
        fill = partial(cluster_chaos.fill_etcd, self.api, int(p.get("bytes", 0)),
                       int(p.get("object_bytes", 900 * 1024)), self._stop)
        self._chaos_pool.submit(self._chaos_step, "etcd_fill", fill)

    def _chaos_etcd_recover(self, action: ChaosAction, now: float) -> None:
        recover = partial(cluster_chaos.recover_etcd, self.api, self.cluster)
        self._chaos_pool.submit(self._chaos_step, "etcd_recover", recover)

    def _chaos_step(self, key: str, step: Callable[[], dict]) -> None:
        self.figures[key] = {**step(), "t_done": round(self.clock.now(), 2)}

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        """Pods pinned with spec.nodeName (no scheduler) that fragment the fleet; KWOK completes
        them after duration_s."""
        dur = action.params.get("duration_s")
        ann = {COMPLETE_AFTER: go_duration(float(dur))} if dur else {}
        for node, gpus in action.params.get("placements", []):
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"prefill-{next(self._prefills)}", "annotations": ann,
                                 "labels": {"app.kubernetes.io/managed-by": "gangstorm",
                                            "gangstorm.io/prefill": "true"}},
                    "spec": pod_spec({GPU: str(int(gpus)), "cpu": "1"}, nodeName=self.fleet.node_name(int(node)))}
            self._call(partial(self.api.create_namespaced_pod, NS, body, _preload_content=False,
                               _request_timeout=TIMEOUT), failed="prefill_errors")
            self._count("prefill_gpus", int(gpus))
