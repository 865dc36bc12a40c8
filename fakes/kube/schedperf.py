"""kube-scheduler's own benchmark (scheduler_perf) run on this machine, as evidence for the kube twin.

    python -m fakes.kube.schedperf --workloads 500Nodes,5000Nodes_10000Pods [--out results/fidelity-scale/kube]

`make scheduler-perf` builds the benchmark's test binary from the pinned k8s.io/kubernetes module
(tools/k8s/build-scheduler-perf.sh). Each workload of tools/k8s/scheduler-perf/performance-config.yaml
(upstream's SchedulingBasic at 500 / 2,000 / 5,000 / 10,000 nodes) runs as

    scheduler_perf.test -test.run='^$' -test.bench='BenchmarkPerfScheduling/SchedulingBasic/<workload>$'
        -test.benchtime=1ns -data-items-dir DIR -perf-scheduling-label-filter=

in a run directory laid out the way the binary expects (misc/performance-config.yaml, ../templates
linked to the module's own templates), with the project's etcd on PATH. The benchmark starts its own
etcd (on a unix socket in the run directory: KUBE_INTEGRATION_ETCD_URL points at a closed port so it
never reuses another etcd) and an in-process apiserver and scheduler; the whole session is stopped
afterwards (fakes/real/procs.py).

What it writes, results/fidelity-scale/kube/bench-<workload>.json: the benchmark's own figure
(SchedulingThroughput Average: pods bound per second, the mean of one-second samples), its per-second
samples, the scheduler's histograms it collected (algorithm, attempt, every extension point: Average
in ms) and the nodes each measured pod's cycle evaluated and found feasible (kube-scheduler's
"Successfully bound pod to node" log line at -v=2: evaluatedNodes, feasibleNodes).
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from fakes.kube import evidence
from fakes.kube.cluster import default_bin_dir
from fakes.real import procfs, procs

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tools/k8s/scheduler-perf/performance-config.yaml"
KUBE_VERSION = os.environ.get("KUBE_VERSION", "v1.36.1")
BINARY = "scheduler_perf.test"
OUT = REPO / "results/fidelity-scale/kube"
_BELOW_THRESHOLD = re.compile(r'expected "?SchedulingThroughput"? "?\w+"? to be higher: got [\d.]+, want [\d.]+')
_BOUND_AT = re.compile(r'^I(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+) .*"Successfully bound pod to node" pod="([^/"]+)/', re.M)
GO_ENV = ("GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG")
SAMPLE_S = 0.1          # CPU readings during a run, to find the cores used while the measured pods bound
_BOUND = re.compile(r'"Successfully bound pod to node" pod="([^/"]+)/[^"]+" node="[^"]*" '
                    r'evaluatedNodes=(\d+) feasibleNodes=(\d+)')


def module_dir() -> Path:
    gopath = os.environ.get("GOMODCACHE") or str(Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg/mod")
    return Path(gopath) / f"k8s.io/kubernetes@{KUBE_VERSION}/test/integration/scheduler_perf"


def binary() -> Path:
    path = default_bin_dir() / BINARY
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} missing: run `make scheduler-perf` (builds it from k8s.io/kubernetes "
                                f"{KUBE_VERSION})")
    return path


def argv(workload: str, items: Path) -> list[str]:
    return [str(binary()), "-test.run=^$", f"-test.bench=BenchmarkPerfScheduling/SchedulingBasic/{workload}$",
            "-test.benchtime=1ns", f"-data-items-dir={items}", "-perf-scheduling-label-filter="]


def _layout(work: Path) -> Path:
    """work/misc/performance-config.yaml (ours) and work/templates -> the module's templates."""
    misc = work / "misc"
    misc.mkdir(parents=True)
    shutil.copy(CONFIG, misc / "performance-config.yaml")
    (work / "templates").symlink_to(module_dir() / "templates")
    return misc


