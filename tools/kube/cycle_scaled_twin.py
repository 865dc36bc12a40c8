"""How much of kube's held-out tail at 2,000 nodes the serial cycle's cost explains: the twin on the
stored real runs of `heldout_at_scale`, with its three cycle costs (cycle_base_ms,
cycle_per_node_us, score_per_node_us) scaled by each factor given, and each cycle drawn around its
mean with each spread given (kube.cycle_sigma); --filter-us and --score-us set the per-node costs
before the scaling. A diagnostic, not a profile.

    PYTHONPATH=. python tools/kube/cycle_scaled_twin.py 1.0 1.35 --cycle-sigma 0 0.8
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadgen.calibration.calibrate import with_values
from loadgen.calibration.fidelity import real_stats, row
from loadgen.calibration.twin import twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile

CYCLE = ("cycle_base_ms", "cycle_per_node_us", "score_per_node_us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("factors", nargs="+", type=float)
    ap.add_argument("--cycle-sigma", nargs="+", type=float, default=[None],
                    help="each cycle's lognormal shape (default: the profile's)")
    ap.add_argument("--filter-us", type=float, help="kube.cycle_per_node_us (default: the profile's)")
    ap.add_argument("--score-us", type=float, help="kube.score_per_node_us (default: the profile's)")
    ap.add_argument("--runs", type=Path, default=Path("results/fidelity-scale/kube/heldout-steady-2000n/real"))
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--time-scale", type=float, default=10.0)
    args = ap.parse_args()
    reals = [json.loads(p.read_text())["schedulers"]["kube"] for p in sorted(args.runs.glob("run*/summary.json"))]
    print("real serial cycle ms:", [r["control_plane"]["scheduler"].get("serial_cycle_ms_mean") for r in reals])
    sc = load_with_overrides("scenarios/calibrate-steady.yaml", profile="local", nodes=args.nodes, churn=1.0)
    prof = load_profile("local")
    given = {"cycle_per_node_us": args.filter_us, "score_per_node_us": args.score_us}
    prof = with_values(prof, {("kube", k): v for k, v in given.items() if v is not None})
    for f in args.factors:
        for sigma in args.cycle_sigma:
            values = {("kube", k): prof.params["kube"][k].value * f for k in CYCLE}
            if sigma is not None:
                values[("kube", "cycle_sigma")] = sigma
            sim = twin(sc, "kube", args.time_scale, with_values(prof, values))
            r = row(f"x{f}", "held_out", real_stats(reals), sim)
            print(f"cycle x {f}, sigma {sigma}: twin cycle {sim['control_plane']['scheduling_cycle_ms_mean']} ms, "
                  f"real/sim p50 {r['p50_ratio']}, p99 {r['p99_ratio']}, p99.9 {r['p999_ratio']}")


if __name__ == "__main__":
    main()
