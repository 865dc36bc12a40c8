"""gangstorm run SCENARIO: a comparative run, written to results/<run-id>/."""
from __future__ import annotations

import sys
from pathlib import Path

from loadgen.cli.common import ProgressBar, add_overrides, add_targets, parse_schedulers, scenario_from


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="replay one workload on each scheduler and compare")
    p.add_argument("scenario", help="scenario YAML (see scenarios/)")
    add_targets(p)
    add_overrides(p, "nodes", "seed", "churn", "duration_h", "time_scale")
    p.add_argument("--trace", help="replay a JSONL trace (gangstorm trace export) or an openb pod CSV")
    p.add_argument("--out", help="output directory (default results/<run-id>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.comparative import RunOptions, run
    from loadgen.traces import TraceError
    scenario = scenario_from(args)
    names = parse_schedulers(args.schedulers, scenario)
    if args.trace and not Path(args.trace).is_file():
        raise TraceError(args.trace, "file", "no such trace file")
    bar = None if args.quiet else ProgressBar()
    opts = RunOptions(schedulers=names, backend=args.backend, out_dir=Path(args.out) if args.out else None,
                      time_scale=args.time_scale, trace=args.trace, progress=bar)
    fleet = scenario.section("fleet")
    print(f"gangstorm: {scenario.name}: {fleet['nodes']:,} nodes x {fleet['gpus_per_node']} GPUs, "
          f"{scenario.data['duration_h']} h, schedulers {', '.join(names)} ({args.backend})", file=sys.stderr)
    summary = run(scenario, opts)
    if bar:
        bar.done()
    out = Path(summary["_dir"])
    print((out / "summary.md").read_text())
    print(f"results: {out}/summary.json, summary.md, jobs.csv, timeseries.csv")
    return 0
