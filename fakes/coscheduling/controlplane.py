"""scheduler-plugins as it is deployed for coscheduling (built by `make sp-bins`): its scheduler,
its controller and their CRDs.

sp-scheduler is kube-scheduler's own command with the out-of-tree plugins registered, so kwokctl
starts it in kube-scheduler's place (ClusterSpec.scheduler_binary) with the same flags and a
KubeSchedulerConfiguration that turns the Coscheduling plugin on at every extension point and makes
it the queue sort, as the release's manifests/coscheduling/scheduler-config.yaml does.

sp-controller keeps each PodGroup's status (phase, scheduled and running counts) from its pods. It
is not optional: pods the plugin rejected (Permit timeout, PostFilter) wait among the unschedulable
pods until a Pod add or a PodGroup add/update (Coscheduling's EventsToRegister), so without the
controller's status updates a gang that was rejected once waits for kube-scheduler's 5-minute flush
(podMaxInUnschedulablePodsDuration), however many nodes come free meanwhile. It runs with its own
defaults (--qps 5 --burst 10 --workers 1, cmd/controller/app/options.go) and needs the ElasticQuota
CRD as well (it starts that reconciler too).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fakes.kube import crds
from fakes.kube.cluster import default_bin_dir
from fakes.real.procs import LOOPBACK, free_port

SP_VERSION = os.environ.get("SCHEDULER_PLUGINS_VERSION", "v0.34.7")
BINARY, CONTROLLER = "sp-scheduler", "sp-controller"
CRD_FILES = ("scheduling.x-k8s.io_podgroups.yaml", "scheduling.x-k8s.io_elasticquotas.yaml")
HOW_TO_BUILD = ("run `make sp-bins` (tools/scheduler-plugins/build.sh builds sigs.k8s.io/scheduler-plugins "
                f"{SP_VERSION} from its Go module into $GANGSTORM_BIN_DIR)")


class SchedulerPluginsMissing(RuntimeError):
    pass


def crd_paths() -> list[Path]:
    return [default_bin_dir().parent / f"scheduler-plugins-{SP_VERSION}" / "crd" / f for f in CRD_FILES]


def require_binaries() -> dict[str, Path]:
    """sp-scheduler's and sp-controller's paths; raises with the fix when one of them or a CRD is absent."""
    found = {n: default_bin_dir() / n for n in (BINARY, CONTROLLER)}
    missing = [str(p) for p in found.values() if not os.access(p, os.X_OK)]
    missing += [str(p) for p in crd_paths() if not p.is_file()]
    if missing:
        raise SchedulerPluginsMissing(f"scheduler-plugins {SP_VERSION} is not built ({', '.join(missing)} missing): "
                                      f"{HOW_TO_BUILD}")
    return found


def start_controller(cluster, run_dir: Path):
    """sp-controller against the cluster (a component: own process group, stopped with it)."""
    argv = [str(require_binaries()[CONTROLLER]), f"--metricsAddr={LOOPBACK}:{free_port()}",
            f"--probeAddr={LOOPBACK}:{free_port()}"]
    return cluster.add_component(CONTROLLER, argv, env={"KUBECONFIG": str(cluster.kubeconfig)},
                                 log=Path(run_dir) / "kube" / f"{CONTROLLER}.log")


def permit_wait_s(config: dict[str, Any], time_scale: float | None) -> int:
    """The scenario's permit timeout in the run's wall time (the plugin counts whole seconds)."""
    scale = max(float(time_scale or 1.0), 1e-9)
    return max(1, round(float(config.get("permit_timeout_s", 60)) / scale))


def with_coscheduling(conf: dict[str, Any], permit_wait_s: int) -> dict[str, Any]:
    """A KubeSchedulerConfiguration (fakes/kube/target.scheduler_config) with Coscheduling on."""
    profile = conf["profiles"][0]
    plugins = profile.setdefault("plugins", {})
    plugins["multiPoint"] = {"enabled": [{"name": "Coscheduling"}]}
    plugins["queueSort"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    profile["pluginConfig"].append({"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": permit_wait_s}})
    return conf


def install_crds(api_client, timeout_s: float = 60.0) -> None:
    """Create the PodGroup and ElasticQuota CRDs and wait until the apiserver serves them."""
    crds.install(api_client, crd_paths(), timeout_s)
