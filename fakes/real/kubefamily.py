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
from fakes.kube.attached import AttachedCluster, foreign_pods, pods_by_node
from fakes.kube.cluster import ClusterSpec, KubeCluster, create_nodes, get_text, node_body, ready_nodes
from fakes.kube.pods import (COMPLETE_AFTER, GPU, READY_AFTER, STARTUP, PodView, PodWatch, go_duration, job_labels,
                             pod_spec)
from fakes.kube.refusal import message_of, reason_of, retryable
from fakes.real.base import RealTarget
from fakes.real.procs import signals_held
from loadgen.model.events import Event, Kind
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.job import Job
from loadgen.model.target import RUN_LABEL, ChaosAction, ClusterRefused, ForeignWorkloads, TargetContext, run_label

NS = "gangstorm"
TIMEOUT = (10, 60)      # connect, read: a call on a dead keep-alive connection must not hang a run


def apiserver_args(cp: dict) -> dict[str, str]:
    # TaintNodesByCondition off (as scheduler_perf runs): it creates every node with the
    # not-ready:NoSchedule taint, which kube-controller-manager lifts at about 5 nodes/s once KWOK
    # made the node Ready, so 2,000 nodes stayed partly unschedulable for ~400 s after "Ready".
    return {"max-requests-inflight": str(cp.get("max_requests_inflight", 400)),
            "max-mutating-requests-inflight": str(cp.get("max_mutating_requests_inflight", 200)),
            "etcd-compaction-interval": f"{int(cp.get('compaction_interval_s', 300))}s",
            "disable-admission-plugins": "TaintNodesByCondition"}


