"""kube-scheduler's cost curve at 500 / 2,000 / 5,000 / 10,000 nodes, read off its own metrics.

    python -m fakes.kube.costcurve --sizes 500,2000,5000,10000 --out results/fidelity-scale/kube [--perf]

Per size, on the project's KWOK stack (fakes/kube/cluster.py: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler v1.36.1 at -v=2 and kwok, all on 127.0.0.1):

1. Register the fleet (8-GPU KWOK nodes) and wait until every node is Ready.
2. Light phase: `--light-pods` one-GPU pods created one at a time at `--light-rate` per second,
   a load at which this machine is not the limit. The scheduler's histograms are scraped before and
   after; their differences give, per scheduling attempt, the algorithm
   (scheduler_scheduling_algorithm_duration_seconds), each extension point
   (scheduler_framework_extension_point_duration_seconds: Filter and Score of the serial cycle,
   Bind of the asynchronous binding cycle), the whole attempt (which in 1.36 ends with the bind),
   and the client limiter's wait (rest_client_rate_limiter_duration_seconds); the apiserver's
   POST pods/binding latency; and, from the scheduler's "Successfully bound pod to node" log lines,
   the nodes each cycle evaluated and found feasible (numFeasibleNodesToFind in action).
3. Burst phase: `--burst-pods` pods created as fast as `--threads` client threads can; the
   created and bound rates, the scheduler's activeQ depth sampled every second, and the same
   histograms say which side limits binds per second: the creates (the generator or the
   apiserver's create path), the scheduling cycle, the client limiter or the binds. Beside them,
   the CPU this process spent per create while the creates ran (the creates, its pod watch and
   the activeQ sampler: the generator's side) and the cores the apiserver, etcd and kube-scheduler
   used meanwhile.
Before the phases, 20 s with nothing to schedule give the stack's own load (`idle_cores`: the
machine's and each component's: KWOK's node heartbeats and the apiserver and etcd answering them),
and the light phase records the same (`cores`): the CPU the measured cycles share the cores with.

Pods are created through `--client new` (fakes/kube/poster.py, what the adapters use: encoded
bodies on kept-alive connections) or `old` (the official Python client, which opened a TLS
connection per create; the curve files up to 2026-12-05 were measured with it). `--burst-only`
skips the light phase and writes burst-<nodes>n-<client>.json instead of the curve file, so the
light-phase figures the calibration reads stay as they were.

kube-scheduler runs with clientConnection qps/burst `--qps` (default 5000, scheduler_perf's) so
the limiter does not cut the burst short; the project's default (50) caps binds at 50/s by
configuration. With --perf each size also runs scheduler_perf's SchedulingBasic at that node count
(fakes/kube/schedperf.py) and keeps its figures beside the KWOK stack's.

Writes results/fidelity-scale/kube/curve-<nodes>n.json: {"scheduler", "nodes", "command",
"started", "load_avg", "metrics": {"kwok": ..., "scheduler_perf": ...}, "sim": {}}; "sim" is filled
by the comparison step (python -m loadgen.calibration.kube_curve). Every process started is
stopped at the end, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fakes.kube import evidence, metrics, schedperf
from fakes.kube.cluster import ClusterSpec, KubeCluster, get_text, ready_nodes
from fakes.kube.family.cluster import apiserver_args
from fakes.kube.pods import GPU, PodView, PodWatch, pod_spec
from fakes.kube.poster import JsonPoster, encode, pods_path
from fakes.real.procfs import cpu_seconds
from loadgen.model.fleet import Fleet

OUT = schedperf.OUT
NS = "curve"
PERF_WORKLOAD = {500: "500Nodes", 2000: "2000Nodes", 5000: "5000Nodes_10000Pods", 10000: "10000Nodes_10000Pods"}
_BOUND = re.compile(r'"Successfully bound pod to node" pod="' + NS + r'/([^"]+)" node="[^"]*" '
                    r'evaluatedNodes=(\d+) feasibleNodes=(\d+)')


# --- the scheduler's and apiserver's histograms, as (sum, count) ----------------------------------
def scheduler_series(text: str) -> dict[str, tuple[float, float]]:
    m = metrics.parse(text, (metrics.ALGORITHM, metrics.EXTENSION, "scheduler_scheduling_attempt_duration_seconds",
                             "scheduler_pod_scheduling_sli_duration_seconds", "scheduler_schedule_attempts_total",
                             "rest_client_rate_limiter_duration_seconds", "rest_client_request_duration_seconds"))

    def hist(name: str, **match) -> tuple[float, float]:
        return (metrics.total(m.get(name + "_sum", []), **match), metrics.total(m.get(name + "_count", []), **match))

    out = {"algorithm": hist(metrics.ALGORITHM),
           "attempt_scheduled": hist("scheduler_scheduling_attempt_duration_seconds", result="scheduled"),
           "sli": hist("scheduler_pod_scheduling_sli_duration_seconds"),
           "client_limiter": hist("rest_client_rate_limiter_duration_seconds"),
           "client_post": hist("rest_client_request_duration_seconds", verb="POST")}
    for p in metrics.CYCLE_POINTS + metrics.BINDING_POINTS:
        out[f"ep_{p}"] = hist(metrics.EXTENSION, extension_point=p)
    for r in ("scheduled", "unschedulable", "error"):
        out[f"attempts_{r}"] = (metrics.total(m.get("scheduler_schedule_attempts_total", []), result=r), 1.0)
    return out


def apiserver_series(text: str) -> dict[str, tuple[float, float]]:
    m = metrics.parse(text, ("apiserver_request_duration_seconds",))
    out = {}
    for key, (verb, resource, sub) in (("bind", ("POST", "pods", "binding")), ("create", ("POST", "pods", ""))):
        match = {"verb": verb, "resource": resource, "subresource": sub}
        out[key] = (metrics.total(m.get("apiserver_request_duration_seconds_sum", []), **match),
                    metrics.total(m.get("apiserver_request_duration_seconds_count", []), **match))
    return out


def means_ms(before: dict, after: dict) -> dict:
    """Mean per observation (ms) of each histogram over the interval; counters as differences."""
    out = {}
    for k, (s1, c1) in after.items():
        s0, c0 = before.get(k, (0.0, 0.0))
        if k.startswith("attempts_"):
            out[k] = int(s1 - s0)
        elif c1 - c0 > 0:
            out[k] = round((s1 - s0) / (c1 - c0) * 1000.0, 4)
            out[k + "_n"] = int(c1 - c0)
    return out


def serial_cycle(m: dict) -> float | None:
    points = {p: m.get(f"ep_{p}") for p in metrics.CYCLE_POINTS}
    return metrics.serial_cycle_ms(m.get("algorithm"), points)


IDLE_S = 20.0       # seconds of the idle reading before the phases


# --- one size ---------------------------------------------------------------------------------------
class Probe:
    """A KWOK cluster of `nodes` nodes, a pod watch, scrapes and the two load phases."""

    def __init__(self, cluster: KubeCluster, nodes: int, client: str = "new"):
        from kubernetes import client as k8s
        self.cluster, self.nodes = cluster, nodes
        self.api = k8s.CoreV1Api(cluster.api_client(32))
        self.poster = JsonPoster(cluster.api_client(32)) if client == "new" else None
        self.admin = cluster.api_client(2)
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self.watch: PodWatch | None = None

    def scrape(self) -> tuple[dict, dict]:
        text = metrics.fetch(self.cluster.scheduler_metrics_url, lambda t: {"text": t}).get("text", "")
        return scheduler_series(text), apiserver_series(get_text(self.admin, "/metrics", timeout=30))

    def pending_active(self) -> float:
        text = metrics.fetch(self.cluster.scheduler_metrics_url, lambda t: {"text": t}).get("text", "")
        return metrics.total(metrics.parse(text, ("scheduler_pending_pods",)).get("scheduler_pending_pods", []),
                             queue="active")

    def start_watch(self) -> None:
        from kubernetes import client as k8s
        self.api.create_namespace({"metadata": {"name": NS}}, _preload_content=False)

        def seen(t: float, typ: str, pod: PodView) -> None:
            if pod.node and typ != "DELETED":
                with self.lock:
                    self.bound.setdefault(pod.name, t)

        self.watch = PodWatch(k8s.CoreV1Api(self.cluster.api_client(2)), NS, seen, time.monotonic)
        self.watch.start()
        time.sleep(1.0)

    def create(self, name: str) -> float:
        body = {"metadata": {"name": name}, "spec": pod_spec({GPU: "1", "cpu": "1", "memory": "1Gi"})}
        t = time.monotonic()
        if self.poster is not None:
            self.poster.post(pods_path(NS), encode(body), timeout=(10, 60))
        else:
            self.api.create_namespaced_pod(NS, body, _preload_content=False, _request_timeout=(10, 60))
        return t

    def wait_bound(self, names: list[str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if all(n in self.bound for n in names):
                    return True
            if self.watch is not None and self.watch.error is not None:
                raise RuntimeError(f"pod watch failed: {self.watch.error!r}")
            time.sleep(0.2)
        return False

    def cpu(self) -> tuple[float, dict[str, float]]:
        """(now, CPU seconds so far) of the machine and of each component the cluster runs."""
        return time.monotonic(), {"machine": evidence.machine_busy_s(),
                                  **{n: cpu_seconds(p) or 0.0 for n, p in self.cluster.pids().items()}}

    def light(self, pods: int, rate: float) -> dict:
        names = [f"light-{i}" for i in range(pods)]
        s0, a0 = self.scrape()
        cpu0 = self.cpu()
        t0 = time.monotonic()
        sent = {}
        for i, name in enumerate(names):
            time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            sent[name] = self.create(name)
        ok = self.wait_bound(names, 300)
        time.sleep(2.0)                         # the last binding cycles end and are observed
        cores = evidence.cores_between(cpu0, self.cpu())
        s1, a1 = self.scrape()
        sched, api = means_ms(s0, s1), means_ms(a0, a1)
        with self.lock:
            lat = [self.bound[n] - sent[n] for n in names if n in self.bound]
        return {"pods": pods, "rate_per_s": rate, "all_bound": ok, "scheduler_ms": sched,
                "serial_cycle_ms": serial_cycle(sched),
                "apiserver_ms": {"bind": api.get("bind"), "create": api.get("create")},
                "client_create_to_bound_s": metrics.quantiles(lat), "cores": cores}

    def burst(self, pods: int, threads: int) -> dict:
        names = [f"burst-{i}" for i in range(pods)]
        s0, a0 = self.scrape()
        depth: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                depth.append(self.pending_active())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        pids = self.cluster.pids()
        pids = {n: pids[n] for n in ("kube-apiserver", "etcd", "kube-scheduler") if n in pids}
        c0 = {n: cpu_seconds(p) or 0.0 for n, p in pids.items()}
        p0 = time.process_time()
        t0 = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(self.create, names))
        created_s = time.monotonic() - t0
        gen_cpu = time.process_time() - p0
        cores = {n: round(((cpu_seconds(p) or 0.0) - c0[n]) / created_s, 3) for n, p in pids.items()}
        ok = self.wait_bound(names, 900)
        stop.set()
        sampler.join()
        s1, a1 = self.scrape()
        with self.lock:
            last = max(self.bound[n] for n in names if n in self.bound)
            done = sum(1 for n in names if n in self.bound)
        sched, api = means_ms(s0, s1), means_ms(a0, a1)
        out = {"pods": pods, "threads": threads, "all_bound": ok,
               "created_per_s": round(pods / created_s, 1), "bound_per_s": round(done / (last - t0), 1),
               "active_queue_max": max(depth, default=0.0),
               "active_queue_mean": round(statistics.fmean(depth), 1) if depth else 0.0,
               "scheduler_ms": sched, "serial_cycle_ms": serial_cycle(sched),
               "apiserver_ms": {"bind": api.get("bind"), "create": api.get("create")},
               "client": "old" if self.poster is None else "new",
               "generator_cpu_ms_per_create": round(gen_cpu / pods * 1000.0, 3),
               "cores_while_creating": {**cores, "generator": round(gen_cpu / created_s, 3)}}
        out["limited_by"] = limiting_side(out)
        return out

    def evaluated(self) -> dict:
        """Nodes each light-phase cycle evaluated and found feasible (the scheduler's V(2) log)."""
        log = self.cluster.cluster_dir / "logs" / "kube-scheduler.log"
        ev, fe = [], []
        text = log.read_text(errors="replace") if log.exists() else ""
        for name, e, f in _BOUND.findall(text):
            if name.startswith("light-"):
                ev.append(int(e))
                fe.append(int(f))
        if not ev:
            return {"pods": 0, "note": f"no 'Successfully bound' lines in {log} (kube-scheduler below -v=2?)"}
        return {"pods": len(ev), "evaluated_mean": round(statistics.fmean(ev), 2), "evaluated_max": max(ev),
                "feasible_mean": round(statistics.fmean(fe), 2), "feasible_min": min(fe)}


def limiting_side(b: dict) -> str:
    """Which side held binds per second in a burst, from what the components report:
    binds keep pace with creates and the activeQ stays short: the creates; a standing activeQ with the
    loop busy (serial cycle x bind rate near 1): the scheduling cycle; a long client-limiter wait: the
    limiter; otherwise the binding path (apiserver write latency)."""
    cyc = b.get("serial_cycle_ms") or 0.0
    busy = cyc / 1000.0 * b["bound_per_s"]
    limiter = b["scheduler_ms"].get("client_limiter") or 0.0
    if b["bound_per_s"] >= 0.9 * b["created_per_s"] and b["active_queue_max"] < 0.1 * b["pods"]:
        return (f"creates: binds kept pace ({b['bound_per_s']}/s vs {b['created_per_s']}/s created), "
                f"activeQ peak {b['active_queue_max']:.0f}")
    if busy > 0.7:
        return f"scheduling cycle: {cyc:.2f} ms x {b['bound_per_s']}/s = {busy:.0%} of the loop busy"
    if limiter > 10.0:
        return f"client limiter: {limiter:.1f} ms mean wait per request"
    return (f"binding path: loop {busy:.0%} busy, activeQ peak {b['active_queue_max']:.0f}, bind "
            f"{b['apiserver_ms'].get('bind')} ms at the apiserver")


def measure(nodes: int, args: argparse.Namespace) -> dict:
    from fakes.kube.target import scheduler_config
    quiet = evidence.wait_for_quiet(max_wait_s=args.max_wait_s)
    started = evidence.started()
    work = Path(tempfile.mkdtemp(prefix=f"gangstorm-kube-curve-{nodes}-"))
    cfg = scheduler_config({"api_qps": args.qps, "api_burst": int(args.qps)})
    spec = ClusterSpec(name=f"curve{nodes}", workdir=work, scheduler_config=cfg, scheduler_args={"v": "2"},
                       apiserver_args=apiserver_args({}))     # the real backend's, scenario defaults
    res: dict = {"scheduler": "kube", "nodes": nodes, "command": evidence.command_line(), "started": started,
                 "client": args.client}
    try:
        kw = _measure(spec, nodes, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["metrics"] = {"kwok": kw}
    res["load_avg"] = {**quiet, "after": evidence.load_avg()}
    if args.burst_only:
        evidence.write(args.out / f"burst-{nodes}n-{args.client}.json", res)
        return res
    res["sim"] = {}
    path = evidence.write(args.out / f"curve-{nodes}n.json", res)       # kept even if the benchmark fails
    if args.perf and nodes in PERF_WORKLOAD:
        try:
            res["metrics"]["scheduler_perf"] = schedperf.bench(PERF_WORKLOAD[nodes], args.out, args.perf_runs)
        except RuntimeError as e:
            res["metrics"]["scheduler_perf"] = {"error": str(e)[:500]}
        evidence.write(path, res)
    return res


def _measure(spec: ClusterSpec, nodes: int, args: argparse.Namespace) -> dict:
    with KubeCluster(spec) as c:
        probe = Probe(c, nodes, args.client)
        fleet = Fleet(nodes=nodes)
        kw: dict = {"scheduler_client_qps": args.qps, "cluster_start_s": round(c.started_s, 1)}
        kw["nodes_register_s"] = round(c.create_nodes(fleet, threads=16), 1)
        t0 = time.monotonic()
        while ready_nodes(probe.api) < nodes:
            if time.monotonic() - t0 > 1500:
                raise TimeoutError(f"{nodes} nodes not Ready after 1500 s")
            time.sleep(3)
        kw["nodes_ready_s"] = round(time.monotonic() - t0, 1)
        time.sleep(10)                            # taints lifted, node informers settled
        probe.start_watch()
        # the stack's own load with no pod to schedule (node heartbeats and leases): what every
        # measured cycle shares the two cores with
        before = probe.cpu()
        time.sleep(IDLE_S)
        kw["idle_cores"] = evidence.cores_between(before, probe.cpu())
        light = 0 if args.burst_only else args.light_pods
        if light:
            kw["light"] = probe.light(light, args.light_rate)
            kw["light"]["nodes_per_cycle"] = probe.evaluated()
        if args.burst_pods:
            kw["burst"] = probe.burst(min(args.burst_pods, nodes * 8 - light), args.threads)
        if probe.watch:
            probe.watch.stop()
    return kw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,2000,5000,10000")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--light-pods", type=int, default=300)
    ap.add_argument("--light-rate", type=float, default=5.0, help="pods created per second in the light phase")
    ap.add_argument("--burst-pods", type=int, default=2000, help="0: no burst phase")
    ap.add_argument("--threads", type=int, default=16, help="client threads creating the burst")
    ap.add_argument("--qps", type=float, default=5000.0, help="kube-scheduler clientConnection qps and burst")
    ap.add_argument("--client", choices=("new", "old"), default="new",
                    help="create path: new (fakes/kube/poster.py, the adapters') or old (the Python client)")
    ap.add_argument("--max-wait-s", type=float, default=600.0,
                    help="wait at most this long for a quiet machine (1-min load <= 1.5) before each size")
    ap.add_argument("--burst-only", action="store_true",
                    help="no light phase; writes burst-<nodes>n-<client>.json, the curve files stay as they are")
    ap.add_argument("--perf", action="store_true", help="also run scheduler_perf SchedulingBasic at each size")
    ap.add_argument("--perf-runs", type=int, default=3,
                    help="scheduler_perf runs per size (the figure is their median)")
    args = ap.parse_args(argv)
    for n in (int(x) for x in args.sizes.split(",")):
        r = measure(n, args)
        kw = r["metrics"]["kwok"]
        print(f"{n} nodes: serial cycle {kw.get('light', {}).get('serial_cycle_ms')} ms (light), nodes/cycle "
              f"{kw.get('light', {}).get('nodes_per_cycle')}, burst {kw.get('burst', {}).get('bound_per_s')} binds/s "
              f"({kw.get('burst', {}).get('limited_by')})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
