"""Volcano's real control plane (vc-scheduler + vc-controller-manager) on a KWOK cluster.

The KWOK cluster (etcd, kube-apiserver, kwok, optionally kube-scheduler) is started by the
Kubernetes backend's launcher; this module only adds what Volcano needs on top of it: its CRDs
(from the same release as the binaries), a scheduler configuration written from the scenario's
`schedulers.volcano` section, and the two Volcano processes, each in its own process group,
bound to 127.0.0.1 and stopped with SIGTERM then SIGKILL of the group.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from fakes.kube import metrics as kube_metrics

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


def bin_dir() -> Path:
    return Path(os.environ.get("GANGSTORM_BIN_DIR", Path.home() / ".cache/gangstorm/bin"))


def crd_dir() -> Path:
    return bin_dir().parent / f"volcano-{VOLCANO_VERSION}" / "crd"


class VolcanoMissing(RuntimeError):
    pass


def require_binaries() -> dict[str, Path]:
    """Paths of vc-scheduler and vc-controller-manager; raises with the fix when absent."""
    found = {n: bin_dir() / n for n in ("vc-scheduler", "vc-controller-manager")}
    missing = [str(p) for p in found.values() if not os.access(p, os.X_OK)]
    if not crd_dir().is_dir():
        missing.append(str(crd_dir()))
    if missing:
        raise VolcanoMissing(f"Volcano {VOLCANO_VERSION} is not built ({', '.join(missing)} missing): {HOW_TO_BUILD}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scheduler_conf(config: dict[str, Any]) -> str:
    """The vc-scheduler configuration file for the scenario's actions and plugins."""
    actions = list(config.get("actions") or ["enqueue", "allocate", "backfill"])
    plugins = list(config.get("plugins") or ["gang", "priority", "proportion", "drf", "binpack",
                                             "predicates", "nodeorder"])
    first = [p for p in plugins if p in FIRST_TIER]
    second = [p for p in plugins if p not in FIRST_TIER]
    tiers = [{"plugins": [_plugin(p, config) for p in t]} for t in (first, second) if t]
    return yaml.safe_dump({"actions": ", ".join(actions), "tiers": tiers}, sort_keys=False)


def _plugin(name: str, config: dict[str, Any]) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name}
    if name == "binpack":
        # Pack by GPU: the scarce resource; the default weights only count cpu and memory.
        p["arguments"] = {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu",
                          "binpack.resources.nvidia.com/gpu": int(config.get("gpu_weight", 3) or 3)}
    return p


def crd_manifests() -> list[dict[str, Any]]:
    docs = []
    for f in (crd_dir() / name for name in CRD_FILES):
        docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    return docs


def install_crds(api_client, timeout_s: float = 60.0) -> None:
    """Create Volcano's CRDs and wait until the apiserver serves them."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for doc in crd_manifests():
        names.append(doc["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(doc, _preload_content=False)
        except ApiException as e:
            if e.status != 409:
                raise
        except ValueError:
            pass  # python client chokes on a null status in the response; the object was created
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending:
        for n in list(pending):
            crd = ext.read_custom_resource_definition(n, _preload_content=False)
            import json
            status = json.loads(crd.data).get("status") or {}
            if any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or []):
                pending.discard(n)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"Volcano CRDs not established after {timeout_s}s: {sorted(pending)}")
        if pending:
            time.sleep(0.2)


class Proc:
    """One child process in its own process group, logs to a file."""

    def __init__(self, name: str, argv: list[str], log: Path):
        self.name, self.argv, self.log = name, argv, log
        self.p: subprocess.Popen | None = None
        self.owned = True

    def start(self) -> "Proc":
        fh = open(self.log, "ab")
        try:
            self.p = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            fh.close()
        return self

    def alive(self) -> bool:
        return self.p is not None and self.p.poll() is None

    def stop(self, grace_s: float = 5.0) -> None:
        if self.p is None or not self.owned:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            if self.p.poll() is not None:
                break
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        # The group may outlive its leader (children); make sure nothing of it is left.
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class VolcanoControlPlane:
    """vc-scheduler and vc-controller-manager against an apiserver given by a kubeconfig."""

    def __init__(self, kubeconfig: Path, run_dir: Path, config: dict[str, Any]):
        self.kubeconfig = Path(kubeconfig)
        self.dir = Path(run_dir) / "volcano"
        self.config = config
        self.procs: list[Proc] = []
        self.metrics_port = 0
        self.cm_metrics_port = 0

    def start(self, api_client, spawn=None) -> None:
        """spawn(name, argv, log=path) -> Popen starts a process in its own session and owns its
        shutdown (KubeCluster.add_component); without it this object starts and stops them."""
        bins = require_binaries()
        self.dir.mkdir(parents=True, exist_ok=True)
        install_crds(api_client)
        conf = self.dir / "scheduler.conf"
        conf.write_text(scheduler_conf(self.config))
        qps = str(self.config.get("api_qps", 2000))
        burst = str(self.config.get("api_burst", 2000))
        period = float(self.config.get("schedule_period_s", 1) or 1)
        self.metrics_port, self.cm_metrics_port = free_port(), free_port()
        common = [f"--kubeconfig={self.kubeconfig}", f"--kube-api-qps={qps}", f"--kube-api-burst={burst}",
                  "--leader-elect=false", "--logtostderr=true", "-v=1"]
        sched = [str(bins["vc-scheduler"]), *common,
                 f"--scheduler-conf={conf}", f"--schedule-period={period}s",
                 "--enable-metrics=true", f"--listen-address=127.0.0.1:{self.metrics_port}",
                 "--enable-healthz=true", f"--healthz-address=127.0.0.1:{free_port()}",
                 "--cache-dumper=false"]
        workers = self.config.get("controller_workers")    # None: Volcano's default (3)
        cm = [str(bins["vc-controller-manager"]), *common, f"--controllers={CONTROLLERS}",
              *([f"--worker-threads={int(workers)}"] if workers else []),
              "--enable-metrics=true", f"--listen-address=127.0.0.1:{self.cm_metrics_port}",
              "--enable-healthz=true", f"--healthz-address=127.0.0.1:{free_port()}"]
        try:
            for name, argv in (("vc-controller-manager", cm), ("vc-scheduler", sched)):
                proc = Proc(name, argv, self.dir / f"{name}.log")
                if spawn is None:
                    proc.start()
                else:
                    proc.p, proc.owned = spawn(name, argv, log=proc.log), False
                self.procs.append(proc)
            self._wait_metrics()
        except BaseException:
            self.stop()
            raise

    def _wait_metrics(self, timeout_s: float = 60.0) -> None:
        import urllib.request
        deadline = time.monotonic() + timeout_s
        while True:
            for p in self.procs:
                if not p.alive():
                    tail = p.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{p.name} exited at start (log {p.log}):\n{tail}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).read()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"vc-scheduler metrics not served after {timeout_s}s (log {self.dir})")
                time.sleep(0.3)

    def metrics_text(self) -> str:
        import urllib.request
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        except OSError:
            return ""

    def check_alive(self) -> None:
        for p in self.procs:
            if p.p is not None and not p.alive():
                raise RuntimeError(f"{p.name} died (exit {p.p.returncode}); log {p.log}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()


# --- metrics ----------------------------------------------------------------------------------
def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) for every sample, parsed by the kube backend's scraper."""
    return [(name, labels, value) for name, rows in kube_metrics.parse(text, ("",)).items()
            for labels, value in rows]


