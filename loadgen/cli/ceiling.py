"""gangstorm ceiling SCENARIO: per scheduler, the highest churn multiplier that keeps the SLO."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from loadgen.cli.common import UsageError, add_overrides, parse_schedulers, positive_float, scenario_from


def add_parser(sub) -> None:
    p = sub.add_parser("ceiling", help="sweep churn multipliers; report where each scheduler breaks its SLO")
    p.add_argument("scenario")
    p.add_argument("--schedulers")
    add_overrides(p, "nodes", "seed")
    p.add_argument("--multipliers", help="comma-separated churn multipliers (default: scenario ceiling.multipliers)")
    p.add_argument("--duration-h", dest="ceiling_duration_h", type=positive_float,
                   help="horizon at the scenario's own churn (sets ceiling.duration_h)")
    p.add_argument("--out", help="output directory (default results/<run-id>-ceiling)")
    p.set_defaults(func=main)


def parse_multipliers(text: str) -> list[float]:
    try:
        ms = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ms = []
    if not ms or not all(LO <= m <= HI for m in ms):       # also refuses nan and inf
        raise UsageError(f"--multipliers: expected comma-separated numbers in [{LO:g}, {HI:g}], got {text!r}")
    if len(set(ms)) != len(ms):
        raise UsageError(f"--multipliers: expected each multiplier once, got {text!r}")
    return ms


LO, HI = 0.01, 1000.0          # the range of workload.churn_multiplier


def main(args) -> int:
    from loadgen.ceiling import sweep
    from loadgen.storage import atomic_write
    from loadgen.storage import check_out_dir, fresh_run_dir, new_run_id
    if args.out:
        check_out_dir(args.out)
    sc = scenario_from(args)
    over = {}
    if args.multipliers is not None:
        over["ceiling.multipliers"] = parse_multipliers(args.multipliers)
    if args.ceiling_duration_h is not None:
        over["ceiling.duration_h"] = args.ceiling_duration_h
    if over:
        sc = sc.with_overrides(**over)
    names = parse_schedulers(args.schedulers, sc)
    out = Path(args.out) if args.out else fresh_run_dir("results", new_run_id(sc.name) + "-ceiling")
    check_out_dir(out)
    result = sweep(sc, names, out, progress=lambda label, f: print(f"  {label}", file=sys.stderr))
    atomic_write(out / "ceiling.json", json.dumps(result, indent=2) + "\n")
    slo = result["slo"]["admission_p99_s"]
    print(f"SLO: admission p99 <= {slo} s and <= 1% never admitted")
    print(f"{'scheduler':<10} {'ceiling':>10}   p99 by churn multiplier")
    for n, c in result["ceiling"].items():
        best = c["ceiling_churn_multiplier"]
        label = "none" if best is None else f"{best:g}x" + ("+" if c["beyond_sweep"] else "")
        pts = "  ".join(f"{p['churn_multiplier']:g}x:{p['p99_s']:.1f}s" if p["p99_s"] is not None else
                        f"{p['churn_multiplier']:g}x:n/a" for p in result["points"][n])
        print(f"{n:<10} {label:>10}   {pts}")
    print(f"results: {out}/ceiling.json")
    return 0
