"""Volcano's real control plane (vc-scheduler + vc-controller-manager) on a KWOK cluster.

The KWOK cluster (etcd, kube-apiserver, kwok, optionally kube-scheduler) is started by the
Kubernetes backend's launcher; this module only adds what Volcano needs on top of it: its CRDs
(from the same release as the binaries), a scheduler configuration written from the scenario's
`schedulers.volcano` section, and the two Volcano processes, started as components of the
cluster (KubeCluster.add_component: own process group, bound to 127.0.0.1, stopped with it).
"""
from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from fakes.kube import crds
from fakes.kube.cluster import Component, KubeCluster, default_bin_dir
from fakes.real.procs import LOOPBACK, free_port
from fakes.volcano import incluster

VOLCANO_VERSION = os.environ.get("VOLCANO_VERSION", "v1.14.1")
HOW_TO_BUILD = "run `make volcano-bins` (builds Volcano from the volcano.sh/volcano Go module)"

# Plugins that decide gang and priority order go in the first tier, as Volcano's default config does;
# a job is only handed to the second tier's fair-share and placement plugins after the first agrees.
FIRST_TIER = ("priority", "gang", "conformance")
# Volcano controllers a gang workload needs; jobflow/cronjob/hypernode/sharding are left off.
CONTROLLERS = "job-controller,queue-controller,pg-controller,gc-controller"
# CRDs those controllers and vc-scheduler watch (informers wait for them); cronjobs, colocation
# configurations and node shards belong to controllers/modes left off and cost seconds to install.
CRD_FILES = ("batch.volcano.sh_jobs.yaml", "bus.volcano.sh_commands.yaml", "scheduling.volcano.sh_podgroups.yaml",
             "scheduling.volcano.sh_queues.yaml", "nodeinfo.volcano.sh_numatopologies.yaml",
             "topology.volcano.sh_hypernodes.yaml")


def crd_dir() -> Path:
    return default_bin_dir().parent / f"volcano-{VOLCANO_VERSION}" / "crd"


class VolcanoMissing(RuntimeError):
    pass


def require_binaries() -> dict[str, Path]:
    """Paths of vc-scheduler and vc-controller-manager; raises with the fix when absent."""
    found = {n: default_bin_dir() / n for n in ("vc-scheduler", "vc-controller-manager")}
    missing = [str(p) for p in found.values() if not os.access(p, os.X_OK)]
    if not crd_dir().is_dir():
        missing.append(str(crd_dir()))
    if missing:
        raise VolcanoMissing(f"Volcano {VOLCANO_VERSION} is not built ({', '.join(missing)} missing): {HOW_TO_BUILD}")
    return found


def scheduler_conf(config: dict[str, Any], vgpu: bool = False) -> str:
    """The vc-scheduler configuration file for the scenario's actions and plugins. With `vgpu`
    (node pools that share GPUs by fraction) the deviceshare plugin hands out HAMi vGPUs
    (fakes/volcano/vgpu.py); it is added when the scenario's plugins leave it out, and it needs
    predicates, whose allocate handler writes the chosen GPUs on the pod."""
    actions = list(config.get("actions") or ["enqueue", "allocate", "backfill"])
    plugins = list(config.get("plugins") or ["gang", "priority", "proportion", "drf", "binpack",
                                             "predicates", "nodeorder"])
    if vgpu:
        plugins += [p for p in ("predicates", "deviceshare") if p not in plugins]
    first = [p for p in plugins if p in FIRST_TIER]
    second = [p for p in plugins if p not in FIRST_TIER]
    tiers = [{"plugins": [_plugin(p, config, vgpu) for p in t]} for t in (first, second) if t]
    return yaml.safe_dump({"actions": ", ".join(actions), "tiers": tiers}, sort_keys=False)


def gpu_policy(config: dict[str, Any]) -> str:
    """deviceshare's device-level node score: "binpack" (prefer the node whose chosen GPU is
    fullest afterwards), "spread" (prefer a GPU shared by one pod so far) or "" (no score)."""
    policy = str(config.get("vgpu_policy", "binpack") or "")
    if policy not in ("binpack", "spread", ""):
        raise ValueError(f"schedulers.volcano.vgpu_policy: expected binpack, spread or \"\"; got {policy!r}")
    return policy


