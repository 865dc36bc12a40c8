"""vc-scheduler's cost curve at 500 / 2,000 / 5,000 / 10,000 nodes, read off its own metrics.

    python -m fakes.volcano.costcurve --sizes 500,2000,5000,10000 --out results/fidelity-scale/volcano
    python -m fakes.volcano.costcurve --sizes 2000 --bench-jobs 10000 --out results/fidelity-scale/volcano

Per size, on the project's KWOK stack (fakes/kube/cluster.py: etcd, kube-apiserver,
kube-controller-manager and kwok, no kube-scheduler) with Volcano v1.14.1 on top
(fakes/volcano/controlplane.py: vc-scheduler with the project's actions and plugins, schedule
period 1 s; vc-controller-manager), 8-GPU nodes, one Queue:

1. idle: no job at all; `--sessions` sessions. What a session costs with nodes only (OpenSession's
   snapshot of every node, the plugins' session open and close).
2. light: `--light-jobs` one-pod one-GPU vcjobs created at `--light-rate` a second on the empty
   fleet: sessions that place a task or two, each placed task a predicate walk that stops at
   Volcano's numNodesToFind feasible nodes, which are then scored.
3. the light jobs deleted, the fleet filled (one pinned 8-GPU pod per node, spec.nodeName, no
   scheduler), then `--pending` one-pod one-GPU vcjobs (e.g. 100 and 1,000, cumulative) that cannot
   fit: each is enqueued (the queue has no capability), its pod created, and every session's allocate
   walks every node for it and fails. `--sessions` sessions at each count, once every pod exists.

For each phase the differences of vc-scheduler's histograms over the phase give, per session, the
end-to-end latency (volcano_e2e_scheduling_latency_milliseconds), the open session
(volcano_open_session_duration_milliseconds), each action (volcano_action_scheduling_latency_
milliseconds{action}) and each plugin's session open and close
(volcano_plugin_scheduling_latency_milliseconds), as (sum, count); so the per-node, per-pending-task
and per-walk costs can be separated by the fit (python -m loadgen.calibration.volcano_curve).

With --running N1,N2 the size runs the idle phase and then, instead of the light and pending phases,
N1 and then N2 (cumulative) one-pod vcjobs that fit, left Running, with `--sessions` sessions at each
count: what the jobs a session snapshots but has nothing to do for cost it (running-<nodes>n.json).

With --bench-jobs N the size runs Volcano's tuning-guide case instead (volcano
docs/user-guide/how_to_tune_volcano_performance.md, benchmark 1: N jobs x 1 pod, no admission
webhook, both Volcano components at --kube-api-qps/--kube-api-burst 1000): every vcjob created as
fast as `--threads` client threads can, the figure pods bound per second from the first create to
the last bind; the create offsets are kept so the twin is offered the same submissions.

Writes results/fidelity-scale/volcano/curve-<nodes>n.json ({"scheduler", "nodes", "command",
"started", "load_avg", "metrics", "sim": {}}) or bench-<N>-jobs-<nodes>n.json ({..., "figure",
"offsets_s"}); "sim" is filled by the comparison step. Every process started is stopped at the end,
also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fakes.kube import evidence
from fakes.kube.cluster import ClusterSpec, KubeCluster, get_text, ready_nodes
from fakes.kube.family.cluster import apiserver_args
from fakes.kube.metrics import apiserver_requests, fetch, parse, quantiles, requests_during, total
from fakes.kube.pods import GPU, PodView, PodWatch, pod_spec
from fakes.real.procfs import cpu_seconds
from fakes.volcano.controlplane import VOLCANO_VERSION, VolcanoControlPlane, require_binaries
from loadgen.model.fleet import Fleet

OUT = Path(__file__).resolve().parents[2] / "results" / "fidelity-scale" / "volcano"
NS, FILL_NS, QUEUE = "curve", "fill", "curve"
GROUP, VERSION = "batch.volcano.sh", "v1alpha1"
SCHED_GROUP, SCHED_VERSION = "scheduling.volcano.sh", "v1beta1"
E2E = "volcano_e2e_scheduling_latency_milliseconds"
OPEN = "volcano_open_session_duration_milliseconds"
ACTION = "volcano_action_scheduling_latency_milliseconds"
PLUGIN = "volcano_plugin_scheduling_latency_milliseconds"
ACTIONS = ("enqueue", "allocate", "backfill")
# the project's Volcano settings (schema defaults), the job controller's client as the tuning guide's
CONFIG = {"schedule_period_s": 1.0, "api_qps": 1000.0, "api_burst": 1000,
          "controller_qps": 1000.0, "controller_burst": 1000}


# --- vc-scheduler's histograms, as (sum ms, count) ------------------------------------------------------
def series(text: str) -> dict[str, tuple[float, float]]:
    m = parse(text, ("volcano_",))

    def hist(name: str, **match) -> tuple[float, float]:
        return total(m.get(name + "_sum", []), **match), total(m.get(name + "_count", []), **match)

    out = {"e2e": hist(E2E), "open": hist(OPEN)}
    for a in ACTIONS:
        out[f"action_{a}"] = hist(ACTION, action=a)
    for labels, _ in m.get(PLUGIN + "_count", []):
        key = f"plugin_{labels.get('plugin')}_{labels.get('OnSession')}"
        out[key] = hist(PLUGIN, plugin=labels.get("plugin", ""), OnSession=labels.get("OnSession", ""))
    return out


def per_session(before: dict, after: dict) -> dict:
    """Mean ms per observation of each histogram over the interval, and the sessions counted."""
    out: dict = {"sessions": int(after["e2e"][1] - before["e2e"][1])}
    for k, (s1, c1) in after.items():
        s0, c0 = before.get(k, (0.0, 0.0))
        if c1 - c0 > 0:
            out[k + "_ms"] = round((s1 - s0) / (c1 - c0), 4)
            out[k + "_n"] = int(c1 - c0)
    return out


# --- one size -------------------------------------------------------------------------------------------
class Probe:
    """A KWOK cluster with Volcano, one Queue, a pod watch over the jobs' namespace, and the phases."""

    def __init__(self, cluster: KubeCluster, vc: VolcanoControlPlane, nodes: int, threads: int):
        from kubernetes import client as k8s
        self.cluster, self.vc, self.nodes = cluster, vc, nodes
        api_client = cluster.api_client(threads * 2)
        self.api = k8s.CoreV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.admin = cluster.api_client(2)
        self.threads = threads
        self.bound: dict[str, float] = {}
        self.appeared: dict[str, float] = {}    # pod name -> when the watch first saw it (the controller made it)
        self.pods: dict[str, str] = {}          # pod name -> node ("" while pending)
        self.lock = threading.Lock()
        self.watch: PodWatch | None = None
        self.created = 0                        # vcjobs created so far

    def scrape(self) -> dict[str, tuple[float, float]]:
        return fetch(self.vc.metrics_url, lambda t: {"s": series(t)}).get("s", {})

    def api_requests(self) -> dict[str, tuple[float, float]]:
        return apiserver_requests(get_text(self.admin, "/metrics", timeout=30))

    def start(self) -> None:
        from kubernetes import client as k8s
        for ns in (NS, FILL_NS):
            self.api.create_namespace({"metadata": {"name": ns}}, _preload_content=False)
        self._wait_service_account()
        self.custom.create_cluster_custom_object(SCHED_GROUP, SCHED_VERSION, "queues", {
            "apiVersion": f"{SCHED_GROUP}/{SCHED_VERSION}", "kind": "Queue", "metadata": {"name": QUEUE},
            "spec": {"weight": 1, "reclaimable": True}}, _preload_content=False)

        def seen(t: float, typ: str, pod: PodView) -> None:
            with self.lock:
                if typ == "DELETED":
                    self.pods.pop(pod.name, None)
                    return
                self.pods[pod.name] = pod.node
                self.appeared.setdefault(pod.name, t)
                if pod.node:
                    self.bound.setdefault(pod.name, t)

        self.watch = PodWatch(k8s.CoreV1Api(self.cluster.api_client(2)), NS, seen, time.monotonic)
        self.watch.start()
        time.sleep(1.0)

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    def _wait_service_account(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                for ns in (NS, FILL_NS):
                    self.api.read_namespaced_service_account("default", ns, _preload_content=False)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def vcjob(self, name: str) -> dict:
        template = {"metadata": {"labels": {"app": "curve"}},
                    "spec": pod_spec({GPU: "1", "cpu": "1"}, schedulerName="volcano")}
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Job", "metadata": {"name": name, "namespace": NS},
                "spec": {"schedulerName": "volcano", "queue": QUEUE, "minAvailable": 1, "maxRetry": 1000,
                         "tasks": [{"name": "w", "replicas": 1, "minAvailable": 1, "template": template}]}}

    def create_job(self, name: str) -> float:
        t = time.monotonic()
        for attempt in range(6):
            try:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "jobs", self.vcjob(name),
                                                            _preload_content=False, _request_timeout=(10, 60))
                return t
            except Exception as e:                 # a 429 or 5xx on a loaded apiserver: retried
                if getattr(e, "status", None) == 409:
                    return t
                if attempt == 5:
                    raise
                time.sleep(0.2 * 2 ** attempt)
        return t

    def create_jobs(self, names: list[str]) -> list[float]:
        with ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(self.create_job, names))

    def wait(self, cond, timeout_s: float, what: str) -> float:
        t0 = time.monotonic()
        while not cond():
            if self.watch is not None and self.watch.error is not None:
                raise RuntimeError(f"pod watch failed: {self.watch.error!r}")
            self.vc.check_alive()
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{what} after {timeout_s:.0f} s")
            time.sleep(0.2)
        return round(time.monotonic() - t0, 2)

    def sessions(self, n: int, timeout_s: float) -> tuple[dict, float]:
        """The histograms over the next n sessions (or as many as end within timeout_s)."""
        s0 = self.scrape()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            time.sleep(0.5)
            s1 = self.scrape()
            if s1.get("e2e", (0, 0))[1] - s0.get("e2e", (0, 0))[1] >= n:
                break
        return per_session(s0, s1), round(time.monotonic() - t0, 2)

    # --- phases --------------------------------------------------------------------------------------
    def idle(self, n: int) -> dict:
        self.sessions(2, 30)                     # start-up sessions out of the window
        got, wall = self.sessions(n, 120)
        return {"jobs": 0, "pending_tasks": 0, "wall_s": wall, "per_session": got}

    def light(self, jobs: int, rate: float) -> dict:
        names = [f"light-{i}" for i in range(jobs)]
        s0 = self.scrape()
        t0 = time.monotonic()
        sent = {}
        for i, name in enumerate(names):
            time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            sent[name] = self.create_job(name)
        self.created += jobs
        took = self.wait(lambda: self._bound_count("light-") >= jobs, 300, f"{jobs} light pods not bound")
        time.sleep(2.0)
        s1 = self.scrape()
        with self.lock:
            lat = [self.bound[p] - sent[p.rsplit("-w-", 1)[0]] for p in self.bound
                   if p.startswith("light-") and p.rsplit("-w-", 1)[0] in sent]
        return {"jobs": jobs, "rate_per_s": rate, "bound": self._bound_count("light-"), "wait_s": took,
                "per_session": per_session(s0, s1), "create_to_bound_s": quantiles(lat)}

    def _bound_count(self, prefix: str) -> int:
        with self.lock:
            return sum(1 for p in self.bound if p.startswith(prefix) and self.pods.get(p))

    def clear_jobs(self) -> float:
        """Delete every vcjob of the namespace and wait until their pods are gone."""
        t0 = time.monotonic()
        self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, NS, "jobs", _preload_content=False,
                                                               _request_timeout=(10, 300))
        self.wait(lambda: not self.pods, 600, "the light pods not deleted")
        with self.lock:
            self.bound.clear()
        return round(time.monotonic() - t0, 2)

    def fill(self) -> dict:
        """One pinned pod holding all 8 GPUs on every node (spec.nodeName: no scheduler involved)."""
        from kubernetes import client as k8s
        core = k8s.CoreV1Api(self.cluster.api_client(self.threads * 2))
        fleet = Fleet(nodes=self.nodes)

        def one(i: int) -> None:
            body = {"metadata": {"name": f"fill-{i}"},
                    "spec": pod_spec({GPU: str(int(fleet.gpus_of[i])), "cpu": "1"}, nodeName=fleet.node_name(i))}
            for attempt in range(6):
                try:
                    core.create_namespaced_pod(FILL_NS, body, _preload_content=False, _request_timeout=(10, 60))
                    return
                except Exception as e:
                    if getattr(e, "status", None) == 409 or attempt == 5:
                        if getattr(e, "status", None) == 409:
                            return
                        raise
                    time.sleep(0.2 * 2 ** attempt)

        t0 = time.monotonic()
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(one, range(self.nodes)))
        created = round(time.monotonic() - t0, 2)

        def running() -> bool:
            body = json.loads(core.list_namespaced_pod(FILL_NS, field_selector="status.phase!=Running", limit=1,
                                                       _preload_content=False, _request_timeout=(10, 120)).data)
            return not body["items"]

        ran = self.wait(running, 900, "the fill pods not Running")
        time.sleep(3.0)                            # the scheduler's cache has them
        return {"pods": self.nodes, "created_s": created, "running_after_s": ran}

    def pending(self, count: int, n: int) -> dict:
        """`count` one-pod jobs in all that cannot fit, each with its pod created; n sessions."""
        names = [f"pend-{i}" for i in range(self.created, self.created + count - self._pending_jobs)]
        t0 = time.monotonic()
        self.create_jobs(names)
        created_s = round(time.monotonic() - t0, 2)
        self._pending_jobs = count
        self.created += len(names)
        ready = self.wait(lambda: self._pods_with("pend-") >= count, 900, f"{count} pending pods not created")
        self.sessions(2, 600)                       # the sessions that enqueued and first saw them
        got, wall = self.sessions(n, 600)
        return {"jobs": count, "pending_tasks": self._pods_with("pend-"), "bound": self._bound_count("pend-"),
                "created_s": created_s, "pods_after_s": ready, "wall_s": wall, "per_session": got}

    _pending_jobs = 0

    def running(self, count: int, n: int) -> dict:
        """`count` one-pod jobs in all that fit, created at once and left Running; n sessions with
        nothing to place: what the jobs a session snapshots but does not schedule cost it."""
        names = [f"run-{i}" for i in range(self._running_jobs, count)]
        t0 = time.monotonic()
        self.create_jobs(names)
        created_s = round(time.monotonic() - t0, 2)
        self._running_jobs = count
        bound = self.wait(lambda: self._bound_count("run-") >= count, 1800, f"{count} running pods not bound")
        self.sessions(3, 600)                       # the sessions that bound the last of them
        got, wall = self.sessions(n, 600)
        return {"jobs": count, "running_tasks": self._bound_count("run-"), "created_s": created_s,
                "bound_after_s": bound, "wall_s": wall, "per_session": got}

    _running_jobs = 0

    def _pods_with(self, prefix: str) -> int:
        with self.lock:
            return sum(1 for p in self.pods if p.startswith(prefix))

    def bench(self, jobs: int, timeout_s: float) -> dict:
        """The tuning guide's case: `jobs` one-pod vcjobs created at once; pods bound per second from
        the first create to the last bind (no figure if they are not all bound within timeout_s)."""
        names = [f"bench-{i}" for i in range(jobs)]
        s0, a0, busy0 = self.scrape(), self.api_requests(), evidence.machine_busy_s()
        c0 = self.cpu()
        t0 = time.monotonic()
        sent = self.create_jobs(names)
        created_s = time.monotonic() - t0
        c1 = self.cpu()
        try:
            self.wait(lambda: self._bound_count("bench-") >= jobs, timeout_s, f"{jobs} bench pods not bound")
        except TimeoutError as e:
            return {"jobs": jobs, "created_s": round(created_s, 2), "error": str(e),
                    "bound": self._bound_count("bench-"), "after_s": round(time.monotonic() - t0, 1),
                    "per_session": per_session(s0, self.scrape())}
        s1, a1, busy = self.scrape(), self.api_requests(), evidence.machine_busy_s() - busy0
        c2 = self.cpu()
        wall = time.monotonic() - t0
        with self.lock:
            bound = sorted(t for p, t in self.bound.items() if p.startswith("bench-"))
            appeared = sorted(t for p, t in self.appeared.items() if p.startswith("bench-"))
        first, last = min(sent), bound[-1]
        # when the job controller's pods appeared against when they were bound: which of the two paced
        # the case (vc-controller-manager's workers creating pods, or vc-scheduler's sessions binding them)
        return {"jobs": jobs, "created_per_s": round(jobs / created_s, 1), "created_s": round(created_s, 2),
                "last_bind_s": round(last - first, 2), "figure": round(jobs / (last - first), 2),
                "last_pod_appeared_s": round(appeared[-1] - first, 2),
                "offsets_s": [round(t - first, 4) for t in sent],
                "pods_appeared_s": [round(t - first, 3) for t in appeared],
                "pods_bound_s": [round(t - first, 3) for t in bound], "per_session": per_session(s0, s1),
                "apiserver_requests": requests_during(a0, a1), "machine_cores": round(busy / wall, 2),
                # what shared the 2 cores with the scheduler's walks, while the vcjobs were created and after
                "cores_while_creating": evidence.cores_between(c0, c1),
                "cores_after_creating": evidence.cores_between(c1, c2)}

    def cpu(self) -> tuple[float, dict[str, float]]:
        """(now, CPU seconds so far) of each process the cluster runs and of this generator."""
        return time.monotonic(), {"generator": time.process_time(),
                                  **{n: cpu_seconds(p) or 0.0 for n, p in self.cluster.pids().items()}}


