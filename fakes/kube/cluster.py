"""Launch a real Kubernetes control plane on KWOK fake nodes, all on 127.0.0.1.

`kwokctl create cluster --runtime binary` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler (optional) and the kwok controller from binaries built by `make k8s-bins`
(Go modules, no release downloads). Each of those runs in its own session (kwokctl forks them
with setsid); this module records their pids and stops every process group on stop(), on
interpreter exit and on failure, all through fakes/real/procs.py. Extra components (Volcano's
scheduler/controllers, ...) are started with add_component() and stopped the same way.

    spec = ClusterSpec(name="gs", workdir=run_dir / "kube", scheduler=True)
    with KubeCluster(spec) as cluster:
        cluster.url, cluster.kubeconfig, cluster.etcd_url
        cluster.add_component("vc-scheduler", [bin_dir / "vc-scheduler", "--kubeconfig", ...])
        cluster.create_nodes(fleet)          # KWOK nodes, concurrent client
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fakes.real import procfs, procs
from loadgen.model.signals import signals_held

REPO = Path(__file__).resolve().parents[2]
KWOK_CONFIG = REPO / "kwok-config"
BINARIES = ("kwok", "kwokctl", "etcd", "etcdctl", "kube-apiserver", "kube-scheduler",
            "kube-controller-manager")
# Process names tests check for leftovers (kwokctl forks the controller as "kwok").
COMPONENT_NAMES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok",
                   "kwok-controller")


KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def default_bin_dir() -> Path:
    return Path(os.environ.get("GANGSTORM_BIN_DIR", Path.home() / ".cache/gangstorm/bin"))


class BinariesMissing(RuntimeError):
    pass


def require_binaries(bin_dir: Path | None = None, names: Iterable[str] = BINARIES) -> Path:
    bin_dir = Path(bin_dir or default_bin_dir())
    missing = [n for n in names if not os.access(bin_dir / n, os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"missing {', '.join(missing)} in {bin_dir}: run `make k8s-bins` "
            "(builds kwok, etcd and Kubernetes from Go modules into $GANGSTORM_BIN_DIR)")
    return bin_dir


@dataclass
class Component:
    """A process started next to the cluster (own session, stopped with the cluster)."""
    name: str
    proc: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class ClusterSpec:
    name: str
    workdir: Path                                  # kwokctl state, logs, generated configs
    bin_dir: Path | None = None
    scheduler: bool = True                         # start kube-scheduler (Volcano sets False)
    scheduler_config: dict[str, Any] | None = None  # KubeSchedulerConfiguration (kubeconfig filled in)
    scheduler_binary: Path | None = None           # another kube-scheduler build (scheduler-plugins)
    controller_manager: bool = True
    etcd_quota_bytes: int = 2 * 1024**3
    apiserver_args: dict[str, str] = field(default_factory=dict)   # extra --key=value
    scheduler_args: dict[str, str] = field(default_factory=dict)
    controller_manager_args: dict[str, str] = field(default_factory=dict)
    etcd_args: dict[str, str] = field(default_factory=dict)       # e.g. {"unsafe-no-fsync": "true"}
    feature_gates: str = ""                        # "Gate=true,...": apiserver, scheduler, controller-manager
    runtime_config: str = ""                       # apiserver --runtime-config (alpha API groups)
    stages: Path | None = None                     # Stage documents; default kwok-config/stages.yaml
    extra_configs: list[Path] = field(default_factory=list)  # more kwokctl --config documents
    start_timeout_s: float = 180.0


# Flags whose value is a comma-separated list: two sources of ClusterSpec fields add to each other.
LIST_FLAGS = ("feature_gates", "runtime_config", "controllers")


def merge_cluster_options(*parts: dict[str, Any]) -> dict[str, Any]:
    """ClusterSpec fields from several sources (a gang variant's gates, GPU sharing's DRA gates and
    resourceclaim-controller): list flags are joined, extra-args dicts merged key by key; any other
    field two sources set differently is a programming error."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key not in out or out[key] == value:
                out[key] = value
            elif key in LIST_FLAGS:
                out[key] = f"{out[key]},{value}"
            elif isinstance(value, dict):
                out[key] = merge_cluster_options(out[key], value)
            else:
                raise ValueError(f"cluster option {key}: {out[key]!r} and {value!r}")
    return out


