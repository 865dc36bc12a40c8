"""Measure how many KWOK nodes this machine holds and how fast kube-scheduler binds pods.

    .venv/bin/python tools/k8s/scale_probe.py --nodes 10000 --pods 2000 [--out results/kube-scale.json]

Starts the real control plane (fakes/kube/cluster.py), registers N fake 8-GPU nodes with a
concurrent client, waits until KWOK reports them Ready, samples each component's RSS, then
creates P single-GPU pods as fast as the client can and reports pods bound per second (from the
one namespace watch, fakes/kube/pods.py). Everything is stopped at the end, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.kube.cluster import ClusterSpec, KubeCluster, ready_nodes  # noqa: E402
from fakes.kube.pods import GPU, PodView, PodWatch, pod_spec  # noqa: E402
from fakes.kube.target import scheduler_config  # noqa: E402
from fakes.real import procfs, procs  # noqa: E402
from loadgen.model.fleet import Fleet  # noqa: E402


def rss_mib(pid: int) -> float:
    """RSS of the session pid leads (the component and anything it forked), MiB."""
    return round(procfs.memory_kib(procs.session_pids(pid))["rss_kib"] / 1024, 1)


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
            ready = ready_nodes(api)
            if ready >= args.nodes or time.monotonic() - t0 > 900:
                break
            time.sleep(2)
        res["nodes_ready"] = ready
        res["nodes_ready_after_register_s"] = round(time.monotonic() - t0, 1)
        time.sleep(5)
        res["rss_mib_idle"] = {k: rss_mib(p) for k, p in c.pids().items()}

        api.create_namespace({"metadata": {"name": "probe"}})
        bound_at: dict[str, float] = {}

        def seen(t: float, typ: str, pod: PodView) -> None:
            if pod.node and typ != "DELETED":
                bound_at.setdefault(pod.name, t)

        watch = PodWatch(k8s.CoreV1Api(c.api_client(2)), "probe", seen, time.monotonic)
        watch.start()
        time.sleep(1)
        body = lambda i: {"metadata": {"name": f"p{i}"}, "spec": pod_spec({GPU: "1", "cpu": "1"})}  # noqa: E731
        t0 = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda i: api.create_namespaced_pod("probe", body(i), _preload_content=False),
                          range(args.pods)))
        res["pods_created_per_s"] = round(args.pods / (time.monotonic() - t0), 1)
        deadline = time.monotonic() + 600
        while len(bound_at) < args.pods and watch.error is None and time.monotonic() < deadline:
            time.sleep(0.5)
        watch.stop()
        if watch.error is not None:
            res["watch_error"] = repr(watch.error)[:200]
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
