"""Bringing the cluster up: a KWOK cluster of our own (launch), an existing cluster (attach), the
submit role's client-only attach, node selection on an existing cluster, readiness waits and the
read-only preflight."""
from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from fakes.kube.attached import AttachedCluster, foreign_pods
from fakes.kube.cluster import ClusterSpec, KubeCluster, create_nodes, node_body, ready_nodes
from fakes.kube.family.gang import Gang
from fakes.kube.pods import GPU, PodWatch, job_labels
from fakes.kube.poster import JsonPoster
from loadgen.model.job import Job
from loadgen.model.target import RUN_LABEL, ClusterRefused, ForeignWorkloads


def apiserver_args(cp: dict) -> dict[str, str]:
    return {"max-requests-inflight": str(cp.get("max_requests_inflight", 400)),
            "max-mutating-requests-inflight": str(cp.get("max_mutating_requests_inflight", 200)),
            "etcd-compaction-interval": f"{int(cp.get('compaction_interval_s', 300))}s",
            # TaintNodesByCondition off (as scheduler_perf runs): it creates every node with the
            # not-ready:NoSchedule taint, which kube-controller-manager lifts at about 5 nodes/s once KWOK
            # made the node Ready, so 2,000 nodes stayed partly unschedulable for ~400 s after "Ready".
            "disable-admission-plugins": "TaintNodesByCondition"}


class ClusterSetup:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

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
                self.poster = JsonPoster(self.api.api_client)
                self.pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{self.name}-client")
                return
            if self.existing:
                self._attach(run_dir, threads)
            else:
                self._launch(run_dir, threads)
            self.poster = JsonPoster(self.api.api_client)
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
                           apiserver_args=apiserver_args(self.cp), **self.cluster_options())
        self.cluster = KubeCluster(spec)
        self.cluster.start()
        self.figures["cluster_start_s"] = round(self.cluster.started_s, 2)
        self.api = k8s.CoreV1Api(self.cluster.api_client(threads * 2))
        for ns in (self.ns, self.fill_ns):
            self.api.create_namespace({"metadata": {"name": ns}}, _preload_content=False)
        self.figures["nodes_registered_s"] = round(self.cluster.create_nodes(
            self.fleet, threads=int(self.cfg.get("node_threads", 16)),
            body=lambda fleet, i: self.node_body(node_body(fleet, i, gpus=self.node_gpus), i)), 2)
        self._publish_devices(threads)
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
            body=lambda fleet, i: self.node_body(node_body(fleet, i, names[i], labels, kwok_annotation=False,
                                                           gpus=self.node_gpus), i)), 2)
        self._publish_devices(threads)
        self.node_selector = self._planned_node_selector()

    def _use_nodes(self, names: list[str]) -> None:
        self.node_names = list(names)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}

    def node_gpus(self, fleet, i: int) -> dict[str, str]:
        """Node i's GPU resources in its capacity: nvidia.com/gpu, the node's GPU count."""
        return {GPU: str(int(fleet.gpus_of[i]))}

    def _publish_devices(self, threads: int) -> None:
        """Publish what a DRA driver would for the run's nodes (ResourceSlices); none here."""

    def node_body(self, body: dict[str, Any], i: int) -> dict[str, Any]:
        """Fleet node i's Node as created; a backend adds what its device plugins would publish."""
        return body

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
            except Exception as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no ServiceAccount default in namespace {self.ns} after {timeout}s") from err
                self.cluster.revive()
                time.sleep(0.5)