class KubeCluster:
    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.bin_dir = require_binaries(spec.bin_dir)
        self.workdir = Path(spec.workdir).resolve()
        self.kwok_workdir = self.workdir / "kwok"
        self.ports = {k: procs.free_port() for k in ("apiserver", "etcd", "etcd_peer", "scheduler",
                                                     "controller_manager", "kwok")}
        self.url = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
        self.scheduler_metrics_url = f"https://127.0.0.1:{self.ports['scheduler']}/metrics"
        self.kubeconfig: Path | None = None
        self.extra: dict[str, Component] = {}
        self.started_s: float | None = None   # seconds kwokctl create took
        self._pids: dict[str, int] = {}
        self.restarts: list[dict] = []
        self._stopped = True

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> KubeCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def cluster_dir(self) -> Path:
        return self.kwok_workdir / "clusters" / self.spec.name

    def kwokctl(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, KWOK_WORKDIR=str(self.kwok_workdir))
        # no_proxy: certificates and health checks must never leave 127.0.0.1
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return subprocess.run([str(self.bin_dir / "kwokctl"), "--name", self.spec.name, *args],
                              env=env, capture_output=True, text=True, timeout=timeout,
                              check=check, start_new_session=True)

    def start(self) -> KubeCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        stages = self.spec.stages or KWOK_CONFIG / "stages.yaml"
        args = ["create", "cluster", "--config", str(config), "--config", str(stages),
                "--kubeconfig", ""]
        for extra in self.spec.extra_configs:
            args += ["--config", str(extra)]
        self._stopped = False
        procs.stop_at_exit(self.stop)
        t0 = time.monotonic()
        try:
            out = self.kwokctl(*args, timeout=self.spec.start_timeout_s, check=False)
            (self.workdir / "kwokctl-create.log").write_text(out.stdout + out.stderr)
            self._read_pids()
            if out.returncode != 0:
                raise RuntimeError(f"kwokctl create cluster failed ({out.returncode}); "
                                   f"see {self.workdir / 'kwokctl-create.log'}:\n{out.stderr[-2000:]}")
            self.kubeconfig = self.cluster_dir / "kubeconfig.yaml"
            self._wait_ready(t0)
            time.sleep(1.0)
            self.revive()
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0
        return self

    def _write_config(self) -> Path:
        docs = list(yaml.safe_load_all((KWOK_CONFIG / "kwokctl.yaml").read_text()))
        kwokctl = next(d for d in docs if d["kind"] == "KwokctlConfiguration")
        s, b, p = self.spec, self.bin_dir, self.ports
        opts = kwokctl.setdefault("options", {})
        opts.update({
            "kubeApiserverBinary": str(b / "kube-apiserver"),
            "kubeControllerManagerBinary": str(b / "kube-controller-manager"),
            "kubeSchedulerBinary": str(s.scheduler_binary or b / "kube-scheduler"),
            "kwokControllerBinary": str(b / "kwok"),
            "etcdBinary": str(b / "etcd"),
            "etcdctlBinary": str(b / "etcdctl"),
            "kubeApiserverPort": p["apiserver"], "etcdPort": p["etcd"], "etcdPeerPort": p["etcd_peer"],
            "kubeSchedulerPort": p["scheduler"], "kubeControllerManagerPort": p["controller_manager"],
            "kwokControllerPort": p["kwok"],
            "etcdQuotaBackendSize": str(int(s.etcd_quota_bytes)),
            "disableKubeScheduler": not s.scheduler,
            "disableKubeControllerManager": not s.controller_manager,
            "cacheDir": str(self.workdir / "cache"),
        })
        if s.feature_gates:
            opts["kubeFeatureGates"] = s.feature_gates
        if s.runtime_config:
            opts["kubeRuntimeConfig"] = s.runtime_config
        if s.scheduler and s.scheduler_config:
            path = self.workdir / "scheduler-config.yaml"
            path.write_text(yaml.safe_dump(s.scheduler_config, sort_keys=False))
            opts["kubeSchedulerConfig"] = str(path)
        patches = {c["name"]: c for c in kwokctl.setdefault("componentsPatches", [])}
        for comp, extra in (("kube-apiserver", s.apiserver_args), ("kube-scheduler", s.scheduler_args),
                            ("kube-controller-manager", s.controller_manager_args), ("etcd", s.etcd_args)):
            if extra:
                patch = patches.setdefault(comp, {"name": comp})
                patch.setdefault("extraArgs", []).extend(
                    {"key": k, "value": str(v)} for k, v in extra.items())
        kwokctl["componentsPatches"] = list(patches.values())
        out = self.workdir / "kwokctl-config.yaml"
        out.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        return out

    def _read_pids(self) -> None:
        pid_dir = self.cluster_dir / "pids"
        if pid_dir.is_dir():
            for f in pid_dir.glob("*.pid"):
                try:
                    self._pids[f.stem] = int(f.read_text().strip())
                except ValueError:
                    pass

    def _wait_ready(self, t0: float) -> None:
        client = self.api_client()
        deadline = t0 + self.spec.start_timeout_s
        while True:
            try:
                if get_text(client, "/readyz").strip() == "ok":
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"kube-apiserver at {self.url} not ready after {self.spec.start_timeout_s}s")
            time.sleep(0.5)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        with signals_held():
            procs.stop_all([c.proc for c in self.extra.values()])
            self._read_pids()
            logs = self.cluster_dir / "logs"
            if logs.is_dir():      # kwokctl delete removes the cluster dir; keep the logs in the run
                shutil.copytree(logs, self.workdir / "logs", dirs_exist_ok=True)
            try:
                self.kwokctl("delete", "cluster", timeout=60, check=False)
            except Exception:
                pass
            for pid in self._pids.values():     # whatever kwokctl left behind
                procs.stop(pid)

    # -- hooks ----------------------------------------------------------------------------------
    def add_component(self, name: str, argv: list[str], env: dict[str, str] | None = None,
                      log: Path | None = None) -> Component:
        """Start one more process against this cluster; stopped (by process group) in stop()."""
        log = log or self.workdir / f"{name}.log"
        proc = procs.spawn(argv, log=log, env={**os.environ, **(env or {})}, cwd=self.workdir)
        self.extra[name] = Component(name, proc, log)
        return self.extra[name]

    def dead(self) -> list[str]:
        """Components that were started and are no longer running."""
        return [n for n, p in self.pids().items() if not procs.alive(p)]

    def revive(self, attempts: int = 3) -> None:
        """Restart components that exited (kwokctl start only forks the dead ones). On a loaded
        machine kwok or the controller-manager can give up waiting for the apiserver at start-up;
        each restart is recorded in self.restarts so a report can show it."""
        for _ in range(attempts):
            dead = self.dead()
            if not dead:
                return
            self.restarts.append({"components": dead, "at_s": round(time.monotonic(), 1)})
            self.kwokctl("start", "cluster", timeout=120, check=False)
            self._read_pids()
            time.sleep(2.0)
        self.check_alive()

    def check_alive(self) -> None:
        dead = self.dead()
        if dead:
            tails = []
            for n in dead:
                log = self.cluster_dir / "logs" / f"{n}.log"
                if log.exists():
                    tails.append(f"--- {n}: " + log.read_text(errors="replace")[-600:])
            raise RuntimeError(f"cluster component(s) exited: {', '.join(dead)}\n" + "\n".join(tails))

    def pids(self) -> dict[str, int]:
        self._read_pids()
        return {**self._pids, **{n: c.proc.pid for n, c in self.extra.items()}}

    def api_client(self, qps_threads: int = 16):
        """A kubernetes.client.ApiClient on the admin kubeconfig (client certs)."""
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config
        cfg = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = max(qps_threads, 4)
        cfg.proxy = None
        return k8s.ApiClient(cfg)

    def etcdctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin_dir / "etcdctl"), f"--endpoints={self.etcd_url}", *args],
                              capture_output=True, text=True, timeout=timeout,
                              start_new_session=True, env={**os.environ, "ETCDCTL_API": "3"})

    def create_nodes(self, fleet, threads: int = 16, first: int = 0, count: int | None = None,
                     body=None) -> float:
        """Register fleet nodes first..first+count as KWOK nodes (body(fleet, i), default
        node_body); returns seconds taken."""
        return create_nodes(self.api_client(threads), fleet, threads, first, count, body)

    # -- detached (gangstorm cluster up) --------------------------------------------------------
    def detach(self) -> dict[str, Any]:
        """Leave the cluster running past this process (its components are kwokctl's daemons and
        our own sessions) and return what cluster_down() needs in another process."""
        atexit.unregister(self.stop)
        self._stopped = True
        return {"kwok_workdir": str(self.kwok_workdir), "cluster_name": self.spec.name,
                "bin_dir": str(self.bin_dir), "pids": self.pids(), "kubeconfig": str(self.kubeconfig),
                "etcd_url": self.etcd_url, "scheduler_metrics_url": self.scheduler_metrics_url}


