"""How fast one gangstorm process can create pods on the project's apiserver, and which side limits.

    python -m fakes.kube.createrate --nodes 0 --clients old,new --threads 16 --rates max,100,200,400
    python -m fakes.kube.createrate --help

On the project's KWOK stack (fakes/kube/cluster.py, all on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager, kwok; no kube-scheduler, so pods stay Pending and nothing but the creates
writes), with `--nodes` KWOK nodes registered and Ready first (0: none), each client path in turn
creates pods:

- `old`: the official Python client, `CoreV1Api.create_namespaced_pod(ns, dict,
  _preload_content=False)`, as the kube-family adapters did before fakes/kube/poster.py;
- `new`: fakes/kube/poster.py, bodies encoded once and POSTed on keep-alive connections.

Each step lasts `--step-s` seconds. A step `max` is closed-loop: `--threads` threads create as fast
as they can. A numeric step offers that many creates per second on a fixed schedule (open loop, the
same threads): it is sustained when at least 95% of what was offered was created by the step's end
(creates still queued in the client at the end are not sent; `refused` counts them as not_sent).
Per step the result holds the created rate, the client's latency, the refusals, the generator's
CPU per create (this process's CPU time over the step divided by its creates: everything it did is
the generator's cost), the connections its pool opened (each a TLS handshake), the apiserver's own
POST pods latency (apiserver_request_duration_seconds) and the CPU the apiserver, etcd and the
whole machine used per second and per create. The pods of each step are deleted before the next.

The result, results/fidelity-scale/kube/createrate-<nodes>n.json, gives per client the highest
sustained rate, the closed-loop rate, and `one_core_ceiling_per_s` = 1 / CPU per create: what one
such process could offer if it had a core of its own (derived, not measured), with the command,
start time and load average. Every process started is stopped at the end, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fakes.kube import evidence
from fakes.kube.cluster import ClusterSpec, KubeCluster, get_text, ready_nodes
from fakes.kube.costcurve import OUT, apiserver_series
from fakes.kube.family.cluster import apiserver_args
from fakes.kube.pods import GPU, pod_spec
from fakes.kube.poster import JsonPoster, encode, opened, pods_path
from fakes.kube.refusal import reason_of
from fakes.real.procfs import cpu_seconds
from loadgen.model.fleet import Fleet

NS = "createrate"
TIMEOUT = (10, 60)
SUSTAINED = 0.95            # share of the offered creates done by the step's end


def pod_body(name: str) -> dict[str, Any]:
    """A pod like the kube adapter's: one GPU, the job's labels, the startup annotation."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"gangstorm.io/complete-after": "600.000s"},
                         "labels": {"app.kubernetes.io/managed-by": "gangstorm", "gangstorm.io/job-id": name,
                                    "gangstorm.io/tenant": "t0", "gangstorm.io/run": "createrate"}},
            "spec": pod_spec({GPU: "1", "cpu": "1", "memory": "1Gi"})}


class Creator:
    """One client path: create(name) sends one pod; opened() counts the pool's connections."""

    def __init__(self, cluster: KubeCluster, kind: str, threads: int, dry_run: bool):
        from kubernetes import client as k8s
        self.kind = kind
        self.api_client = cluster.api_client(threads * 2)
        self.host = self.api_client.configuration.host
        self.dry = dry_run
        if kind == "old":
            self.api = k8s.CoreV1Api(self.api_client)
        else:
            self.poster = JsonPoster(self.api_client)
            self.path = pods_path(NS) + ("?dryRun=All" if dry_run else "")

    def create(self, name: str) -> None:
        if self.kind == "old":
            self.api.create_namespaced_pod(NS, pod_body(name), _preload_content=False, _request_timeout=TIMEOUT,
                                           **({"dry_run": "All"} if self.dry else {}))
        else:
            self.poster.post(self.path, encode(pod_body(name)), timeout=TIMEOUT)

    def opened(self) -> int:
        return opened(self.api_client.rest_client.pool_manager, self.host)


