"""Real Volcano's vGPU books against the GPU they describe: the same short vGPU jobs on one
fraction-shared GPU, with the fake device plugin re-reporting every --report-s seconds.

    nice -n 19 flock /work/cpu.lock .venv/bin/python tools/volcano/vgpu_books.py --report-s 30 \\
        --out results/gpushare/volcano/books-report30.txt

One node of one H100 in a fraction pool; --jobs single-member jobs of --share (default milli:500,
so two fit the GPU at once), each --duration s long, all submitted at t = 0. vc-scheduler runs at
klog -v=3, so every filter of a pending pod logs the books it reads for the GPU ("Current Device"
... UsedCores, pkg/scheduler/api/devices/nvidia/vgpu/utils.go checkNodeGPUSharingPredicateAndScore).
Written to --out: one JSON line of figures, then a timeline (seconds from the first submit) of the
fake device plugin's reports, every change of the Node (from a watch: each one makes the scheduler
rebuild the node's books), admissions, completions, the cores gangstorm read back as held (the
pods' volcano.sh/vgpu-ids-new) and the cores the scheduler's books held when it last filtered.

What v1.14.1's code predicts (docs/gpu-sharing.md, "## Volcano"): a placed share is booked twice
(Allocate's TryAddPod and the informer's AddPod), a finished one gives one booking back, and the
rest goes only when a Node event rebuilds the books; so between two reports the GPU takes one
GPU's worth of new shares (two 500s) however soon they end, and the last admission comes about
(jobs/2 - 1) x report_s after the first. With correct books a pair would follow every --duration s.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.kube.listwatch import ListWatch  # noqa: E402
from fakes.volcano import vgpu  # noqa: E402
from fakes.volcano.target import RealVolcano  # noqa: E402
from loadgen.model.events import Kind  # noqa: E402
from loadgen.model.fleet import Fleet, NodePool  # noqa: E402
from loadgen.model.gpushare import Sharing  # noqa: E402
from loadgen.model.job import Job  # noqa: E402
from loadgen.model.target import TargetContext  # noqa: E402

# klog header and the V(3) line the filter writes per GPU it looks at
KLOG = re.compile(r"^[IWE](\d{4}) (\d\d:\d\d:\d\d\.\d{6})\s+\d+ \S+\] (.*)$")
BOOKS = re.compile(r'"Current Device" Index=(\d+) TotalMemory=\d+ UsedMemory=(\d+) UsedCores=(\d+) replicate=(\w+)')
REFUSED = "not enough gpu fitted on this node"
NO_ANNOTATION = "has no annotation volcano.sh/devices-to-allocate"


class NodeWatch(ListWatch):
    """Every change of the Node, and what changed: each one makes vc-scheduler rebuild the node's
    vGPU books (cache/event_handlers.go UpdateNode -> SyncNode -> NodeInfo.SetNode)."""

    def __init__(self, api, clock):
        super().__init__("node-watch")
        self.api, self.clock = api, clock
        self.last: dict[str, dict] = {}
        self.changes: list[tuple[float, str]] = []

    def relist(self) -> str:
        body = json.loads(self.api.list_node(_preload_content=False, _request_timeout=(10, 60)).data)
        for item in body["items"]:
            self.last[item["metadata"]["name"]] = item
        return body["metadata"]["resourceVersion"]

    def watch(self, rv: str):
        return self.api.list_node(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=60,
                                  _preload_content=False, _request_timeout=(10, 90))

    def on_event(self, typ: str, obj: dict) -> None:
        name = obj["metadata"]["name"]
        old, self.last[name] = self.last.get(name, {}), obj
        if typ != "MODIFIED" or not old:
            return
        was, cur = old["metadata"].get("annotations", {}), obj["metadata"].get("annotations", {})
        what = [f"{k}={cur.get(k, '')[:40]}" for k in sorted(set(was) | set(cur)) if was.get(k) != cur.get(k)]
        what += [part for part in ("spec", "status") if old.get(part) != obj.get(part)]
        what += ["labels"] if old["metadata"].get("labels") != obj["metadata"].get("labels") else []
        self.changes.append((self.clock(), ", ".join(what) or "resourceVersion only"))


def klog_epoch(mmdd: str, hms: str) -> float:
    """A klog timestamp (local time, no year) as seconds since the epoch."""
    year = datetime.now().year
    return datetime.strptime(f"{year}{mmdd} {hms}", "%Y%m%d %H:%M:%S.%f").timestamp()


def scheduler_log(path: Path, t0_epoch: float) -> tuple[list[tuple[float, int, int]], dict[str, int]]:
    """(t, used cores, used MiB) for every filter reading of the books, and counts of the refusal
    and missing-annotation errors, from vc-scheduler's log."""
    readings, counts = [], {"refused": 0, "no_annotation": 0}
    for line in path.read_text(errors="replace").splitlines():
        m = KLOG.match(line)
        if not m:
            continue
        text = m.group(3)
        counts["refused"] += REFUSED in text
        counts["no_annotation"] += NO_ANNOTATION in text
        b = BOOKS.search(text)
        if b and b.group(4) == "true":
            readings.append((klog_epoch(m.group(1), m.group(2)) - t0_epoch, int(b.group(3)), int(b.group(2))))
    return readings, counts


