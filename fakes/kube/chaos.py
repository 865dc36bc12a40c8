"""The cluster operations behind the Kubernetes-family chaos kinds: etcd quota pressure and recovery,
failing and recovering a node. Plain calls on a CoreV1Api (and the cluster's etcdctl); the adapter
decides when to run them and what they mean for its gangs (fakes/kube/family/).
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

from fakes.kube.cluster import KubeCluster
from fakes.kube.refusal import reason_of

FILL_NS = "gangstorm-fill"                  # etcd_fill's ConfigMaps, deleted whole by etcd_recover
FAIL_TAINT = "gangstorm.io/node-failed"


def fill_etcd(api, total_bytes: int, object_bytes: int, stop: threading.Event, namespace: str = FILL_NS,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """ConfigMaps of object_bytes in `namespace` until total_bytes are written (0: no limit) or
    etcd refuses; through the apiserver, so it works on any cluster the run may write to."""
    object_bytes = min(object_bytes, 1000 * 1024)        # ConfigMaps are capped at 1 MiB
    blob = "x" * object_bytes
    t0, written, i, stopped_by = time.monotonic(), 0, 0, "bytes"
    while (total_bytes <= 0 or written < total_bytes) and not stop.is_set():
        try:
            api.create_namespaced_config_map(namespace, {"metadata": {"name": f"fill-{i}", "labels": labels or {}},
                                                         "data": {"blob": blob}},
                                             _preload_content=False, _request_timeout=(10, 60))
            written += object_bytes
        except Exception as e:
            if getattr(e, "status", None) != 409:
                stopped_by = reason_of(e)
                break
        i += 1
    return {"bytes_written": written, "objects": i, "stopped_by": stopped_by,
            "seconds": round(time.monotonic() - t0, 2)}


def recover_etcd(api, cluster: KubeCluster, namespace: str = FILL_NS) -> dict[str, Any]:
    """Delete the filler, compact, defragment, disarm the NOSPACE alarm; timed end to end. On an
    existing cluster without --etcd-endpoint only the filler is deleted (said in the result)."""
    t0 = time.monotonic()
    steps: dict[str, Any] = {}
    for _ in range(10):
        try:
            api.delete_collection_namespaced_config_map(namespace, _preload_content=False, _request_timeout=120)
            break
        except Exception as e:
            steps["delete_error"] = reason_of(e)
            time.sleep(1)
    if not cluster.etcd_url:
        return {"seconds": round(time.monotonic() - t0, 2), **steps,
                "compact": "skipped: etcd not reachable (pass --etcd-endpoint)"}
    status = cluster.etcdctl("endpoint", "status", "-w", "json")
    rev = json.loads(status.stdout)[0]["Status"]["header"]["revision"]
    for step, args in (("compact", ["compaction", str(rev), "--physical"]), ("defrag", ["defrag"]),
                       ("disarm", ["alarm", "disarm"])):
        r = cluster.etcdctl(*args, timeout=300)
        steps[step] = "ok" if r.returncode == 0 else (r.stderr.strip()[-200:] or str(r.returncode))
    alarms = cluster.etcdctl("alarm", "list").stdout.strip()
    return {"seconds": round(time.monotonic() - t0, 2), "revision": rev, "alarms_after": alarms, **steps}


def mark_failed(api, node: str, failed: bool) -> None:
    """Annotate the node for KWOK's node-fail stage (NotReady) and add a NoExecute taint, so the
    controller-manager's taint-eviction controller deletes its pods; failed=False undoes both."""
    spec = json.loads(api.read_node(node, _preload_content=False).data)["spec"]
    taints = [t for t in spec.get("taints") or [] if t["key"] != FAIL_TAINT]
    if failed:
        taints.append({"key": FAIL_TAINT, "value": "true", "effect": "NoExecute"})
    api.patch_node(node, {"metadata": {"annotations": {"gangstorm.io/fail": "true" if failed else None}},
                          "spec": {"taints": taints}}, _preload_content=False)
