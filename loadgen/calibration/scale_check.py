"""A held-out check at scale: one scenario at thousands of nodes on the real backend, and its twin.

    python -m loadgen.calibration.scale_check --scheduler slurm --nodes 2000 \\
        [--scenario scenarios/calibrate-steady.yaml] [--duration-h 0.25] [--time-scale 1] \\
        [--profile local] [--repeats 1] [--out results/fidelity-scale/slurm]

`gangstorm calibrate` runs every case at one time scale, chosen for 32-128 nodes; thousands of
nodes offer that many times more jobs per second, so the check at scale runs at its own, lower time
scale (the real control plane must keep up on this machine, or the check measures the machine).
Each real run is `gangstorm run --backend real` (loadgen/calibration/twin.py real_run), kept under
<out>/heldout-<nodes>n/run<k>/ and reused when complete; its twin is the simulated scheduler on the
same wall-clock plan with the profile. Nothing here is fitted: the profile's values are what the
fits and the cost curve gave, so the ratios are predictions. Writes <out>/heldout-<nodes>n.json.
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

from loadgen.calibration.fidelity import real_stats, row, table
from loadgen.calibration.twin import real_run, twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _keep_summary(d: Path) -> None:
    """Only summary.json is evidence worth committing; the cluster's logs and configs go."""
    for p in d.iterdir():
        if p.name != "summary.json":
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def check(scheduler: str, scenario: str, nodes: int, duration_h: float, time_scale: float, profile: str,
          repeats: int, out: Path, command: str, progress=print) -> dict:
    sc = load_with_overrides(scenario, profile=profile, nodes=nodes, duration_h=duration_h)
    label = f"{Path(scenario).stem}-{nodes}n"
    runs, loads = [], []
    doc_path = out / f"heldout-{nodes}n.json"
    try:                # a reused run keeps the load its first check recorded
        kept = {x["run"]: x for x in json.loads(doc_path.read_text()).get("load_avg", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        kept = {}
    for k in range(repeats):
        d = out / f"heldout-{nodes}n" / f"run{k + 1}"
        summary = d / "summary.json"
        if summary.exists() and json.loads(summary.read_text()).get("complete"):
            if k + 1 in kept:
                loads.append(kept[k + 1])
        else:
            if d.exists():
                shutil.rmtree(d)
            progress(f"{label} run {k + 1}/{repeats}: real backend, time scale {time_scale:g} ...")
            before = _load()
            real_run(sc, scheduler, d, time_scale)
            loads.append({"run": k + 1, "before": before, "after": _load()})
            _keep_summary(d)
        runs.append(json.loads(summary.read_text())["schedulers"][scheduler])
    sim = twin(sc, scheduler, time_scale, load_profile(profile))
    r = row(label, "held_out", real_stats(runs), sim)
    cp_keys = ("main_mean_cycle_us", "main_mean_depth", "bf_mean_cycle_us", "bf_mean_depth", "bf_cycles",
               "main_cycles")
    doc = {"scheduler": scheduler, "nodes": nodes, "scenario": scenario, "duration_h": duration_h,
           "time_scale": time_scale, "profile": profile, "command": command,
           "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "load_avg": loads,
           "metrics": {"runs": [{"admission_s": x["admission_s"], "alloc_util": x["alloc_util"], "jobs": x["jobs"],
                                 "control_plane": {k: x.get("control_plane", {}).get(k) for k in cp_keys}}
                                for x in runs]},
           "sim": {"admission_s": sim["admission_s"], "alloc_util": sim["alloc_util"],
                   "control_plane": {k: sim.get("control_plane", {}).get(k) for k in cp_keys}},
           "row": r, "within_goal": r["within_goal"]}
    doc_path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    """Run the held-out case at scale on the real backend (or reuse its runs) and compare its twin."""
    ap = argparse.ArgumentParser(prog="python -m loadgen.calibration.scale_check", description=main.__doc__)
    ap.add_argument("--scheduler", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--scenario", default="scenarios/calibrate-steady.yaml")
    ap.add_argument("--duration-h", type=float, default=0.25)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="default results/fidelity-scale/<scheduler>")
    args = ap.parse_args(argv)
    out = args.out or Path("results/fidelity-scale") / args.scheduler
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m loadgen.calibration.scale_check " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        doc = check(args.scheduler, args.scenario, args.nodes, args.duration_h, args.time_scale, args.profile,
                    args.repeats, out, command)
    except KeyboardInterrupt:         # a real run keeps its partial folder, marked partial
        print("scale_check: interrupted; a real run cut short is kept in its folder, marked partial, "
              "and redone by the next call", file=sys.stderr)
        return 130
    print(table(args.scheduler, [doc["row"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