def histogram(samples, name: str, **match: str) -> dict[str, float]:
    """count, mean, p50, p99 (bucket upper bounds) of one Prometheus histogram, labels summed."""
    buckets: dict[float, float] = defaultdict(float)
    total = count = 0.0
    for n, labels, v in samples:
        if any(labels.get(k) != want for k, want in match.items()):
            continue
        if n == name + "_bucket":
            buckets[float(labels["le"])] += v
        elif n == name + "_sum":
            total += v
        elif n == name + "_count":
            count += v
    if not count:
        return {"count": 0}
    les = sorted(buckets)

    def q(p: float) -> float | str:
        for le in les:
            if buckets[le] >= p * count and le != float("inf"):
                return round(le, 3)
        finite = [le for le in les if le != float("inf")]
        return f">{finite[-1]:g}" if finite else "+Inf"   # JSON has no Infinity
    return {"count": int(count), "mean": round(total / count, 3), "p50_le": q(0.5), "p99_le": q(0.99)}


def scheduler_figures(text: str) -> dict[str, Any]:
    """vc-scheduler figures: session (e2e) latency, per-action latency, attempts, preemption."""
    samples = parse_prometheus(text)
    if not samples:
        return {}
    fig: dict[str, Any] = {
        "session_ms": histogram(samples, "volcano_e2e_scheduling_latency_milliseconds"),
        "open_session_ms": histogram(samples, "volcano_open_session_duration_milliseconds"),
        "job_scheduling_ms": histogram(samples, "volcano_e2e_job_scheduling_latency_milliseconds"),
    }
    actions = sorted({lb.get("action") for n, lb, _ in samples
                      if n.startswith("volcano_action_scheduling_latency") and lb.get("action")})
    fig["action_ms"] = {a: histogram(samples, "volcano_action_scheduling_latency_milliseconds", action=a)
                        for a in actions}
    attempts: dict[str, float] = defaultdict(float)
    for n, lb, v in samples:
        if n == "volcano_schedule_attempts_total":
            attempts[lb.get("result", "")] += v
        elif n == "volcano_total_preemption_attempts":
            fig["preemption_attempts"] = v
        elif n == "volcano_pod_preemption_victims":
            fig["preemption_victims"] = v
    fig["schedule_attempts"] = dict(attempts)
    return fig


def quantiles(values) -> dict[str, float]:
    import numpy as np
    if len(values) == 0:
        return {"n": 0}
    a = np.asarray(values, dtype=float)
    return {"n": int(a.size), "p50": round(float(np.quantile(a, 0.5)), 3),
            "p99": round(float(np.quantile(a, 0.99)), 3), "max": round(float(a.max()), 3)}
