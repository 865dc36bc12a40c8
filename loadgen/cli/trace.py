"""gangstorm trace export|show: write a scenario's workload as JSONL, or describe a trace file."""
from __future__ import annotations

from loadgen.cli.common import add_overrides, check_output_file, scenario_from


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="export or inspect workload traces")
    tsub = p.add_subparsers(dest="trace_cmd", required=True, parser_class=sub._parser_class)
    e = tsub.add_parser("export", help="write a scenario's seeded workload to a JSONL trace")
    e.add_argument("scenario")
    e.add_argument("output", help="JSONL file to write")
    add_overrides(e, "nodes", "seed", "churn", "duration_h")
    e.set_defaults(func=export)
    s = tsub.add_parser("show", help="summarize a JSONL trace or an openb pod CSV")
    s.add_argument("trace")
    s.set_defaults(func=show)


def export(args) -> int:
    from loadgen.input.traces import export_jsonl
    from loadgen.input.workload import generate
    check_output_file(args.output, inputs=(args.scenario,))
    sc = scenario_from(args)
    check_output_file(args.output, inputs=(args.scenario, sc.profile.path))
    jobs, info = generate(sc)
    try:
        export_jsonl(jobs, args.output, {"scenario": sc.name, "seed": sc.seed, "nodes": sc.section("fleet")["nodes"],
                                         "arrival_rate_per_s": info.arrival_rate_per_s})
    except OSError as e:
        from loadgen.cli.common import UsageError
        raise UsageError(f"{args.output}: cannot be written ({e.strerror or type(e).__name__}); "
                         "nothing was written") from None
    print(f"wrote {len(jobs):,} jobs to {args.output} ({info.arrival_rate_per_s:.3f} jobs/s, "
          f"{info.churn_multiplier:g}x churn)")
    return 0


def show(args) -> int:
    import numpy as np

    from loadgen.input.traces import load_trace
    from loadgen.measure.statistics import exact_quantile
    jobs, meta = load_trace(args.trace)
    if not jobs:
        print(f"{args.trace}: no jobs")
        return 0
    gpus = np.array([j.gpus for j in jobs])
    dur = np.array([j.duration_s for j in jobs])
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    classes: dict[str, int] = {}
    for j in jobs:
        classes[j.cls] = classes.get(j.cls, 0) + 1
    print(f"{args.trace}: {len(jobs):,} jobs over {span / 3600:.2f} h")
    print("  classes: " + ", ".join(f"{k}={v:,}" for k, v in sorted(classes.items())))
    print(f"  GPUs per job: mean {gpus.mean():.2f}, median {exact_quantile(gpus, 0.5):g}, max {gpus.max()}")
    print(f"  duration s: median {exact_quantile(dur, 0.5):.0f}, p99 {exact_quantile(dur, 0.99):.0f}")
    if meta.get("skipped"):
        print("  skipped: " + ", ".join(f"{k}={v}" for k, v in meta["skipped"].items()))
    return 0
