"""How much kube-scheduler's cycles vary, measured on real runs at a fitting size (issue 32).

    python -m loadgen.calibration.kube_spread --nodes 500 --runs 2 --write-profile fakes/profiles/local.yaml

Real runs of a scenario (default calibrate-steady at time scale 10 and churn 1, the load of the
2,000-node held-out case) on the project's KWOK stack. kube.cycle_sigma is the median over them of
the lognormal shape fitted to scheduler_scheduling_algorithm_duration_seconds' buckets with its mean
held (fakes/kube/metrics.py `algorithm_sigma`); the profile's kube-gang and coscheduling sections,
which take kube's cycle costs, take it too. Each run's summary.json is kept in --out/runN (the rest of
its folder removed) and reused by the next call. The held-out case at 2,000 nodes
(heldout_at_scale) is another size and never feeds it.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path
from statistics import median

from loadgen.calibration.realcase import real_runs
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import Param, dump
from loadgen.input.profile import load as load_profile

ROOT = Path(__file__).resolve().parents[2]
# the sections whose cycle costs are kube's (fakes/profiles/local.yaml: "taken from this profile's kube..."),
# and why they may take them
SHARERS = {"kube-gang": "the same kube-scheduler v1.36.1 binary (gates GenericWorkload, GangScheduling) runs the "
                        "same per-pod cycle",
           "coscheduling": "scheduler-plugins v0.34.7's kube-scheduler (the kube-scheduler v1.34 framework with the "
                           "Coscheduling plugin) runs the same per-pod cycle"}


def shapes(results: list[dict]) -> list[float]:
    """Each run's fitted shape of the algorithm histogram (runs without one left out)."""
    out = []
    for r in results:
        v = r.get("control_plane", {}).get("scheduler", {}).get("algorithm_sigma")
        if isinstance(v, (int, float)) and v > 0:
            out.append(float(v))
    return out


def write_profile(path: Path, value: float, source: str, command: str, key: str = "cycle_sigma",
                  unit: str = "ln") -> None:
    """Set kube.<key> (measured) and the sharing sections' (sourced from it) in a profile file."""
    prof = load_profile(str(path))
    prof.params.setdefault("kube", {})[key] = Param(value, unit, "measured", source, command)
    for section, why in SHARERS.items():
        if section in prof.params:
            prof.params[section][key] = Param(
                value, unit, "sourced", f"taken from this profile's kube.{key} (measured): {why}; "
                "not measured with gangs", "")
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="scenarios/calibrate-steady.yaml")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--churn", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=2, help="real runs (kept in --out/runN, reused)")
    ap.add_argument("--profile", default="local", help="the profile the scenario resolves with")
    ap.add_argument("--out", type=Path, help="default results/fidelity-scale/kube/spread-<scenario>-<nodes>n")
    ap.add_argument("--write-profile", type=Path, help="set this profile file's kube.cycle_sigma")
    args = ap.parse_args(argv)
    stem = Path(args.scenario).stem.removeprefix("calibrate-")
    out = args.out or ROOT / f"results/fidelity-scale/kube/spread-{stem}-{args.nodes}n"
    sc = load_with_overrides(args.scenario, profile=args.profile, nodes=args.nodes, churn=args.churn)
    try:
        results = real_runs(sc, "kube", out, args.time_scale, args.runs)
    except KeyboardInterrupt:
        print("kube_spread: interrupted; finished runs are kept and reused by the next call", file=sys.stderr)
        return 130
    for run in sorted(out.glob("run*")):          # keep the evidence small: the summary alone
        for p in run.iterdir():
            if p.name != "summary.json":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    found = shapes(results)
    cycles = [r["control_plane"]["scheduler"].get("serial_cycle_ms_mean") for r in results]
    print(f"kube_spread: {len(results)} runs at {args.nodes} nodes: algorithm shape {found}, serial cycle ms {cycles}")
    if not found:
        print(f"kube_spread: no run in {out} recorded the algorithm histogram's shape", file=sys.stderr)
        return 1
    sigma = round(median(found), 4)
    command = "python -m loadgen.calibration.kube_spread " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    shown = out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out
    source = (f"kube-scheduler v1.36.1 on this machine's KWOK stack, {len(found)} real runs of "
              f"{Path(args.scenario).name} at {args.nodes:,} nodes (time scale {args.time_scale:g}, churn "
              f"{args.churn:g}; {shown.as_posix()}/run*/summary.json): "
              "scheduler_scheduling_algorithm_duration_seconds, lognormal shape fitted to its buckets with the "
              "mean held (loadgen/model/lognormal.py), median")
    (out / "spread.json").write_text(json.dumps({"nodes": args.nodes, "scenario": args.scenario, "shapes": found,
                                                 "serial_cycle_ms": cycles, "cycle_sigma": sigma,
                                                 "command": command}, indent=1) + "\n")
    print(f"kube.cycle_sigma = {sigma}")
    if args.write_profile:
        write_profile(args.write_profile, sigma, source, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
