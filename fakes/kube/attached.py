"""A Kubernetes cluster gangstorm did not start, reached through a kubeconfig (`--kubeconfig`).

The subset of KubeCluster the Kubernetes-family adapters use, without owning the cluster: stop()
ends only what gangstorm started here (its own kwok controller for run-labelled nodes), etcd is
reached only through `--etcd-endpoint`, and the scheduler's /metrics is not assumed reachable.
Everything the run writes carries the run label; fakes/kube/family/ deletes it at exit.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from fakes.kube.cluster import KWOK_CONFIG, Component, get_text, require_binaries
from fakes.real import procs
from loadgen.model.signals import signals_held
from loadgen.model.target import Existing

# Namespaces whose pods are the platform's, not workloads: they never count as foreign.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "volcano-system", "volcano-monitoring",
                     "local-path-storage", "kwok-system")


class AttachedCluster:
    def __init__(self, existing: Existing, workdir: Path):
        self.existing = existing
        self.workdir = Path(workdir)
        self.kubeconfig = Path(existing.kubeconfig)
        self.etcd_url = existing.etcd_endpoint          # None: quota pressure and cleanup via the apiserver only
        self.scheduler_metrics_url: str | None = None   # the cluster's scheduler is not ours to scrape
        self.url = ""
        self.started_s = 0.0
        self.restarts: list[dict] = []
        self.extra: dict[str, Component] = {}

    def start(self) -> AttachedCluster:
        t0 = time.monotonic()
        client = self.api_client()
        self.url = client.configuration.host
        try:
            ready = get_text(client, "/readyz").strip()
        except Exception as e:
            raise RuntimeError(f"kube-apiserver at {self.url} (from {self.kubeconfig}) is not reachable: "
                               f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
        if ready != "ok":
            raise RuntimeError(f"kube-apiserver at {self.url} is not ready: /readyz said {ready[:200]!r}")
        self.started_s = time.monotonic() - t0
        return self

    def api_client(self, qps_threads: int = 16):
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config
        cfg = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(self.kubeconfig), context=self.existing.context,
                                    client_configuration=cfg)
        cfg.connection_pool_maxsize = max(qps_threads, 4)
        cfg.proxy = None
        return k8s.ApiClient(cfg)

    # --- our own kwok for the nodes this run creates ---------------------------------------------
    def start_kwok(self, selector: str) -> Component:
        """A kwok controller for the nodes matching `selector` (the run label) only, with gangstorm's
        Stages; its server on 127.0.0.1. Stopped with stop()."""
        bins = require_binaries(names=("kwok",))
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self._context_kubeconfig()
        docs = [d for d in yaml.safe_load_all((KWOK_CONFIG / "kwokctl.yaml").read_text())
                if d and d.get("kind") == "KwokConfiguration"]
        docs += [d for d in yaml.safe_load_all((KWOK_CONFIG / "stages.yaml").read_text()) if d]
        config = self.workdir / "kwok-config.yaml"
        config.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        argv = [bins / "kwok", f"--kubeconfig={kubeconfig}", f"--config={config}", "--manage-all-nodes=false",
                f"--manage-nodes-with-label-selector={selector}", "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{procs.free_port()}", "--node-lease-duration-seconds=1200"]
        log = self.workdir / "kwok.log"
        proc = procs.spawn(argv, log=log, cwd=self.workdir)
        procs.stop_at_exit(self.stop)
        self.extra["kwok"] = Component("kwok", proc, log)
        return self.extra["kwok"]

    def _context_kubeconfig(self) -> Path:
        """kwok takes no --context: a copy of the kubeconfig whose current-context is the chosen one."""
        if not self.existing.context:
            return self.kubeconfig
        doc = yaml.safe_load(self.kubeconfig.read_text())
        doc["current-context"] = self.existing.context
        out = self.workdir / "kubeconfig.yaml"
        out.write_text(yaml.safe_dump(doc))
        out.chmod(0o600)
        return out

    # --- what KubeCluster offers that an attached cluster answers differently ---------------------
    def revive(self, attempts: int = 3) -> None:
        self.check_alive()

    def check_alive(self) -> None:
        dead = [c.name for c in self.extra.values() if not c.alive()]
        if dead:
            raise RuntimeError(f"gangstorm's own {', '.join(dead)} exited (log {self.workdir})")

    def pids(self) -> dict[str, int]:
        return {n: c.proc.pid for n, c in self.extra.items()}

    def etcdctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        if not self.etcd_url:
            raise RuntimeError("etcd is not reachable from here: pass --etcd-endpoint")
        bins = require_binaries(names=("etcdctl",))
        return subprocess.run([str(bins / "etcdctl"), f"--endpoints={self.etcd_url}", *args], capture_output=True,
                              text=True, timeout=timeout, start_new_session=True, env={"ETCDCTL_API": "3"})

    def stop(self) -> None:
        """Only what gangstorm started here; the cluster itself keeps running."""
        import atexit
        atexit.unregister(self.stop)
        with signals_held():
            procs.stop_all([c.proc for c in self.extra.values()])


def foreign_pods(api, run_label_value: str) -> list[str]:
    """namespace/name of every pod outside the system namespaces that gangstorm did not create."""
    items = json.loads(api.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=(10, 60)).data)["items"]
    out = []
    for p in items:
        meta = p.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("namespace") in SYSTEM_NAMESPACES or labels.get("app.kubernetes.io/managed-by") == "gangstorm":
            continue
        out.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(out)


def pods_by_node(api) -> dict[str, list[dict[str, Any]]]:
    """Every bound pod's metadata, by node name."""
    items = json.loads(api.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=(10, 60)).data)["items"]
    out: dict[str, list[dict[str, Any]]] = {}
    for p in items:
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            out.setdefault(node, []).append(p.get("metadata") or {})
    return out
