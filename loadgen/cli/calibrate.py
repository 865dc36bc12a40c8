"""gangstorm calibrate SCENARIO --schedulers X --nodes N: real backend vs its simulated twin."""
from __future__ import annotations

import json
from pathlib import Path

from loadgen.cli.common import add_overrides, parse_schedulers, scenario_from


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="run the same trace on a real backend and its simulated stand-in")
    p.add_argument("scenario")
    p.add_argument("--schedulers", required=True)
    add_overrides(p, "nodes", "duration_h", "time_scale", required=("nodes",))
    p.add_argument("--out")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.calibrate import calibrate
    from loadgen.storage import new_run_id
    sc = scenario_from(args)
    out_root = Path(args.out) if args.out else Path("results") / (new_run_id(sc.name) + "-calibrate")
    results = {}
    for name in parse_schedulers(args.schedulers, sc):
        results[name] = calibrate(sc, name, out_root / name, args.time_scale)
        r = results[name]["ratios_real_over_sim"]
        print(f"{name}: real/sim " + ", ".join(f"{k}={v}" for k, v in r.items()))
    out_root.mkdir(parents=True, exist_ok=True)
    (out_root / "calibration.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out_root}/calibration.json")
    return 0
