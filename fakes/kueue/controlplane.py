"""Kueue's manager (tools/kueue/manager/main.go) on a KWOK cluster, and the objects it admits into.

The KWOK cluster (etcd, kube-apiserver, kube-scheduler, kwok) is started by the Kubernetes
family's launcher; this module adds what Kueue needs on top of it: its CRDs (from the same
release as the binary), a Configuration file written from the scenario's `schedulers.kueue`
section, and the kueue-manager process, started as a component of the cluster
(KubeCluster.add_component: own process group, metrics on 127.0.0.1, stopped with it). The queue
objects (ResourceFlavor, Topology, Cohort-sharing ClusterQueues, LocalQueues) are written by
`queue_objects`, one set per run.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from fakes.kube import crds
from fakes.kube.cluster import Component, KubeCluster, default_bin_dir
from fakes.kube.pods import GPU
from fakes.real.procs import LOOPBACK, free_port

KUEUE_VERSION = os.environ.get("KUEUE_VERSION", "v0.19.2")
HOW_TO_BUILD = "run `make kueue-bins` (builds tools/kueue/manager against the sigs.k8s.io/kueue Go module)"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
# The CRDs the core, TAS and pod controllers watch (their informers wait for each); MultiKueue,
# provisioning requests and priority classes belong to controllers left out of the manager.
CRD_FILES = ("kueue.x-k8s.io_admissionchecks.yaml", "kueue.x-k8s.io_clusterqueues.yaml",
             "kueue.x-k8s.io_cohorts.yaml", "kueue.x-k8s.io_localqueues.yaml",
             "kueue.x-k8s.io_resourceflavors.yaml", "kueue.x-k8s.io_topologies.yaml",
             "kueue.x-k8s.io_workloadpriorityclasses.yaml", "kueue.x-k8s.io_workloads.yaml")
LEAF, SPINE, HOST = "gangstorm.io/leaf", "gangstorm.io/spine", "kubernetes.io/hostname"


def crd_dir() -> Path:
    return default_bin_dir().parent / f"kueue-{KUEUE_VERSION}" / "crd"


class KueueMissing(RuntimeError):
    pass


def require_binaries() -> Path:
    """The kueue-manager path; raises with the fix when it or its CRDs are absent."""
    path = default_bin_dir() / "kueue-manager"
    missing = [] if os.access(path, os.X_OK) else [str(path)]
    if not (crd_dir() / CRD_FILES[1]).is_file():
        missing.append(str(crd_dir()))
    if missing:
        raise KueueMissing(f"Kueue {KUEUE_VERSION} is not built ({', '.join(missing)} missing): {HOW_TO_BUILD}")
    return path


def configuration(config: dict[str, Any]) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): only the pod integration, only pods
    that name a queue; every other setting keeps Kueue's default (apis/config/v1beta2/defaults.go),
    waitForPodsReady included."""
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["pod"]},
            "clientConnection": {"qps": float(config.get("api_qps") or 300),
                                 "burst": int(config.get("api_burst") or 500)}}


def quotas(tenants: list[str], total_gpus: int, config: dict[str, Any]) -> dict[str, int]:
    """Each tenant's nominal GPU quota: queues.nominal_gpus where given, else an equal share of the
    fleet's GPUs (rounded down, at least 1). Quotas below the fleet leave room to borrow."""
    given = (config.get("queues") or {}).get("nominal_gpus") or {}
    share = max(1, total_gpus // max(1, len(tenants)))
    return {t: int(given.get(t, share)) for t in tenants}


def queue_objects(label: dict[str, str], ns: str, queues: dict[str, int], config: dict[str, Any],
                  prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(plural, body) of every Kueue object a run needs, in creation order: the Topology (spine,
    leaf, host: TAS places a gang's pods on nodes, preferring one leaf), the ResourceFlavor using
    it, one ClusterQueue per tenant queue with its nominal quota, all in one cohort so a queue may
    borrow what others leave idle, and the LocalQueue in the run's namespace pointing at it."""
    q = config.get("queues") or {}
    cohort = f"{prefix}gangstorm"
    meta = {"labels": dict(label)}
    out: list[tuple[str, dict[str, Any]]] = [
        ("topologies", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Topology",
                        "metadata": {"name": f"{prefix}fleet", **meta},
                        "spec": {"levels": [{"nodeLabel": SPINE}, {"nodeLabel": LEAF}, {"nodeLabel": HOST}]}}),
        ("resourceflavors", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                             "metadata": {"name": f"{prefix}gpu", **meta},
                             # TAS needs a node label; every fleet node (fakes/kube/cluster.py node_body) has this
                             "spec": {"topologyName": f"{prefix}fleet", "nodeLabels": {"kubernetes.io/os": "linux"}}}),
    ]
    limit = q.get("borrowing_limit_gpus")
    for name, gpus in sorted(queues.items()):
        gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
        if limit is not None:
            gpu["borrowingLimit"] = str(int(limit))
        out.append(("clusterqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": f"{prefix}{name}", **meta},
            "spec": {"cohortName": cohort, "namespaceSelector": {},
                     "queueingStrategy": q.get("queueing_strategy", "BestEffortFIFO"),
                     "preemption": {"reclaimWithinCohort": q.get("reclaim_within_cohort", "Any"),
                                    "withinClusterQueue": q.get("within_cluster_queue", "LowerPriority")},
                     # cpu and memory are covered too (a pod's requests must all be), without a limit
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                         "name": f"{prefix}gpu",
                         "resources": [{"name": "cpu", "nominalQuota": "1000000"},
                                       {"name": "memory", "nominalQuota": "1000000Gi"}, gpu]}]}]}}))
        out.append(("localqueues", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
                                    "metadata": {"name": name, "namespace": ns, **meta},
                                    "spec": {"clusterQueue": f"{prefix}{name}"}}))
    return out