def cluster_down(state: dict[str, Any]) -> list[str]:
    """Stop a detached cluster (KubeCluster.detach's state) from any process: kwokctl delete, then
    every recorded process group; returns the processes still alive afterwards."""
    env = dict(os.environ, KWOK_WORKDIR=state["kwok_workdir"], NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost")
    with signals_held():
        try:
            subprocess.run([str(Path(state["bin_dir"]) / "kwokctl"), "--name", state["cluster_name"], "delete",
                            "cluster"], env=env, capture_output=True, timeout=60, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for pid in state.get("pids", {}).values():
            procs.stop(int(pid))
    return [f"{n} (pid {p})" for n, p in state.get("pids", {}).items() if procs.alive(int(p))]


def cluster_status(state: dict[str, Any]) -> dict[str, Any]:
    comps = {n: "running" if procs.alive(int(p)) else "exited" for n, p in state.get("pids", {}).items()}
    return {"up": bool(comps) and all(v == "running" for v in comps.values()), "components": comps}


def create_nodes(api_client, fleet, threads: int = 16, first: int = 0, count: int | None = None,
                 body=None) -> float:
    """Register fleet nodes first..first+count through api_client (body(fleet, i), default
    node_body); returns seconds taken."""
    body = body or node_body
    from kubernetes import client as k8s
    count = fleet.nodes - first if count is None else count
    api = k8s.CoreV1Api(api_client)
    t0 = time.monotonic()

    def one(i: int) -> None:
        for attempt in range(5):
            try:
                api.create_node(body(fleet, i), _request_timeout=60)
                return
            except k8s.ApiException as e:
                if e.status == 409:
                    return
                if e.status not in (429, 500, 503, 504) or attempt == 4:
                    raise
            time.sleep(0.5 * (attempt + 1))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(first, first + count)))
    return time.monotonic() - t0