def timeline(reports, node_changes, events, held, readings) -> list[str]:
    """Merge everything into lines "t  what", collapsing repeated book readings."""
    rows = [(t, 0, "fake device plugin reports") for t in reports]
    rows += [(t, 0, f"Node changed ({what})") for t, what in node_changes]
    for e in events:
        if e.kind in (Kind.ADMITTED, Kind.FINISHED):
            rows.append((e.t, 1, f"job {e.job_id} {e.kind.value}"))
    rows += [(t, 2, f"read back: {cores} cores held") for t, cores in held]
    last = None
    for t, cores, _mib in readings:
        if cores != last:
            rows.append((t, 3, f"scheduler's books: {cores} cores used"))
            last = cores
    return [f"{t:8.2f}  {what}" for t, _, what in sorted(rows)]


def between_reports(times: list[float], reports: list[float]) -> list[int]:
    """Admissions before the first report, between each two reports, and after the last."""
    edges = [float("-inf"), *reports, float("inf")]
    return [sum(lo <= t < hi for t in times) for lo, hi in zip(edges, edges[1:])]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report-s", type=float, default=30.0, help="the fake device plugin's re-report period")
    p.add_argument("--jobs", type=int, default=12)
    p.add_argument("--share", default="milli:500")
    p.add_argument("--duration", type=float, default=2.0, help="seconds each job runs once Ready")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--out", type=Path, help="write the figures and the timeline here (default: stdout)")
    p.add_argument("--keep", action="store_true", help="keep the run directory (vc-scheduler's log) and say where")
    a = p.parse_args()
    fleet = Fleet(nodes=1, gpus_per_node=1, pools=(NodePool("frac", 1, "h100-80gb", Sharing("fraction"), 1),))
    run_dir = Path(tempfile.mkdtemp(prefix="gangstorm-vgpu-books-"))
    ctx = TargetContext(fleet=fleet, seed=1, run_dir=run_dir,
                        config={"schedule_period_s": 0.5, "api_qps": 500, "api_burst": 1000,
                                "vgpu_policy": "binpack", "vgpu_report_s": a.report_s, "log_verbosity": 3},
                        control_plane={"etcd_quota_bytes": 512 * 1024**2})
    target = RealVolcano(ctx)
    try:
        target.start()
        t0, t0_epoch = time.monotonic(), time.time()
        now = lambda: time.monotonic() - t0   # noqa: E731
        reports: list[float] = []
        patch = target.handshake.patch

        def recorded(name, body):
            patch(name, body)
            reports.append(now())
        target.handshake.patch = recorded
        from kubernetes import client
        nodes = NodeWatch(client.CoreV1Api(client.ApiClient(target.api.api_client.configuration)), now)
        nodes.start()
        events = []
        for i in range(1, a.jobs + 1):
            events += target.submit(Job(id=i, tenant="t", queue="q-t", cls="small", members=1, gpus_per_member=1,
                                        duration_s=a.duration, submit_s=0.0, min_available=1, cpus_per_member=1,
                                        share=a.share), now())
        held, last_held = [], None
        while now() < a.timeout:
            events += target.advance(now())
            cores = round(target.slices.state.allocated_compute * vgpu.FULL_CORES)
            if cores != last_held:
                held.append((now(), cores))
                last_held = cores
            if sum(e.kind == Kind.FINISHED for e in events) >= a.jobs:
                break
            time.sleep(0.05)
        nodes.stop()
        readings, counts = scheduler_log(run_dir / "volcano" / "vc-scheduler.log", t0_epoch)
    finally:
        target.stop()
        if a.keep:
            print(f"run directory: {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    admitted = sorted(e.t for e in events if e.kind == Kind.ADMITTED)
    # books the filter read while gangstorm's read-back held nothing: shares no pod holds any more
    idle_books = [c for t, c, _ in readings if next((h for ht, h in reversed(held) if ht <= t), 0) == 0]
    figures = {
        "report_s": a.report_s, "jobs": a.jobs, "share": a.share, "duration_s": a.duration,
        "admitted": len(admitted), "finished": sum(e.kind == Kind.FINISHED for e in events),
        "first_admission_s": round(admitted[0], 2) if admitted else None,
        "last_admission_s": round(admitted[-1], 2) if admitted else None,
        "reports": len(reports), "report_times_s": [round(t, 1) for t in reports],
        "admitted_between_reports": between_reports(admitted, reports),
        "node_changes": len(nodes.changes), "node_change_times_s": [round(t, 1) for t, _ in nodes.changes],
        "admitted_between_node_changes": between_reports(admitted, [t for t, _ in nodes.changes]),
        "filter_readings": len(readings), "max_books_cores": max((c for _, c, _ in readings), default=None),
        "max_books_cores_while_nothing_held": max(idle_books, default=None),
        "max_read_back_cores": max((c for _, c in held), default=None),
        "refused_not_enough_gpu_fitted": counts["refused"], "no_annotation_errors": counts["no_annotation"],
        "volcano": target.figures.get("volcano_version"),
    }
    lines = [json.dumps(figures), "", "timeline (s from the first submit):",
             *timeline(reports, nodes.changes, events, held, readings)]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text)
        print(json.dumps(figures))
    else:
        print(text, end="")
    return 0 if len(admitted) == a.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
