"""Measure how many KWOK nodes this machine holds and how fast kube-scheduler binds pods.

    .venv/bin/python tools/k8s/scale_probe.py --nodes 10000 --pods 2000 [--out results/kube-scale.json]

Starts the real control plane (fakes/kube/cluster.py), registers N fake 8-GPU nodes with a
concurrent client, waits until KWOK reports them Ready, samples each component's RSS, then
creates P single-GPU pods as fast as the client can and reports pods bound per second (from the
one namespace watch). Everything is stopped at the end, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from loadgen.model.fleet import Fleet  # noqa: E402
from fakes.kube.cluster import ClusterSpec, KubeCluster  # noqa: E402
from fakes.kube.target import scheduler_config  # noqa: E402


def rss_mib(pid: int) -> float:
    """RSS of pid and its descendants (MiB)."""
    total = 0
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for child in Path(f"/proc/{p}/task").glob("*/children"):
                todo += [int(c) for c in child.read_text().split()]
        except OSError:
            pass
    return round(total / 1024, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--qps", type=float, default=50, help="kube-scheduler client qps (burst = 2x)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from kubernetes import client as k8s

    workdir = Path(tempfile.mkdtemp(prefix="gangstorm-kube-scale-"))
    cfg = scheduler_config({"api_qps": args.qps, "api_burst": int(args.qps * 2)})
    res: dict = {"nodes": args.nodes, "pods": args.pods, "workdir": str(workdir)}
    with KubeCluster(ClusterSpec(name="scale", workdir=workdir, scheduler_config=cfg)) as c:
        res["cluster_start_s"] = round(c.started_s, 1)
        api = k8s.CoreV1Api(c.api_client(args.threads))
        fleet = Fleet(nodes=args.nodes)
        res["nodes_register_s"] = round(c.create_nodes(fleet, threads=args.threads), 1)
        res["nodes_per_s"] = round(args.nodes / res["nodes_register_s"], 1)
        t0 = time.monotonic()
        while True:
            items = json.loads(api.list_node(resource_version="0", _preload_content=False).data)["items"]
            ready = sum(1 for n in items for x in n.get("status", {}).get("conditions", [])
                        if x["type"] == "Ready" and x["status"] == "True")
            if ready >= args.nodes or time.monotonic() - t0 > 900:
                break
            time.sleep(2)
        res["nodes_ready"] = ready
        res["nodes_ready_after_register_s"] = round(time.monotonic() - t0, 1)
        time.sleep(5)
        res["rss_mib_idle"] = {k: rss_mib(p) for k, p in c.pids().items()}

        api.create_namespace({"metadata": {"name": "probe"}})
        bound_at: dict[str, float] = {}
        stop = threading.Event()

        def watch():
            rv = json.loads(api.list_namespaced_pod("probe", _preload_content=False).data)["metadata"]["resourceVersion"]
            while not stop.is_set() and len(bound_at) < args.pods:
                try:     # a watch can end (server timeout, hiccup): resume from the last version
                    resp = api.list_namespaced_pod("probe", watch=True, resource_version=rv, timeout_seconds=60,
                                                   allow_watch_bookmarks=True, _preload_content=False)
                    for line in resp:
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        o = ev["object"]
                        if ev["type"] == "ERROR":
                            res["watch_errors"] = res.get("watch_errors", 0) + 1
                            break
                        rv = o["metadata"].get("resourceVersion", rv)
                        if ev["type"] != "BOOKMARK" and o.get("spec", {}).get("nodeName") \
                                and o["metadata"]["name"] not in bound_at:
                            bound_at[o["metadata"]["name"]] = time.monotonic()
                        if stop.is_set() or len(bound_at) >= args.pods:
                            return
                except Exception as e:
                    res["watch_errors"] = res.get("watch_errors", 0) + 1
                    res["watch_last_error"] = repr(e)[:200]
                    time.sleep(0.5)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        time.sleep(1)
        body = lambda i: {"metadata": {"name": f"p{i}"}, "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "m", "image": "x", "resources": {
                "requests": {"nvidia.com/gpu": "1", "cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}
        t0 = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda i: api.create_namespaced_pod("probe", body(i), _preload_content=False),
                          range(args.pods)))
        res["pods_created_per_s"] = round(args.pods / (time.monotonic() - t0), 1)
        w.join(timeout=600)
        stop.set()
        if bound_at:
            res["pods_bound"] = len(bound_at)
            res["pods_bound_per_s"] = round(len(bound_at) / (max(bound_at.values()) - t0), 1)
        res["rss_mib_loaded"] = {k: rss_mib(p) for k, p in c.pids().items()}
    print(json.dumps(res, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