def _bring_up(c: KubeCluster, nodes: int, work: Path) -> tuple[VolcanoControlPlane, dict]:
    """Start the cluster, register the fleet, wait until Ready, start Volcano."""
    from kubernetes import client as k8s
    c.start()
    info: dict = {"cluster_start_s": round(c.started_s, 1)}
    api = k8s.CoreV1Api(c.api_client(4))
    info["nodes_register_s"] = round(c.create_nodes(Fleet(nodes=nodes), threads=16), 1)
    t0 = time.monotonic()
    while ready_nodes(api) < nodes:
        if time.monotonic() - t0 > 1500:
            raise TimeoutError(f"{nodes} nodes not Ready after 1500 s")
        time.sleep(3)
    info["nodes_ready_s"] = round(time.monotonic() - t0, 1)
    vc = VolcanoControlPlane(c, work, dict(CONFIG))
    t0 = time.monotonic()
    vc.start(c.api_client())
    info["volcano_start_s"] = round(time.monotonic() - t0, 1)
    return vc, info


def measure(nodes: int, args: argparse.Namespace) -> dict:
    require_binaries()
    quiet = evidence.wait_for_quiet(max_wait_s=args.quiet_wait)
    started = evidence.started()
    work = Path(tempfile.mkdtemp(prefix=f"gangstorm-volcano-curve-{nodes}-"))
    res: dict = {"scheduler": "volcano", "nodes": nodes, "command": evidence.command_line(), "started": started,
                 "volcano_version": VOLCANO_VERSION, "config": dict(CONFIG)}
    bench = bool(args.bench_jobs)
    if bench:
        path = args.out / f"bench-{args.bench_jobs}-jobs-{nodes}n.json"
    elif args.running:
        path = args.out / f"running-{nodes}n.json"
    else:
        path = args.out / f"curve-{nodes}n.json"
    m: dict = {}
    res["metrics"] = m
    c = KubeCluster(ClusterSpec(name=f"vccurve{nodes}", workdir=work / "kube", scheduler=False,
                                apiserver_args=apiserver_args({})))
    probe = None
    try:
        try:
            vc, info = _bring_up(c, nodes, work)
            m.update(info)
            probe = Probe(c, vc, nodes, args.threads)
            probe.start()
            if bench:
                b = probe.bench(args.bench_jobs, args.bench_timeout)
                if "figure" in b:
                    res["figure"] = b.pop("figure")
                    res["offsets_s"] = b.pop("offsets_s")
                m["bench"] = b
            elif args.running:
                m["idle"] = probe.idle(args.sessions)
                print(f"{nodes} nodes idle: {m['idle']['per_session']}", flush=True)
                m["running"] = []
                for count in args.running:
                    m["running"].append(probe.running(count, args.sessions))
                    print(f"{nodes} nodes running {count}: {m['running'][-1]['per_session']}", flush=True)
                    evidence.write(path, {**res, "load_avg": {**quiet, "after": evidence.load_avg()}, "sim": {}})
            else:
                m["idle"] = probe.idle(args.sessions)
                print(f"{nodes} nodes idle: {m['idle']['per_session']}", flush=True)
                if args.light_jobs:
                    m["light"] = probe.light(args.light_jobs, args.light_rate)
                    print(f"{nodes} nodes light: {m['light']['per_session']}", flush=True)
                    m["light"]["cleared_s"] = probe.clear_jobs()
                if args.pending:
                    m["fill"] = probe.fill()
                    m["pending"] = []
                    for count in args.pending:
                        if count > nodes * 8:        # the queue's capability is the fleet: the rest stay Pending
                            m["pending_skipped"] = f"{count} one-GPU jobs exceed the fleet's {nodes * 8} GPUs"
                            break
                        m["pending"].append(probe.pending(count, args.sessions))
                        print(f"{nodes} nodes pending {count}: {m['pending'][-1]['per_session']}", flush=True)
                        evidence.write(path, {**res, "load_avg": {**quiet, "after": evidence.load_avg()}, "sim": {}})
        finally:
            if probe is not None:
                probe.stop()
            c.stop()
    except (Exception, KeyboardInterrupt, SystemExit) as e:     # what was measured is kept, with what stopped it
        m["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        if not isinstance(e, Exception):
            _write(path, res, quiet)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _write(path, res, quiet)
    return res


def _write(path: Path, res: dict, quiet: dict) -> None:
    res["load_avg"] = {**quiet, "after": evidence.load_avg()}
    res["sim"] = {}
    evidence.write(path, res)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,2000,5000,10000")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sessions", type=int, default=10, help="sessions measured per phase")
    ap.add_argument("--light-jobs", type=int, default=60, help="0: no light phase")
    ap.add_argument("--light-rate", type=float, default=2.0, help="light jobs created per second")
    ap.add_argument("--pending", default="100,1000", help="pending one-pod jobs on the full fleet, cumulative; "
                                                          "empty: no fill and no pending phase")
    ap.add_argument("--running", default="", help="instead of the light and pending phases: one-pod jobs "
                                                  "that fit, left Running, cumulative counts (e.g. 500,1500)")
    ap.add_argument("--threads", type=int, default=16, help="client threads creating jobs and fill pods")
    ap.add_argument("--bench-jobs", type=int, default=0, help="run the tuning guide's N x 1-pod case instead")
    ap.add_argument("--bench-timeout", type=float, default=3600.0, help="seconds to wait for the last bind")
    ap.add_argument("--quiet-wait", type=float, default=600.0, help="seconds to wait for a 1-minute load <= 1.5")
    args = ap.parse_args(argv)
    args.pending = [int(x) for x in args.pending.split(",") if x]
    args.running = [int(x) for x in args.running.split(",") if x]
    rc = 0
    for n in (int(x) for x in args.sizes.split(",")):
        r = measure(n, args)
        if "error" in r["metrics"]:
            print(f"{n} nodes: {r['metrics']['error']}", flush=True)
            rc = 1
        elif args.bench_jobs:
            print(f"{n} nodes: {args.bench_jobs} jobs x 1 pod: {r.get('figure')} pods/s "
                  f"{r['metrics']['bench'].get('error', '')}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