def ready_nodes(api, names: set[str] | None = None) -> int:
    """How many nodes (of `names`, default all) report Ready (one list from the apiserver's cache)."""
    items = json.loads(api.list_node(_preload_content=False, resource_version="0").data)["items"]
    return sum(1 for n in items for c in n.get("status", {}).get("conditions", [])
               if c["type"] == "Ready" and c["status"] == "True"
               and (names is None or n["metadata"]["name"] in names))


def node_body(fleet, i: int, name: str | None = None, labels: dict[str, str] | None = None,
              kwok_annotation: bool = True, gpus=None) -> dict:
    """Fleet node i as a fake Node; `gpus(fleet, i)` says what GPU resources its capacity lists
    (default: nvidia.com/gpu, the fleet's count). The kwokctl clusters' own kwok manages nodes annotated
    kwok.x-k8s.io/node=fake; a run on an existing cluster leaves the annotation off and runs its
    own kwok for its run-labelled nodes (fakes/kube/attached.py), so the two never share a node."""
    cap = {"cpu": str(fleet.cpus_per_node), "memory": f"{fleet.memory_gib_per_node}Gi",
           **(gpus(fleet, i) if gpus else {"nvidia.com/gpu": str(int(fleet.gpus_of[i]))}), "pods": "110"}
    name = name or fleet.node_name(i)
    ann = {"node.alpha.kubernetes.io/ttl": "0", **({KWOK_NODE_ANNOTATION: "fake"} if kwok_annotation else {})}
    base = {"type": "kwok"} if kwok_annotation else {}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": ann,
                     "labels": {**base, "kubernetes.io/hostname": name,
                                "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                **fleet.node_labels(i), **(labels or {})}},
        "spec": {"taints": []},
        "status": {"capacity": cap, "allocatable": cap},
    }


def get_text(api_client, path: str, timeout: float = 10) -> str:
    """GET a non-resource path (/readyz, /metrics) through an ApiClient (its certs, no proxy)."""
    resp = api_client.rest_client.pool_manager.request(
        "GET", api_client.configuration.host + path, timeout=timeout, retries=False)
    if resp.status != 200:
        raise RuntimeError(f"GET {path}: HTTP {resp.status}")
    return resp.data.decode()


def leftover_processes(names: Iterable[str] = COMPONENT_NAMES, under: Path | None = None) -> list[str]:
    """Cluster processes still running (optionally only those whose command line mentions
    `under`): what tests assert is empty after a cluster stopped."""
    return procfs.leftover_processes(names, under)