def run(workload: str, timeout_s: float = 1800.0, keep: Path | None = None) -> dict:
    """One workload; returns its figures (raises on a failed benchmark, with the log's tail)."""
    work = Path(tempfile.mkdtemp(prefix=f"gangstorm-schedperf-{workload}-"))
    try:
        cwd = _layout(work)
        items, tmp = work / "items", work / "tmp"
        tmp.mkdir()
        log = work / "benchmark.log"
        env = {**os.environ, "PATH": f"{default_bin_dir()}:{os.environ.get('PATH', '')}", "TMPDIR": str(tmp),
               "KUBE_INTEGRATION_ETCD_URL": f"http://127.0.0.1:{procs.free_port()}"}
        t0, busy0, ours0 = time.monotonic(), evidence.machine_busy_s(), evidence.children_cpu_s()
        proc = procs.spawn(argv(workload, items), log=log, env=env, cwd=cwd)
        sampler = CpuSampler(proc.pid)
        try:
            rc = proc.wait(timeout=timeout_s)
        finally:
            sampler.stop()
            procs.stop(proc.pid)
        wall = time.monotonic() - t0
        ours, busy = evidence.children_cpu_s() - ours0, evidence.machine_busy_s() - busy0
        text = log.read_text(errors="replace")
        files = glob.glob(str(items / "*.json"))
        below = _BELOW_THRESHOLD.search(text)
        if not files or (rc != 0 and not below):
            kept = Path(tempfile.gettempdir()) / f"schedperf-{workload}-failed.log"
            shutil.copy(log, kept)
            raise RuntimeError(f"scheduler_perf {workload} failed (exit {rc}); log: {kept}; tail:\n{text[-2000:]}")
        out = parse(json.loads(Path(files[0]).read_text()), text)
        out["wall_s"] = round(wall, 1)
        # how much of the machine others used meanwhile: a saturated benchmark on 2 shared cores
        # loses throughput to any other process, so every run says how contended it was
        out["cpu"] = {"benchmark_s": round(ours, 1), "machine_s": round(busy, 1),
                      "benchmark_cores": round(ours / wall, 2),
                      "others_cores": round(max(busy - ours, 0.0) / wall, 2)}
        # the window in which the measured pods bound: the benchmark's throughput is what the cores
        # it had then allow, so the CPU a pod cost there is what the twin's shared cores need
        times = bound_times(text, out["measured_namespace"])
        if times:
            out["cpu"]["window"] = window_cpu(sampler.samples, times[0], times[-1], len(times))
        if below:       # the run is complete; only the CI floor in the config failed
            out["below_threshold"] = below.group(0)
        # the throughput collector's progress: elapsed s, attempts, scheduled (scheduler), observed, rate
        out["samples"] = [[float(x.rstrip("s")) for x in line.split()[:1]] + [float(x) for x in line.split()[1:]]
                          for d in glob.glob(str(items / "*.dat"))
                          for line in Path(d).read_text().splitlines() if line.strip()]
        if keep is not None:
            shutil.copy(log, keep)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


class CpuSampler:
    """Every SAMPLE_S: (wall clock, CPU seconds of the benchmark's session, the machine's busy CPU seconds)."""

    def __init__(self, pid: int):
        self.pid, self.samples, self._done = pid, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            cpu = sum(v for v in (procfs.cpu_seconds(p) for p in procs.session_pids(self.pid)) if v)
            self.samples.append((time.time(), cpu, evidence.machine_busy_s()))
            self._done.wait(SAMPLE_S)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5.0)