class Probe:
    def __init__(self, cluster: KubeCluster):
        from kubernetes import client as k8s
        self.cluster = cluster
        self.admin = cluster.api_client(4)
        self.api = k8s.CoreV1Api(self.admin)
        pids = cluster.pids()
        self.pids = {n: pids[n] for n in ("kube-apiserver", "etcd", "kwok-controller", "kube-controller-manager")
                     if n in pids}

    def cpu(self) -> dict[str, float]:
        out = {n: cpu_seconds(p) or 0.0 for n, p in self.pids.items()}
        out["machine"] = evidence.machine_busy_s()
        return out

    def clear(self) -> None:
        """Delete the namespace's pods and wait until they are gone (no kubelet: at once)."""
        self.api.delete_collection_namespaced_pod(NS, grace_period_seconds=0, _preload_content=False,
                                                  _request_timeout=(10, 300))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            left = json.loads(self.api.list_namespaced_pod(NS, limit=1, _preload_content=False).data)
            if not left["items"]:
                return
            time.sleep(1.0)
        raise TimeoutError(f"pods in {NS} not deleted after 300 s")

    def step(self, creator: Creator, label: str, rate: float | None, seconds: float, threads: int) -> dict:
        """One step: closed loop (rate None) or `rate` creates per second offered on a schedule."""
        lat: list[float] = []
        refused: dict[str, int] = {}
        done_by_end = [0]
        lock = threading.Lock()
        count = iter(range(10**9))

        def one(i: int, end: float) -> None:
            t = time.monotonic()
            if t > end:                 # an open-loop backlog past the step's end is not sent
                with lock:
                    refused["not_sent"] = refused.get("not_sent", 0) + 1
                return
            try:
                creator.create(f"{label}-{i}")
            except Exception as e:      # noqa: BLE001 - every refusal is counted by its reason
                with lock:
                    refused[reason_of(e)] = refused.get(reason_of(e), 0) + 1
                return
            t1 = time.monotonic()
            with lock:
                lat.append(t1 - t)
                if t1 <= end:
                    done_by_end[0] += 1

        _, a0 = self._scrape()
        c0, p0, o0 = self.cpu(), time.process_time(), creator.opened()
        t0 = time.monotonic()
        end = t0 + seconds
        offered = 0
        with ThreadPoolExecutor(threads, thread_name_prefix="create") as pool:
            if rate is None:
                def loop() -> None:
                    while time.monotonic() < end:
                        one(next(count), end)
                for _ in range(threads):
                    pool.submit(loop)
            else:
                while True:
                    due = t0 + offered / rate
                    if due >= end:
                        break
                    time.sleep(max(0.0, due - time.monotonic()))
                    pool.submit(one, offered, end)
                    offered += 1
        wall = time.monotonic() - t0            # to the last create's answer (a backlog drains)
        c1, p1, o1 = self.cpu(), time.process_time(), creator.opened()
        _, a1 = self._scrape()
        n = len(lat)
        gen_cpu = p1 - p0
        out: dict[str, Any] = {
            "step": "max" if rate is None else rate, "threads": threads, "seconds": seconds,
            "created": n, "refused": refused, "created_per_s": round(done_by_end[0] / seconds, 1),
            "drain_s": round(wall - seconds, 2),
            "client_ms": {"p50": _ms(lat, 0.5), "p99": _ms(lat, 0.99), "mean": round(statistics.fmean(lat) * 1e3, 2)
                          if lat else None},
            "generator_cpu_ms_per_create": round(gen_cpu / max(n, 1) * 1e3, 3),
            "generator_cores": round(gen_cpu / wall, 3),
            "connections_opened": o1 - o0,
            "apiserver_post_pods_ms": _post_ms(a0, a1),
            "cores": {k: round((c1[k] - c0[k]) / wall, 3) for k in c1},
            "cpu_ms_per_create": {k: round((c1[k] - c0[k]) / max(n, 1) * 1e3, 3) for k in c1},
        }
        if rate is not None:
            out["offered"] = offered
            out["sustained"] = done_by_end[0] >= SUSTAINED * offered
        return out

    def _scrape(self) -> tuple[None, dict]:
        return None, apiserver_series(get_text(self.admin, "/metrics", timeout=30))


def _ms(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))] * 1e3, 2)


def _post_ms(a0: dict, a1: dict) -> dict:
    s0, n0 = a0["create"]
    s1, n1 = a1["create"]
    return {"mean": round((s1 - s0) / (n1 - n0) * 1e3, 2) if n1 > n0 else None, "count": int(n1 - n0)}