@dataclass(eq=False)
class Gang:
    job: Job
    bound: dict[str, str] = field(default_factory=dict)     # pod uid -> node, current attempt
    succeeded: set[str] = field(default_factory=set)
    retired: set[str] = field(default_factory=set)          # pods of an attempt given up on: ignored
    admitted_t: float | None = None                         # admitted in the current attempt
    requeued_t: float | None = None                         # lost members, not yet admitted again
    ready: set[str] = field(default_factory=set)            # bound pods whose Ready condition is True
    ready_t: float | None = None                            # READY in the current attempt

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
        # An existing cluster (--kubeconfig): everything the run creates carries the run label and
        # lives in namespaces of its own; its nodes are either created here (run-labelled, driven
        # by a kwok of its own) or chosen with --node-selector. stop() deletes all of it.
        self.existing = ctx.existing if ctx.existing and ctx.existing.kubeconfig else None
        self.label = run_label(ctx.run_id)
        self.ns = f"gangstorm-{self.label}"[:63].rstrip("-") if self.existing else NS
        self.fill_ns = f"{self.ns}-fill"[:63] if self.existing else cluster_chaos.FILL_NS
        self.node_names = [self.fleet.node_name(i) for i in range(self.fleet.nodes)]
        self.node_selector: dict[str, str] = {}             # pods go only to the run's nodes
        self.left_behind: dict[str, int] | None = None      # labelled objects still there after stop()
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        self.role = ctx.role
        self.expected: dict[int, Job] = {}               # observe role: jobs other processes send
        self.ended: set[int] = set()                     # finished, failed or rejected job ids
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
        # Placement-to-ready: each bound pod's node pulls the image (loadgen/model/startup/imagecache.py,
        # time-scaled); KWOK's pod-ready-after Stage makes the pod Ready after the delay it computes.
        image = ctx.startup.image
        self.startup = image.pulls or image.container_start_s > 0
        self.images = ImageCache(image, self.fleet.nodes, ctx.seed)

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
        threads = int(self.cfg.get("client_threads", 8))
        try:
            if self.role == "submit":
                self._attach_submitter(run_dir, threads)
                self.pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{self.name}-client")
                return
            if self.existing:
                self._attach(run_dir, threads)
            else:
                self._launch(run_dir, threads)
            self.pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{self.name}-client")
            self._chaos_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-chaos")
            self.watch = PodWatch(k8s.CoreV1Api(self.cluster.api_client(2)), self.ns, partial(self._post, self._on_pod),
                                  self.clock.now)
            self.watch.start()
            self.figures["pod_watches"] = 1        # one per cluster, however many processes submit
            threading.Thread(target=self._scrape_loop, name=f"{self.name}-scrape", daemon=True).start()
        except BaseException:
            self.stop()
            raise

    def _launch(self, run_dir: Path, threads: int) -> None:
        """A KWOK cluster of our own with the scenario's apiserver flags, etcd quota and scheduler."""
        from kubernetes import client as k8s
        profile = self.scheduler_profile()
        spec = ClusterSpec(name=self.cfg.get("cluster_name") or f"gangstorm-{self.name}", workdir=run_dir / "kube",
                           scheduler=profile is not None, scheduler_config=profile,
                           etcd_quota_bytes=int(self.cp.get("etcd_quota_bytes", 2 * 1024**3)),
                           apiserver_args=apiserver_args(self.cp))
        self.cluster = KubeCluster(spec)
        self.cluster.start()
        self.figures["cluster_start_s"] = round(self.cluster.started_s, 2)
        self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
        for ns in (self.ns, self.fill_ns):
            self.api.create_namespace({"metadata": {"name": ns}}, _preload_content=False)
        self.figures["nodes_registered_s"] = round(
            self.cluster.create_nodes(self.fleet, threads=int(self.cfg.get("node_threads", 16))), 2)
        self.figures["nodes_ready_s"] = round(self._wait_nodes_ready(), 2)
        self.figures["nodes"] = self.fleet.nodes
        self._wait_service_account()
        self._start_scheduler(run_dir)

    # --- an existing cluster ------------------------------------------------------------------------
    def _attach(self, run_dir: Path, threads: int) -> None:
        from kubernetes import client as k8s
        self.cluster = AttachedCluster(self.existing, run_dir / "kube").start()
        self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
        self.figures["existing_cluster"] = {"server": self.cluster.url, "run_label": f"{RUN_LABEL}={self.label}",
                                            "namespace": self.ns}
        self._refuse_foreign()
        self._check_scheduler_installed()
        if self.existing.node_selector:
            self._select_nodes()
        labels = {RUN_LABEL: self.label, "app.kubernetes.io/managed-by": "gangstorm"}
        for ns in (self.ns, self.fill_ns):
            self.api.create_namespace({"metadata": {"name": ns, "labels": labels}}, _preload_content=False)
        if not self.existing.node_selector:
            self._create_own_nodes(threads)
        self.figures["nodes_ready_s"] = round(self._wait_nodes_ready(), 2)
        self.figures["nodes"] = self.fleet.nodes
        self._wait_service_account()
        self._attach_scheduler()

    def _attach_submitter(self, run_dir: Path, threads: int) -> None:
        """Submit role: only a client. The observing process created the namespaces and nodes; the
        pods' node selector follows from the same flags and run label."""
        from kubernetes import client as k8s
        if not self.existing:
            raise ValueError(f"{self.name}: the submit role needs an existing cluster (--kubeconfig)")
        self.cluster = AttachedCluster(self.existing, run_dir / "kube").start()
        self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
        self.node_selector = self._planned_node_selector()
        self._wait_service_account(timeout=300)     # the observer's namespace is ready for pods
        self._attach_scheduler()

    def _planned_node_selector(self) -> dict[str, str]:
        if self.existing.node_selector:
            return dict(kv.split("=", 1) if "=" in kv else (kv, "") for kv in self.existing.node_selector.split(","))
        return {RUN_LABEL: self.label}

    def expect(self, jobs: dict[int, Job]) -> None:
        """Observe role: the jobs other processes submit; a gang is tracked from its first pod."""
        self.expected = dict(jobs)

    def _adopt(self, job: Job, t: float) -> Gang:
        """A gang another process submitted, seen for the first time (observe role)."""
        return Gang(job)

    def _refuse_foreign(self) -> list[str]:
        pods = foreign_pods(self.api, self.label)
        if pods and not self.existing.allow_foreign:
            shown = ", ".join(pods[:3]) + (f", ... {len(pods) - 3} more" if len(pods) > 3 else "")
            raise ForeignWorkloads(
                f"--kubeconfig {self.existing.kubeconfig} ({self.cluster.url}): {len(pods)} pods gangstorm did not "
                f"create ({shown}): pass --allow-foreign-workloads to run next to them (they are never touched)")
        self.figures["foreign_pods"] = len(pods)
        return pods

    def _candidate_nodes(self) -> list[str]:
        """Ready, schedulable nodes matching --node-selector with the fleet's GPUs, sorted by name."""
        sel = self.existing.node_selector
        items = json.loads(self.api.list_node(label_selector=sel, _preload_content=False).data)["items"]
        ok = []
        for n in items:
            st, spec = n.get("status") or {}, n.get("spec") or {}
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])
            gpus = int(str((st.get("allocatable") or {}).get(GPU, "0")) or 0)
            if ready and not spec.get("unschedulable") and gpus >= self.fleet.gpus_per_node:
                ok.append(n["metadata"]["name"])
        return sorted(ok)

    def _select_nodes(self) -> None:
        found = self._candidate_nodes()
        if len(found) < self.fleet.nodes:
            raise ClusterRefused(f"--node-selector {self.existing.node_selector}: {len(found)} Ready nodes with "
                                 f">= {self.fleet.gpus_per_node} {GPU}, the scenario's fleet needs "
                                 f"{self.fleet.nodes} (pass --nodes {len(found)} or fewer)")
        self._use_nodes(found[: self.fleet.nodes])
        self.node_selector = self._planned_node_selector()

    def _create_own_nodes(self, threads: int) -> None:
        names = [f"gs-{self.label}-{i:05d}" for i in range(self.fleet.nodes)]
        self._use_nodes(names)
        labels = {RUN_LABEL: self.label}
        self.cluster.start_kwok(f"{RUN_LABEL}={self.label}")
        self.figures["nodes_registered_s"] = round(create_nodes(
            self.cluster.api_client(threads), self.fleet, threads,
            body=lambda fleet, i: node_body(fleet, i, names[i], labels, kwok_annotation=False)), 2)
        self.node_selector = self._planned_node_selector()

    def _use_nodes(self, names: list[str]) -> None:
        self.node_names = list(names)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}

    def _check_scheduler_installed(self) -> None:
        """Volcano checks its CRDs here; kube-scheduler is part of every cluster."""

    def _attach_scheduler(self) -> None:
        """Clients for the cluster's own scheduler objects (Volcano); nothing is started."""

    def pod_fields(self) -> dict[str, Any]:
        """Spec fields every pod of the run gets: on an existing cluster, only the run's nodes."""
        return {"nodeSelector": dict(self.node_selector)} if self.node_selector else {}

    def labels(self, job: Job) -> dict[str, str]:
        return {**job_labels(job), RUN_LABEL: self.label}

    def preflight(self) -> list[str]:
        """Read-only: the apiserver answers, foreign pods (refused unless allowed), the nodes the
        run would use, the scheduler (Volcano's CRDs)."""
        if not self.existing:
            return []
        from kubernetes import client as k8s
        self.cluster = AttachedCluster(self.existing, Path(tempfile.gettempdir()))
        self.cluster.start()
        self.api = k8s.CoreV1Api(self.cluster.api_client(2))
        pods = self._refuse_foreign()
        self._check_scheduler_installed()
        lines = [f"kube-apiserver {self.cluster.url} ready; {len(pods)} pods gangstorm did not create"
                 + (" (allowed; never touched)" if pods else "")]
        if self.existing.node_selector:
            found = self._candidate_nodes()
            if len(found) < self.fleet.nodes:
                self._select_nodes()          # raises with the counts
            lines.append(f"{len(found)} Ready nodes match --node-selector {self.existing.node_selector}; "
                         f"the run uses the first {self.fleet.nodes} ({found[0]} .. {found[self.fleet.nodes - 1]})")
        else:
            lines.append(f"would create {self.fleet.nodes} KWOK nodes labelled {RUN_LABEL}={self.label} "
                         f"and run a kwok controller for them, namespaces {self.ns} and {self.fill_ns}")
        return lines

    def _wait_nodes_ready(self, timeout: float = 600) -> float:
        t0 = time.monotonic()
        while True:
            ready = ready_nodes(self.api, set(self.node_names) if self.existing else None)
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
                self.api.read_namespaced_service_account("default", self.ns, _preload_content=False)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no ServiceAccount default in namespace {self.ns} after {timeout}s")
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
        if self.api is not None and self.role != "submit":
            self._final = self._scrape()
            if self.existing:
                with signals_held():
                    self.left_behind = self._remove_labelled()
        if self.cluster:
            self.cluster.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def labelled(self) -> dict[str, int]:
        """Objects carrying this run's label in the cluster, by kind (what stop() must leave at 0)."""
        sel = f"{RUN_LABEL}={self.label}"
        out = {}
        for kind, call in (("pods", self.api.list_pod_for_all_namespaces), ("namespaces", self.api.list_namespace),
                           ("nodes", self.api.list_node),
                           ("configmaps", self.api.list_config_map_for_all_namespaces)):
            out[kind] = len(json.loads(call(label_selector=sel, _preload_content=False, _request_timeout=(10, 60)).data)["items"])
        out.update(self._labelled_scheduler_objects(sel))
        return out

    def _labelled_scheduler_objects(self, selector: str) -> dict[str, int]:
        return {}

    def _remove_scheduler_objects(self) -> None:
        """Volcano: its Jobs and the run's Queues."""

    def _remove_labelled(self, timeout_s: float = 90.0) -> dict[str, int]:
        """Delete everything the run created on the existing cluster (its pods, namespaces, nodes,
        scheduler objects), recover nodes it failed, and wait until nothing labelled is left;
        returns what is still there after timeout_s (all zeros when clean)."""
        sel, api = f"{RUN_LABEL}={self.label}", self.api
        quiet = dict(_preload_content=False, _request_timeout=(10, 60))
        steps = [lambda: self._remove_scheduler_objects()]
        steps += [partial(api.delete_collection_namespaced_pod, ns, label_selector=sel, grace_period_seconds=0, **quiet)
                  for ns in (self.ns, self.fill_ns)]
        steps += [partial(api.delete_namespace, ns, **quiet) for ns in (self.ns, self.fill_ns)]
        for i in sorted(self.down):
            steps.append(partial(cluster_chaos.mark_failed, api, self.node_names[i], False))
        for step in steps:
            try:
                step()
            except Exception as e:
                if getattr(e, "status", None) != 404:
                    self._count(f"cleanup_error_{reason_of(e)}")
        deadline = time.monotonic() + timeout_s
        left = self.labelled()
        while left["pods"] and time.monotonic() < deadline:     # our kwok finalizes pods on our nodes
            time.sleep(1.0)
            left = self.labelled()
        try:
            api.delete_collection_node(label_selector=sel, **quiet)
        except Exception as e:
            self._count(f"cleanup_error_{reason_of(e)}")
        while any(left.values()) and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self.labelled()
        return left

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

    def _note_refusal(self, exc: Exception) -> str:
        """The refusal's reason; the first message of each reason is kept for the summary (pool
        threads call this: setdefault on a dict is atomic under the GIL)."""
        reason = reason_of(exc)
        self.figures.setdefault("first_refusal", {}).setdefault(reason, message_of(exc))
        return reason

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
        if gang is None and pod.job in self.expected and pod.job not in self.ended and typ != "DELETED":
            gang = self.gangs[pod.job] = self._adopt(self.expected[pod.job], t)
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
            if self.startup and self.role != "submit":
                self._start_pull(gang, t, pod)
            if gang.admitted_t is None and len(gang.bound) >= gang.need:
                self._admit(gang, t)
        if pod.ready and pod.uid in gang.bound:
            gang.ready.add(pod.uid)
            self._check_ready(gang, t)
        if pod.phase == "Succeeded":
            gang.succeeded.add(pod.uid)
            if len(gang.succeeded) >= gang.job.members:
                self._end(gang, t, Kind.FINISHED)

    def _admit(self, gang: Gang, t: float) -> None:
        gang.admitted_t = t
        if gang.requeued_t is not None:
            self.readmission_s.append(t - gang.requeued_t)
            gang.requeued_t = None
        nodes = tuple(self.node_index.get(n, -1) for n in gang.bound.values())
        self._emit(t, gang.job.id, Kind.ADMITTED, len(gang.bound), nodes=tuple(n for n in nodes if n >= 0))
        self._emit(t, gang.job.id, Kind.STARTED, len(gang.bound))
        self._check_ready(gang, t)

    def metrics_endpoints(self) -> list[dict[str, Any]]:
        """kube-apiserver and kube-scheduler (the admin client certificate, self-signed serving
        certificates) and etcd, when this run started them or was given them."""
        if self.cluster is None or self.api is None:
            return []
        conf = self.api.api_client.configuration
        tls = {"cert_file": conf.cert_file, "key_file": conf.key_file, "tls_insecure": True}
        out = [{"name": "kube-apiserver", "url": f"{self.cluster.url}/metrics", **tls}]
        if self.cluster.scheduler_metrics_url:
            out.append({"name": "kube-scheduler", "url": self.cluster.scheduler_metrics_url, **tls})
        if self.cluster.etcd_url:
            out.append({"name": "etcd", "url": f"{self.cluster.etcd_url}/metrics"})
        return out

    # --- placement-to-ready ---------------------------------------------------------------------------
    def startup_annotations(self) -> dict[str, str]:
        """What a gang member's pod carries at creation so that KWOK waits for the pull delay."""
        return {STARTUP: "image-cache"} if self.startup else {}

    def _start_pull(self, gang: Gang, t: float, pod: PodView) -> None:
        """The pod was bound at t: its node pulls the image (or has it); KWOK makes it Ready when
        the model says. With completion by KWOK the run is shortened by the same delay, so a gang
        holds its GPUs for its duration from binding, as in the simulators."""
        i = self.node_index.get(pod.node)
        if i is None:
            return
        ready = self.images.ready_at(t, [i])[i]
        ann = {READY_AFTER: go_duration(max(ready - self.clock.now(), 0.0))}
        if self.completes_by_kwok():
            ann[COMPLETE_AFTER] = go_duration(max(gang.job.duration_s - (ready - t), 0.5))
        self._call(partial(self.api.patch_namespaced_pod, pod.name, self.ns, {"metadata": {"annotations": ann}},
                           _preload_content=False, _request_timeout=(10, 60)), ok=(404,), failed="ready_patch_errors")

    def completes_by_kwok(self) -> bool:
        """Whether KWOK's pod-complete Stage ends gang pods (COMPLETE_AFTER counts from Ready)."""
        return False

    def _check_ready(self, gang: Gang, t: float) -> None:
        """READY once the admitted gang's bound pods are all Ready (KWOK's pod-ready stages)."""
        if gang.admitted_t is None or gang.ready_t is not None:
            return
        if len(gang.ready & gang.bound.keys()) >= min(gang.need, len(gang.bound)):
            gang.ready_t = t
            self._emit(t, gang.job.id, Kind.READY)

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Every pod of the admitted gang through the Eviction API: the losses come back through
        the watch and the gang is recreated (Job controller) or restarted (Volcano RestartJob)."""
        self.clock.sync(now)
        gang = self.gangs.get(job_id)
        if gang is None or gang.admitted_t is None:
            return self._take()
        for uid in list(gang.bound):
            pod = self.pods.get(uid)
            if pod is None:
                continue
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.name, "namespace": self.ns},
                    "deleteOptions": {"gracePeriodSeconds": 0}}
            self._call(partial(self.api.create_namespaced_pod_eviction, pod.name, self.ns, body,
                               _preload_content=False, _request_timeout=TIMEOUT), ok=(404,), failed="restart_errors")
        self._count("restarts_requested")
        return self._take()

    def _requeue(self, gang: Gang, t: float, members: int, reason: str) -> None:
        """The gang lost members and waits to be admitted again with `members` still bound."""
        gang.admitted_t = None
        gang.ready_t = None
        gang.ready &= gang.bound.keys()
        if gang.requeued_t is None:
            gang.requeued_t = t
        self._count("restarts")
        for kind in (Kind.EVICTED, Kind.REQUEUED):
            self._emit(t, gang.job.id, kind, members, reason)

    def _end(self, gang: Gang, t: float, kind: Kind, reason: str = "") -> None:
        """FINISHED, FAILED or REJECTED: forget the gang and delete what is left of it."""
        del self.gangs[gang.job.id]
        self.ended.add(gang.job.id)
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
        if self.cluster.etcd_url:
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
        if self.startup:
            out.update(self.images.figures(self.clock.now()))
        out["backend"] = "real"
        return out

    def after_stop(self) -> dict[str, Any]:
        """What stop() left on an existing cluster ({} on a cluster of our own)."""
        return {} if self.left_behind is None else {"left_behind": self.left_behind}

    # --- chaos (Target.chaos dispatches to these) -----------------------------------------------------
    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        """The Eviction API on random running members (what a drain or a preemption does); the
        losses come back through the watch."""
        self._observe(now)
        running = sorted(self.pods[uid].name for g in self.gangs.values() if g.admitted_t is not None
                         for uid in g.bound if uid in self.pods and self.pods[uid].holds)
        for name in self.rng.sample(running, min(int(action.params.get("members", 1)), len(running))):
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": self.ns},
                    "deleteOptions": {"gracePeriodSeconds": 0}}
            try:
                self.api.create_namespaced_pod_eviction(name, self.ns, body, _preload_content=False,
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
        if failed and self.existing and self.existing.node_selector:
            nodes -= self._hosting_foreign(nodes)
        for i in sorted(nodes):
            cluster_chaos.mark_failed(self.api, self.node_names[i], failed)
        if failed:
            self.down |= nodes
        else:
            self.down -= nodes

    def _hosting_foreign(self, nodes: set[int]) -> set[int]:
        """Selected nodes (--node-selector) that run a pod gangstorm did not create: failing them
        would evict it, so chaos leaves them alone and counts them."""
        by_node = pods_by_node(self.api)
        busy = {i for i in nodes if any((m.get("labels") or {}).get(RUN_LABEL) != self.label
                                        for m in by_node.get(self.node_names[i], []))}
        if busy:
            self._count("node_fail_skipped_foreign", len(busy))
        return busy

    # etcd steps take seconds to minutes: they run in order on one chaos thread so the runner keeps
    # submitting (and observing the refusals) meanwhile; their figures land in self.figures.
    def _chaos_etcd_fill(self, action: ChaosAction, now: float) -> None:
        p = action.params
        fill = partial(cluster_chaos.fill_etcd, self.api, int(p.get("bytes", 0)),
                       int(p.get("object_bytes", 900 * 1024)), self._stop, self.fill_ns, {RUN_LABEL: self.label})
        self._chaos_pool.submit(self._chaos_step, "etcd_fill", fill)

    def _chaos_etcd_recover(self, action: ChaosAction, now: float) -> None:
        recover = partial(cluster_chaos.recover_etcd, self.api, self.cluster, self.fill_ns)
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
                                            "gangstorm.io/prefill": "true", RUN_LABEL: self.label}},
                    "spec": pod_spec({GPU: str(int(gpus)), "cpu": "1"}, nodeName=self.node_names[int(node)])}
            self._call(partial(self.api.create_namespaced_pod, self.ns, body, _preload_content=False,
                               _request_timeout=TIMEOUT), failed="prefill_errors")
            self._count("prefill_gpus", int(gpus))
