"""scheduler-plugins' scheduler (sp-scheduler, built by `make sp-bins`) and its PodGroup CRD.

sp-scheduler is kube-scheduler's own command with the out-of-tree plugins registered, so kwokctl
starts it in kube-scheduler's place (ClusterSpec.scheduler_binary) with the same flags and a
KubeSchedulerConfiguration that turns the Coscheduling plugin on at every extension point and makes
it the queue sort, as the release's manifests/coscheduling/scheduler-config.yaml does.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from fakes.kube.cluster import default_bin_dir

SP_VERSION = os.environ.get("SCHEDULER_PLUGINS_VERSION", "v0.34.7")
BINARY = "sp-scheduler"
CRD_FILE = "scheduling.x-k8s.io_podgroups.yaml"
HOW_TO_BUILD = ("run `make sp-bins` (tools/scheduler-plugins/build.sh builds sigs.k8s.io/scheduler-plugins "
                f"{SP_VERSION} from its Go module into $GANGSTORM_BIN_DIR)")


class SchedulerPluginsMissing(RuntimeError):
    pass


def crd_path() -> Path:
    return default_bin_dir().parent / f"scheduler-plugins-{SP_VERSION}" / "crd" / CRD_FILE


def require_binary() -> Path:
    """sp-scheduler's path; raises with the fix when it or the CRD is absent."""
    path = default_bin_dir() / BINARY
    missing = [str(p) for p, ok in ((path, os.access(path, os.X_OK)), (crd_path(), crd_path().is_file())) if not ok]
    if missing:
        raise SchedulerPluginsMissing(f"scheduler-plugins {SP_VERSION} is not built ({', '.join(missing)} missing): "
                                      f"{HOW_TO_BUILD}")
    return path


def with_coscheduling(conf: dict[str, Any], permit_wait_s: int) -> dict[str, Any]:
    """A KubeSchedulerConfiguration (fakes/kube/target.scheduler_config) with Coscheduling on."""
    profile = conf["profiles"][0]
    plugins = profile.setdefault("plugins", {})
    plugins["multiPoint"] = {"enabled": [{"name": "Coscheduling"}]}
    plugins["queueSort"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    profile["pluginConfig"].append({"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": permit_wait_s}})
    return conf


def install_crd(api_client, timeout_s: float = 60.0) -> None:
    """Create the PodGroup CRD and wait until the apiserver serves it."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    ext = client.ApiextensionsV1Api(api_client)
    doc = yaml.safe_load(crd_path().read_text())
    try:
        ext.create_custom_resource_definition(doc, _preload_content=False)
    except ApiException as e:
        if e.status != 409:
            raise
    deadline = time.monotonic() + timeout_s
    while True:
        crd = json.loads(ext.read_custom_resource_definition(doc["metadata"]["name"], _preload_content=False).data)
        if any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or []):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {doc['metadata']['name']} not established after {timeout_s}s")
        time.sleep(0.2)