ATTEMPT = "kueue_admission_attempt_duration_seconds"


def manager_figures(text: str) -> dict[str, Any]:
    """kueue-manager's /metrics condensed: its scheduling cycles (admission attempts) by result,
    their mean length, and Workloads admitted and evicted."""
    from fakes.kube.metrics import parse, total
    m = parse(text, ("kueue_admission_attempt", "kueue_admitted_workloads_total", "kueue_evicted_workloads_total"))
    count, seconds = total(m.get(f"{ATTEMPT}_count", [])), total(m.get(f"{ATTEMPT}_sum", []))
    by_result = {}
    for labels, v in m.get(f"{ATTEMPT}_count", []):
        by_result[labels.get("result", "")] = by_result.get(labels.get("result", ""), 0) + int(v)
    return {"admission_attempts": int(count), "admission_attempts_by_result": by_result,
            "admission_attempt_ms_mean": round(seconds / count * 1000.0, 4) if count else None,
            "admitted_workloads": int(total(m.get("kueue_admitted_workloads_total", []))),
            "evicted_workloads": int(total(m.get("kueue_evicted_workloads_total", [])))}


def _wait_discovery(api_client, timeout_s: float = 60.0) -> None:
    """Until the apiserver's discovery lists every Kueue kind the manager maps at start."""
    from fakes.kube.cluster import get_text
    want = {f.split("_", 1)[1].removesuffix(".yaml") for f in CRD_FILES}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            served = {r["name"] for r in json.loads(get_text(api_client, f"/apis/{GROUP}/{VERSION}"))["resources"]}
            if want <= served:
                return
        except Exception:
            served = set()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the apiserver does not serve {GROUP}/{VERSION} {sorted(want - served)} "
                               f"after {timeout_s}s")
        time.sleep(0.2)


class KueueControlPlane:
    """kueue-manager against a running KWOK cluster's apiserver."""

    def __init__(self, cluster: KubeCluster, run_dir: Path, config: dict[str, Any]):
        self.cluster = cluster
        self.dir = Path(run_dir) / "kueue"
        self.config = config
        self.proc: Component | None = None
        self.metrics_url = ""

    def start(self, api_client) -> None:
        binary = require_binaries()
        self.dir.mkdir(parents=True, exist_ok=True)
        crds.install(api_client, [crd_dir() / f for f in CRD_FILES])
        _wait_discovery(api_client)
        conf = self.dir / "config.yaml"
        conf.write_text(yaml.safe_dump(configuration(self.config), sort_keys=False))
        port, probe = free_port(), free_port()
        self.metrics_url = f"http://{LOOPBACK}:{port}/metrics"
        argv = [str(binary), f"--config={conf}", f"--metrics-bind-address={LOOPBACK}:{port}",
                f"--health-probe-bind-address={LOOPBACK}:{probe}", "--zap-log-level=info"]
        for attempt in range(2):
            log = self.dir / ("kueue-manager.log" if attempt == 0 else f"kueue-manager.{attempt}.log")
            self.proc = self.cluster.add_component("kueue-manager", argv, log=log,
                                                   env={"KUBECONFIG": str(self.cluster.kubeconfig)})
            try:
                self._wait_metrics()
                self._wait_controllers(api_client)
                return
            except RuntimeError as err:
                # the apiserver established the CRDs but its discovery, which the manager's REST
                # mapper reads once at start, did not list them yet: start it once more
                if attempt or "no matches for kind" not in str(err):
                    raise

    def _wait_metrics(self, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_alive()
            try:
                urllib.request.urlopen(self.metrics_url, timeout=2).read()
                return
            except OSError as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kueue-manager metrics not served after {timeout_s}s (log {self.dir})") from err
                time.sleep(0.3)

    def _wait_controllers(self, api_client, timeout_s: float = 120.0) -> None:
        """Until the manager's controllers run. Its metrics are served at once, but its controllers
        and admission scheduler start only when every informer has synced (2.5 s after the metrics
        on a quiet machine): pods created before then wait, and Workloads created in the same second
        are admitted in any order (measured: the first admission came 3.3 s after the run started,
        and the later of two gangs of one queue went first in 1 of 3 runs). A ClusterQueue that
        reports Active shows the ClusterQueue controller and Kueue's cache running."""
        from kubernetes import client
        custom = client.CustomObjectsApi(api_client)
        name = "gangstorm-readiness-probe"
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gangstorm"}},
                "spec": {"resourceGroups": []}}
        custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", body, _request_timeout=10)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                self.check_alive()
                cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, _request_timeout=10)
                conds = (cq.get("status") or {}).get("conditions") or []
                if any(c.get("type") == "Active" and c.get("status") == "True" for c in conds):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kueue-manager's controllers not running after {timeout_s}s: ClusterQueue "
                                       f"{name} never reported Active (conditions {conds}; log {self.dir})")
                time.sleep(0.2)
        finally:
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, _request_timeout=10)

    def check_alive(self) -> None:
        if self.proc is not None and not self.proc.alive():
            tail = self.proc.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"kueue-manager exited (code {self.proc.proc.returncode}; log {self.proc.log}):\n{tail}")