def summarise(steps: list[dict]) -> dict:
    """Per client: the highest sustained offered rate, the closed-loop rate and the CPU a create
    cost the generator (median over the closed-loop steps, where the fewest idle wake-ups share it;
    over all steps without one)."""
    sustained = [s for s in steps if s.get("sustained")]
    closed = [s for s in steps if s["step"] == "max"]
    cpu = [s["generator_cpu_ms_per_create"] for s in closed or steps if s["created"]]
    per_create = statistics.median(cpu) if cpu else None
    return {"highest_sustained_per_s": max((s["created_per_s"] for s in sustained), default=None),
            "highest_sustained_offered_per_s": max((s["step"] for s in sustained), default=None),
            "closed_loop_per_s": max((s["created_per_s"] for s in closed), default=None),
            "generator_cpu_ms_per_create": per_create,
            "one_core_ceiling_per_s": round(1000.0 / per_create, 0) if per_create else None}


def measure(args: argparse.Namespace) -> dict:
    quiet = evidence.wait_for_quiet(max_wait_s=args.max_wait_s)
    res: dict[str, Any] = {"what": "pod create rate, one gangstorm process, project apiserver", "nodes": args.nodes,
                           "command": evidence.command_line(), "started": evidence.started(),
                           "threads": args.threads, "step_s": args.step_s, "dry_run": args.dry_run}
    work = Path(tempfile.mkdtemp(prefix=f"gangstorm-createrate-{args.nodes}-"))
    spec = ClusterSpec(name=f"crate{args.nodes}", workdir=work, scheduler=False,
                       apiserver_args=apiserver_args({}))      # the real backend's, scenario defaults
    try:
        with KubeCluster(spec) as cluster:
            res["cluster_start_s"] = round(cluster.started_s, 1)
            probe = Probe(cluster)
            if args.nodes:
                res["nodes_register_s"] = round(cluster.create_nodes(Fleet(nodes=args.nodes), threads=16), 1)
                t0 = time.monotonic()
                while ready_nodes(probe.api) < args.nodes:
                    if time.monotonic() - t0 > 1500:
                        raise TimeoutError(f"{args.nodes} nodes not Ready after 1500 s")
                    time.sleep(3)
                res["nodes_ready_s"] = round(time.monotonic() - t0, 1)
            probe.api.create_namespace({"metadata": {"name": NS}}, _preload_content=False)
            _wait_service_account(probe.api)
            res["clients"] = {}
            for kind in args.clients.split(","):
                creator = Creator(cluster, kind, args.threads, args.dry_run)
                steps = []
                for k, r in enumerate(args.rates.split(",")):
                    rate = None if r == "max" else float(r)
                    steps.append(probe.step(creator, f"{kind}{k}", rate, args.step_s, args.threads))
                    print(f"{kind} {r}: {_line(steps[-1])}", flush=True)
                    if not args.dry_run:
                        probe.clear()
                    time.sleep(args.pause_s)
                res["clients"][kind] = {"summary": summarise(steps), "steps": steps}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["load_avg"] = {**quiet, "after": evidence.load_avg()}
    evidence.write(args.out / f"createrate-{args.nodes}n{'-dryrun' if args.dry_run else ''}.json", res)
    return res


def _wait_service_account(api, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            api.read_namespaced_service_account("default", NS, _preload_content=False)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _line(s: dict) -> str:
    return (f"{s['created_per_s']}/s created{' (sustained)' if s.get('sustained') else ''}, client p50 "
            f"{s['client_ms']['p50']} ms, generator {s['generator_cpu_ms_per_create']} ms CPU/create "
            f"({s['generator_cores']} cores), apiserver POST {s['apiserver_post_pods_ms']['mean']} ms, "
            f"apiserver {s['cores'].get('kube-apiserver')} cores, etcd {s['cores'].get('etcd')}, machine "
            f"{s['cores']['machine']}, {s['connections_opened']} connections opened, refused {s['refused']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fakes.kube.createrate", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--nodes", type=int, default=0, help="KWOK nodes registered (and Ready) first; 0: none")
    ap.add_argument("--clients", default="old,new", help="client paths in order: old (Python client), new (poster)")
    ap.add_argument("--threads", type=int, default=16, help="client threads of the one process")
    ap.add_argument("--rates", default="max,50,100,200,400",
                    help="steps: max (closed loop) or creates offered per second")
    ap.add_argument("--step-s", type=float, default=20.0, help="seconds per step")
    ap.add_argument("--pause-s", type=float, default=3.0, help="quiet seconds between steps")
    ap.add_argument("--dry-run", action="store_true",
                    help="?dryRun=All: the apiserver admits and validates but writes nothing to etcd")
    ap.add_argument("--max-wait-s", type=float, default=600.0,
                    help="wait at most this long for a quiet machine (1-min load <= 1.5) before starting")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    res = measure(args)
    for kind, c in res["clients"].items():
        print(f"{kind}: {c['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
