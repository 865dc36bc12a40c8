"""Where the real kube-scheduler puts single pods under DRA, step by step, against the kube twin.

    PYTHONPATH=$PWD .venv/bin/python tools/k8s/dra_placement_probe.py \\
        [--scenario results/gpushare/kube/openb-slice.yaml] [--nodes 2] [--v 10] [--out FILE.json]

Starts the scenario's kube cluster (its scheduler config, `gpu_api: dra`, the fleet cut to --nodes
nodes of its GPU-sharing pool) with kube-scheduler at -v=V, places fakes/kube/placementprobe.py's
SEQUENCE one pod at a time (each waits until bound and its claim booked, or unschedulable), and
reads from the scheduler's log the per-plugin and final node scores of the attempt that bound each
pod ("Plugin scored node for pod", "Calculated node's final score for pod", both at -v=10). The
twin replays the same sequence on the same fleet and configuration; the first step where the two
layouts differ is printed. --out writes the real placements, the scores, the command, the
kube-scheduler version and the load average as JSON (tests/data/kube/dra-probe.json is one).
Everything started is stopped at the end.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.kube import placementprobe as pp  # noqa: E402
from fakes.kube.cluster import merge_cluster_options, require_binaries  # noqa: E402
from fakes.kube.target import RealKube  # noqa: E402
from loadgen.input.scenario import load  # noqa: E402
from loadgen.model.target import TargetContext  # noqa: E402

SCORE = re.compile(r'"(Plugin scored node for pod|Calculated node\'s final score for pod)" pod="[^/"]*/([^"]+)"'
                   r'(?: plugin="([^"]+)")? node="([^"]+)" score=(-?\d+)')


class VerboseKube(RealKube):
    """RealKube whose kube-scheduler logs at -v=`verbosity` (scores are logged at 10)."""
    verbosity = 10

    def cluster_options(self):
        return merge_cluster_options(super().cluster_options(), {"scheduler_args": {"v": str(self.verbosity)}})


def scores_by_pod(log: Path) -> dict[str, dict[str, dict[str, int]]]:
    """Pod name -> node -> {plugin: score, "total": final score}, from its last scored attempt."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    fresh: set[str] = set()
    for line in log.read_text(errors="replace").splitlines():
        m = SCORE.search(line)
        if not m:
            continue
        kind, pod, plugin, node, score = m.groups()
        if kind.startswith("Plugin") and pod not in fresh:
            out[pod] = {}            # a new attempt's scores replace an earlier attempt's
            fresh.add(pod)
        row = out.setdefault(pod, {}).setdefault(node, {})
        row[plugin or "total"] = int(score)
        if not kind.startswith("Plugin"):
            fresh.discard(pod)
    return out


def dumps(doc: dict) -> str:
    """JSON with one top-level key per line and one list item (a step, a placement, a step's
    scores) per line, so that a diff of two recordings reads step by step."""
    rows = []
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], (dict, type(None))):
            items = ",\n".join("  " + json.dumps(v, sort_keys=True) for v in value)
            rows.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            rows.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(rows) + "\n}\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="results/gpushare/kube/openb-slice.yaml")
    p.add_argument("--nodes", type=int, default=pp.PROBE_NODES)
    p.add_argument("--v", type=int, default=10, help="kube-scheduler verbosity (scores need 10)")
    p.add_argument("--out", type=Path, help="write the recorded placements here (JSON)")
    p.add_argument("--run-dir", type=Path, help="keep the cluster's logs here (default: a temporary folder)")
    args = p.parse_args()

    sc = load(args.scenario, overrides={"fleet.nodes": args.nodes})
    fleet = sc.fleet()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="dra-probe-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    ctx = TargetContext(fleet=fleet, config=sc.scheduler_config("kube"), control_plane=sc.section("control_plane"),
                        seed=sc.seed, run_dir=run_dir)
    VerboseKube.verbosity = args.v
    target = VerboseKube(ctx)
    if target.gpu_api != "dra":
        print(f"{args.scenario}: gpu_api resolves to {target.gpu_api!r}, not dra", file=sys.stderr)
        return 2
    names: list[str] = []
    target.start()
    try:
        def show(i, placement, pod):
            names.append(pod)
            where = ("pending" if placement is None
                     else f"{target.node_names[placement.node]} GPU {list(placement.gpus)}")
            print(f"{i:3d} {pp.SEQUENCE[i].text:>18}  {where}", flush=True)
        real = pp.real_placements(target, pp.SEQUENCE, show)
        node_names = list(target.node_names)
    finally:
        target.stop()
    logs = sorted(run_dir.rglob("kube-scheduler.log"))
    scores = scores_by_pod(logs[-1]) if logs else {}
    twin = pp.twin_placements(ctx, pp.SEQUENCE)
    div = pp.first_divergence(pp.SEQUENCE, real, twin, fleet.nodes)
    print("twin and real layouts: " + ("equal at every step" if div is None else
                                       f"first differ after step {div} ({pp.SEQUENCE[div].text}): "
                                       f"real {real[div]}, twin {twin[div]}"))
    if args.out:
        version = subprocess.run([str(require_binaries() / "kube-scheduler"), "--version"], capture_output=True,
                                 text=True).stdout.strip()
        doc = {"command": "PYTHONPATH=$PWD .venv/bin/python tools/k8s/dra_placement_probe.py "
                          f"--scenario {args.scenario} --nodes {args.nodes} --v {args.v} --out {args.out}",
               "kube_scheduler": version,
               "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "load_average": [round(x, 2) for x in os.getloadavg()],
               "fleet": {"nodes": fleet.nodes, "gpus_per_node": fleet.gpus_per_node,
                         "cpus_per_node": fleet.cpus_per_node, "memory_gib_per_node": fleet.memory_gib_per_node},
               "steps": [{"share": s.share, "gpus": s.gpus, "cpus": s.cpus} for s in pp.SEQUENCE],
               "real": [None if r is None else {**r.as_dict(), "node_name": node_names[r.node]} for r in real],
               "scores": [scores.get(n, {}) for n in names],
               "twin_first_divergence": div}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps(doc))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