def bound_times(log: str, namespace: str | None, year: int | None = None) -> list[float]:
    """Epoch seconds of kube-scheduler's "Successfully bound pod to node" lines for the pods of
    `namespace` (klog's header: Lmmdd hh:mm:ss.uuuuuu, UTC on this machine), in order."""
    year = year or dt.datetime.now(dt.UTC).year
    def epoch(mo: str, day: str, hms: str) -> float:
        return dt.datetime.strptime(f"{year}{mo}{day} {hms}", "%Y%m%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()
    return sorted(epoch(mo, day, hms) for mo, day, hms, ns in _BOUND_AT.findall(log) if ns == namespace)


def window_cpu(samples: list[tuple[float, float, float]], t0: float, t1: float, pods: int) -> dict | None:
    """Cores the benchmark and the machine used between the readings nearest t0 and t1, and the
    benchmark's CPU per pod bound there; None when the window holds no two readings."""
    if len(samples) < 2 or pods < 1:
        return None
    first = min(samples, key=lambda s: abs(s[0] - t0))
    last = min(samples, key=lambda s: abs(s[0] - t1))
    wall = last[0] - first[0]
    if wall <= 0:
        return None
    return {"seconds": round(wall, 2), "pods": pods, "pods_per_s": round(pods / (t1 - t0), 1) if t1 > t0 else None,
            "benchmark_cores": round((last[1] - first[1]) / wall, 3),
            "machine_cores": round((last[2] - first[2]) / wall, 3),
            "cpu_ms_per_pod": round((last[1] - first[1]) / pods * 1000.0, 3)}


def parse(data_items: dict, log: str) -> dict:
    """The benchmark's data items and log, condensed (Average in ms for histograms)."""
    hist: dict[str, dict] = {}
    throughput, namespace = {}, None
    for item in data_items["dataItems"]:
        labels, data = item["labels"], item["data"]
        metric = labels.get("Metric")
        if metric == "SchedulingThroughput":
            throughput = data
            namespace = labels.get("Name", "").rsplit("/", 1)[-1]
        elif item.get("unit") == "ms":
            key = metric.removeprefix("scheduler_").removesuffix("_seconds")
            sub = ",".join(labels[k] for k in ("plugin", "extension_point", "result")
                           if labels.get(k, "not applicable") != "not applicable")
            if sub:
                key = f"{key}{{{sub}}}"
            hist[key] = {k: round(v, 4) for k, v in data.items()}
        elif metric == "SchedulingDuration":
            hist["scheduling_duration_s"] = data.get("Duration")
    evaluated, feasible = [], []
    for ns, ev, fe in _BOUND.findall(log):
        if ns == namespace:
            evaluated.append(int(ev))
            feasible.append(int(fe))
    nodes = {}
    if evaluated:
        nodes = {"pods": len(evaluated), "evaluated_mean": round(statistics.fmean(evaluated), 2),
                 "evaluated_max": max(evaluated), "feasible_mean": round(statistics.fmean(feasible), 2),
                 "feasible_min": min(feasible)}
    return {"throughput": {k: round(v, 2) for k, v in throughput.items()}, "histograms_ms": hist,
            "measured_namespace": namespace, "nodes_per_cycle": nodes}


def params(workload: str) -> dict:
    """initNodes, initPods, measurePods of a workload in our config."""
    import yaml
    for case in yaml.safe_load(CONFIG.read_text()):
        for w in case["workloads"]:
            if w["name"] == workload:
                return dict(w["params"])
    raise KeyError(f"no workload {workload!r} in {CONFIG}")


def serial_cycle_ms(hist: dict) -> float | None:
    """The scheduling loop's serial part per pod: the algorithm (snapshot, PreFilter, Filter,
    PostFilter, PreScore, Score, host selection) plus Reserve and Permit; PreBind, Bind and PostBind
    run in the asynchronous binding cycle and are not part of it."""
    alg = hist.get("scheduling_algorithm_duration", {}).get("Average")
    if alg is None:
        return None
    return round(alg + sum(hist.get(f"framework_extension_point_duration{{{p}}}", {}).get("Average", 0.0)
                           for p in ("Reserve", "Permit")), 4)


def bench(workload: str, out_dir: Path = OUT, runs: int = 1) -> dict:
    """Run a workload `runs` times (median figure) and write bench-<workload>.json."""
    quiet = evidence.wait_for_quiet()
    started = evidence.started()
    results = [run(workload) for _ in range(runs)]
    figures = [r["throughput"].get("Average") for r in results if r["throughput"].get("Average")]
    best = sorted(results, key=lambda r: r["throughput"].get("Average", 0))[len(results) // 2]
    p = params(workload)
    doc = {
        "benchmark": f"scheduler_perf SchedulingBasic/{workload}",
        "scheduler": "kube", "nodes": p["initNodes"], "params": p,
        "figure": statistics.median(figures) if figures else None, "unit": "pods/s",
        "figure_is": "SchedulingThroughput Average (mean of 1-s samples of pods bound), median over runs",
        "runs": [r["throughput"].get("Average") for r in results],
        "runs_others_cores": [r["cpu"]["others_cores"] for r in results],
        # cores the benchmark itself used over its whole run (setup included): near 2, the machine
        # rather than the scheduler may have been its limit
        "runs_benchmark_cores": [r["cpu"]["benchmark_cores"] for r in results],
        # while the measured pods bound: the cores the benchmark used and the CPU each pod cost it
        # (its apiserver, etcd, client and scheduler together; fakes/sim/cores.py)
        "runs_window": [r["cpu"].get("window") for r in results],
        "command": evidence.command_line(), "started": started,
        # the Go runtime's settings the benchmark ran with, when the environment set any (GOGC=off:
        # no garbage collection, what the collector costs a pod)
        **({"go_env": go_env} if (go_env := {k: os.environ[k] for k in GO_ENV if k in os.environ}) else {}),
        "load_avg": {**quiet, "after": evidence.load_avg()},
        "binary": f"k8s.io/kubernetes {KUBE_VERSION} test/integration/scheduler_perf/misc (make scheduler-perf)",
        "config": str(CONFIG.relative_to(REPO)),
        "serial_cycle_ms": serial_cycle_ms(best["histograms_ms"]),
        **{k: best[k] for k in ("throughput", "histograms_ms", "nodes_per_cycle", "wall_s", "samples") if k in best},
        **({"below_threshold": [r["below_threshold"] for r in results if "below_threshold" in r]}
           if any("below_threshold" in r for r in results) else {}),
    }
    evidence.write(out_dir / f"bench-{workload}.json", doc)
    return doc


def main(argv_: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="500Nodes,5000Nodes_10000Pods")
    ap.add_argument("--runs", type=int, default=1, help="runs per workload; the figure is their median")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv_)
    for w in args.workloads.split(","):
        doc = bench(w, args.out, args.runs)
        print(f"{doc['benchmark']}: {doc['figure']} pods/s (runs {doc['runs']}), serial cycle "
              f"{doc['serial_cycle_ms']} ms, nodes per cycle {doc['nodes_per_cycle']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
