"""Does the kube twin examine the nodes kube-scheduler does in a steady run? One real run of a
scenario on the KWOK stack with kube-scheduler at -v=2, whose "Successfully bound pod to node" lines
carry evaluatedNodes and feasibleNodes for every pod, against the twin's nodes examined and scored on
the same wall-clock plan; with the run's Filter and Score means, the cost per node examined and
per node scored in that run, and what a node Filter rejects costs beyond one it passes (the
profile's cycle_per_node_us, measured on an empty fleet where every node passes, for the passing
ones): kube.filter_fail_us, which --write-profile sets. It starts the real backend (a few minutes at
500 nodes); --from-file reads a run it measured before.

    PYTHONPATH=. python tools/kube/evaluated_nodes.py --nodes 500 \
        --out results/fidelity-scale/kube/evaluated-steady-500n
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import sys
from pathlib import Path

import fakes.kube.family.cluster as family_cluster
from fakes.kube.cluster import ClusterSpec
from loadgen.calibration.kube_spread import write_profile
from loadgen.calibration.twin import real_run, twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile

BOUND = re.compile(r'"Successfully bound pod to node" .*?evaluatedNodes=(\d+) feasibleNodes=(\d+)')


def verbose_spec(*args, **kwargs) -> ClusterSpec:
    """The run's cluster, with kube-scheduler logging each bind's evaluated and feasible nodes."""
    kwargs["scheduler_args"] = {**kwargs.get("scheduler_args", {}), "v": "2"}
    return ClusterSpec(*args, **kwargs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="scenarios/calibrate-steady.yaml")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--churn", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--from-file", action="store_true", help="read --out/evaluated.json instead of running")
    ap.add_argument("--write-profile", type=Path, help="set this profile file's kube.filter_fail_us")
    args = ap.parse_args()
    if args.from_file:
        doc = json.loads((args.out / "evaluated.json").read_text())
    else:
        doc = measure(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "evaluated.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    extra = fail_extra_us(doc, load_profile("local").params["kube"]["cycle_per_node_us"].value)
    print(f"kube.filter_fail_us = {extra}")
    if args.write_profile:
        r = doc["real"]
        source = (f"kube-scheduler v1.36.1 on this machine's KWOK stack at -v=2, one real run of "
                  f"{Path(doc['scenario']).name} at {doc['nodes']:,} nodes ({doc['pods_bound']} pods bound; "
                  f"results/fidelity-scale/kube/evaluated-steady-{doc['nodes']}n/evaluated.json): "
                  f"(scheduler_framework_extension_point_duration_seconds{{Filter}} mean {r['filter_ms']} ms "
                  f"- cycle_per_node_us x evaluatedNodes {r['evaluated_mean']}) / (evaluatedNodes - feasibleNodes "
                  f"{r['feasible_mean']})")
        write_profile(args.write_profile, extra, source, doc["command"] + " --write-profile "
                      + str(args.write_profile), key="filter_fail_us", unit="us")
    return 0


def fail_extra_us(doc: dict, passing_us: float) -> float:
    """What each rejected node cost beyond a passing one, from the run's Filter mean and node counts."""
    r = doc["real"]
    rejected = r["evaluated_mean"] - r["feasible_mean"]
    return round(max(r["filter_ms"] * 1000 - passing_us * r["evaluated_mean"], 0.0) / rejected, 4)


def measure(args: argparse.Namespace) -> dict:
    family_cluster.ClusterSpec = verbose_spec
    sc = load_with_overrides(args.scenario, profile="local", nodes=args.nodes, churn=args.churn)
    run_dir = args.out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    real = real_run(sc, "kube", run_dir, args.time_scale)["schedulers"]["kube"]
    logs = sorted(run_dir.glob("**/kube-scheduler.log"))
    pairs = [(int(e), int(f)) for e, f in BOUND.findall(logs[0].read_text(errors="replace"))] if logs else []
    if not pairs:
        raise SystemExit(f"evaluated_nodes: no 'Successfully bound' lines with evaluatedNodes in {logs}")
    sched = real["control_plane"]["scheduler"]
    points = sched["extension_point_ms_mean"]
    evaluated = statistics.fmean(e for e, _ in pairs)
    feasible = statistics.fmean(f for _, f in pairs)
    sim = twin(sc, "kube", args.time_scale)["control_plane"]
    command = "PYTHONPATH=. python tools/kube/evaluated_nodes.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    doc = {"command": command,
           "nodes": args.nodes, "scenario": args.scenario, "pods_bound": len(pairs),
           "real": {"evaluated_mean": round(evaluated, 2), "feasible_mean": round(feasible, 2),
                    "serial_cycle_ms": sched["serial_cycle_ms_mean"], "filter_ms": points.get("Filter"),
                    "score_ms": points.get("Score"), "algorithm_sigma": sched.get("algorithm_sigma"),
                    "filter_us_per_node_evaluated": round(points["Filter"] / evaluated * 1000, 4),
                    "score_us_per_node_feasible": round(points["Score"] / feasible * 1000, 4),
                    "host_cpu": real["control_plane"].get("host_cpu")},
           "twin": {"examined_mean": sim["nodes_examined_mean"], "scored_mean": sim["nodes_scored_mean"],
                    "serial_cycle_ms": sim["scheduling_cycle_ms_mean"]}}
    shutil.rmtree(run_dir)                     # the evidence is the figures, not the logs
    return doc


if __name__ == "__main__":
    sys.exit(main())