def _plugin(name: str, config: dict[str, Any], vgpu: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name}
    if name == "binpack":
        # Pack by GPU: the scarce resource; the default weights only count cpu and memory. On vGPU
        # nodes the GPU is counted by its cores (percent of a GPU), as the milli share is.
        weight = int(config.get("gpu_weight", 3) or 3)
        res = ["nvidia.com/gpu"] + (["volcano.sh/vgpu-cores"] if vgpu else [])
        p["arguments"] = {"binpack.weight": 10, "binpack.resources": ",".join(res),
                          **{f"binpack.resources.{r}": weight for r in res}}
    if name == "deviceshare":
        policy = gpu_policy(config)
        weight = int(config.get("vgpu_weight", 10) or 10)
        p["arguments"] = {"deviceshare.VGPUEnable": True,
                          **({"deviceshare.SchedulePolicy": policy, "deviceshare.ScheduleWeight": weight}
                             if policy else {})}
    return p


def install_crds(api_client, timeout_s: float = 60.0) -> None:
    """Create Volcano's CRDs and wait until the apiserver serves them."""
    crds.install(api_client, [crd_dir() / name for name in CRD_FILES], timeout_s)


class VolcanoControlPlane:
    """vc-scheduler and vc-controller-manager against a running KWOK cluster's apiserver."""

    def __init__(self, cluster: KubeCluster, run_dir: Path, config: dict[str, Any], vgpu: bool = False):
        self.cluster = cluster
        self.dir = Path(run_dir) / "volcano"
        self.config = config
        self.vgpu = vgpu
        self.procs: list[Component] = []
        self.metrics_url = ""
        self.controller_metrics_url = ""

    def start(self, api_client) -> None:
        bins = require_binaries()
        self.dir.mkdir(parents=True, exist_ok=True)
        install_crds(api_client)
        conf = self.dir / "scheduler.conf"
        conf.write_text(scheduler_conf(self.config, self.vgpu))
        period = float(self.config.get("schedule_period_s", 1) or 1)
        metrics_port = free_port()
        self.metrics_url = f"http://{LOOPBACK}:{metrics_port}/metrics"
        common = [f"--kubeconfig={self.cluster.kubeconfig}", "--leader-elect=false", "--logtostderr=true"]
        # Each component's own client limits, as the simulated Volcano uses them (scheduler: binds;
        # job controller: PodGroups, pods and job status).
        sched = [bins["vc-scheduler"], *common, f"-v={int(self.config.get('log_verbosity', 1))}",
                 *_client(self.config, "api_qps", "api_burst", 2000, 2000),
                 f"--scheduler-conf={conf}", f"--schedule-period={period}s",
                 "--enable-metrics=true", f"--listen-address={LOOPBACK}:{metrics_port}",
                 "--enable-healthz=true", f"--healthz-address={LOOPBACK}:{free_port()}",
                 "--cache-dumper=false"]
        cm_port = free_port()
        self.controller_metrics_url = f"http://{LOOPBACK}:{cm_port}/metrics"
        workers = self.config.get("controller_workers")    # None: Volcano's default (3)
        cm = [bins["vc-controller-manager"], *common, "-v=1", f"--controllers={CONTROLLERS}",
              *_client(self.config, "controller_qps", "controller_burst", 50, 100),
              *([f"--worker-threads={int(workers)}"] if workers else []),
              "--enable-metrics=true", f"--listen-address={LOOPBACK}:{cm_port}",
              "--enable-healthz=true", f"--healthz-address={LOOPBACK}:{free_port()}"]
        env: dict[str, str] = {}
        if self.vgpu:      # deviceshare's client is in-cluster only (fakes/volcano/incluster.py)
            mount = incluster.write_mount(self.dir / "serviceaccount", incluster.service_account_token(api_client),
                                          incluster.cluster_ca(self.cluster.kubeconfig))
            sched, env = incluster.in_pod(sched, mount), incluster.service_env(self.cluster.url)
        self.procs.append(self.cluster.add_component("vc-controller-manager", cm,
                                                     log=self.dir / "vc-controller-manager.log"))
        self.procs.append(self.cluster.add_component("vc-scheduler", sched, env=env, log=self.dir / "vc-scheduler.log"))
        self._wait_metrics()

    def _wait_metrics(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for p in self.procs:
                if not p.alive():
                    tail = p.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{p.name} exited at start (log {p.log}):\n{tail}")
            try:
                urllib.request.urlopen(self.metrics_url, timeout=2).read()
                return
            except OSError as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"vc-scheduler metrics not served after {timeout_s}s (log {self.dir})") from err
                time.sleep(0.3)

    def check_alive(self) -> None:
        for p in self.procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} died (exit {p.proc.returncode}); log {p.log}")


def _client(config: dict[str, Any], qps: str, burst: str, qps_default: float, burst_default: int) -> list[str]:
    return [f"--kube-api-qps={float(config.get(qps) or qps_default):g}",
            f"--kube-api-burst={int(config.get(burst) or burst_default)}"]
