"""A held-out case at scale: one real run and its twin, admission p50/p99 real/sim (issue 32).

    python -m loadgen.calibration.heldout_at_scale --scheduler kube --scenario scenarios/calibrate-steady.yaml \\
        --nodes 2000 --time-scale 10 --churn 1 --out results/fidelity-scale/kube/heldout-steady-2000n

The real runs are `gangstorm run --backend real` for one scheduler (loadgen/calibration/twin.py
real_run: the scenario's plan time-scaled onto the wall clock); the twin is the simulated scheduler
on the same wall-clock plan, timed by --profile (default local), which was fitted without this case,
with the costs the machine's load sets re-measured from the runs' own metrics as the CI guard does
(loadgen/calibration/measure.py: apiserver latencies, the client's pace; everything fitted kept).
The comparison is loadgen/calibration/fidelity.py's: real/sim of admission p50, p99 (and p99.9 with
enough samples) and the utilization difference; the twin on the shipped profile is reported beside
it. Each run's summary.json is kept in --out/real/runN and reused (its logs, CSVs and report are
removed: the summary is the evidence); --out/heldout.json gets {"scheduler", "nodes", "command",
"started", "load_avg", "real", "sim", "row", "row_shipped_profile"}.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from loadgen.calibration import measure
from loadgen.calibration.calibrate import with_values
from loadgen.calibration.cases import Case
from loadgen.calibration.fidelity import real_stats, row
from loadgen.calibration.twin import real_run, twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile


def run(args: argparse.Namespace) -> dict:
    out: Path = args.out
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    sc = load_with_overrides(args.scenario, profile=args.profile, nodes=args.nodes, churn=args.churn,
                             duration_h=args.duration_h, seed=args.seed)
    reals, ran = [], False
    for k in range(1, args.runs + 1):
        summary = out / "real" / f"run{k}" / "summary.json"
        if not (summary.exists() and json.loads(summary.read_text()).get("complete")):
            ran = True
            if summary.parent.exists():
                shutil.rmtree(summary.parent)
            real_run(sc, args.scheduler, summary.parent, args.time_scale)
            for p in summary.parent.iterdir():          # keep the evidence small: the summary alone
                if p.name != "summary.json":
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
        reals.append(json.loads(summary.read_text())["schedulers"][args.scheduler])
    label = f"{Path(args.scenario).stem}-{args.nodes}n"
    shipped = load_profile(args.profile)
    # as the CI guard does: the costs the machine's load sets (apiserver latencies, the client's
    # pace) re-measured from these runs' own metrics, everything fitted kept
    here = with_values(shipped, {k: v for k, (v, _) in measure.extract(
        args.scheduler, [(Case(args.scenario, args.nodes, "held_out"), r) for r in reals]).items()})
    stats = real_stats(reals)
    rows, sims = {}, {}
    for name, prof in (("remeasured", here), ("shipped", shipped)):
        sims[name] = twin(sc, args.scheduler, args.time_scale, prof)
        rows[name] = row(label, "held_out", stats, sims[name])
    cp_keys = ("scheduler", "apiserver", "client_pace_ms", "client_pace_gangs", "nodes_ready_s", "busy_s",
               "session_ms", "action_ms")                 # the last two: vc-scheduler's
    doc = {"scheduler": args.scheduler, "nodes": args.nodes, "case": label, "role": "held_out",
           "command": "python -m loadgen.calibration.heldout_at_scale "
           + " ".join(shlex.quote(a) for a in sys.argv[1:]),
           **_when(out / "heldout.json", ran, started, load_before),
           "profile": args.profile, "time_scale": args.time_scale,
           "remeasured": {f"{s}.{k}": here.params[s][k].value for (s, k) in measure.extract(
               args.scheduler, [(Case(args.scenario, args.nodes, "held_out"), r) for r in reals])},
           "real": [{"jobs": r["jobs"], "admission_s": r["admission_s"], "alloc_util": r["alloc_util"],
                     "control_plane": {k: r["control_plane"].get(k) for k in cp_keys}} for r in reals],
           "sim": {name: {"admission_s": s["admission_s"], "alloc_util": s["alloc_util"],
                          "control_plane": {k: s["control_plane"].get(k) for k in (
                              "scheduling_cycle_ms_mean", "nodes_examined_mean", "num_feasible_nodes_to_find",
                              "busy_s", "bind_retries_429", "bind_refused", "session_ms_mean", "session_ms_max",
                              "walks_placed", "walks_failed")}} for name, s in sims.items()},
           "row": rows["remeasured"], "row_shipped_profile": rows["shipped"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "heldout.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return doc


def _when(previous: Path, ran: bool, started: str, load_before: list[float]) -> dict:
    """When the real runs ran and the load around them. A call that reran no real run (a new profile
    judged against the stored runs) keeps what the call that ran them recorded, and says when it
    evaluated them."""
    now = {"started": started, "load_avg": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}}
    if ran or not previous.exists():
        return now
    old = json.loads(previous.read_text())
    if "started" not in old or "load_avg" not in old:
        return now
    return {"started": old["started"], "load_avg": old["load_avg"], "evaluated": started}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scheduler", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--churn", type=float)
    ap.add_argument("--duration-h", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--runs", type=int, default=1, help="real runs (kept in --out/real/runN, reused)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        doc = run(args)
    except KeyboardInterrupt:         # a real run keeps its partial folder, marked partial
        print("heldout_at_scale: interrupted; a real run cut short is kept in its folder, marked partial, "
              "and redone by the next call", file=sys.stderr)
        return 130
    for label, r in (("re-measured", doc["row"]), ("shipped", doc["row_shipped_profile"])):
        print(f"{r['case']} ({label} profile): real/sim p50 {r['p50_ratio']} p99 {r['p99_ratio']} p99.9 "
              f"{r['p999_ratio']} util {r['util_diff_pp']} pp; within goal: {r['within_goal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
