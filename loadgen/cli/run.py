"""gangstorm run SCENARIO: a comparative run, written to results/<run-id>/."""
from __future__ import annotations

import sys
from pathlib import Path

from loadgen.cli.common import ProgressBar, load_with_overrides, parse_schedulers, positive_float, positive_int


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="replay one workload on each scheduler and compare")
    p.add_argument("scenario", help="scenario YAML (see scenarios/)")
    p.add_argument("--schedulers", help="comma-separated subset of kube,volcano,ray,slurm")
    p.add_argument("--backend", choices=("sim", "real"), default="sim",
                   help="sim: embedded calibrated models (default); real: launch the real scheduler")
    p.add_argument("--nodes", type=positive_int, help="override fleet.nodes")
    p.add_argument("--seed", type=int, help="override the scenario seed")
    p.add_argument("--churn", type=positive_float, help="override workload.churn_multiplier")
    p.add_argument("--duration-h", type=positive_float, help="override duration_h")
    p.add_argument("--time-scale", type=positive_float, default=60.0,
                   help="real backends: virtual seconds per wall second (default 60)")
    p.add_argument("--trace", help="replay a JSONL trace (gangstorm trace export) or an openb pod CSV")
    p.add_argument("--out", help="output directory (default results/<run-id>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.comparative import RunOptions, run
    from loadgen.cli.common import UsageError
    from loadgen.traces import TraceError
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed: expected a non-negative integer, got {args.seed}")
    scenario = load_with_overrides(args.scenario, nodes=args.nodes, seed=args.seed, churn=args.churn,
                                   duration_h=args.duration_h)
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
