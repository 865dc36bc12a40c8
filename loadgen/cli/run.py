"""gangstorm run SCENARIO: a comparative run, written to results/<run-id>/."""
from __future__ import annotations

import sys
from pathlib import Path

from loadgen.cli.common import (
    ProgressBar,
    SeedProgress,
    UsageError,
    add_overrides,
    add_seeds,
    add_targets,
    check_seed_flags,
    parse_schedulers,
    scenario_from,
    seeds_from,
)
from loadgen.cli.existing import attached_schedulers, existing_from, preflight


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="replay one workload on each scheduler and compare")
    p.add_argument("scenario", help="scenario YAML (see scenarios/)")
    add_targets(p)
    add_overrides(p, "nodes", "seed", "churn", "duration_h", "time_scale", "ray_nodes")
    add_seeds(p, "--jobs", "--parallel")
    p.add_argument("--trace", help="replay a JSONL trace (gangstorm trace export) or an openb pod CSV")
    p.add_argument("--out", help="output directory (default results/<run-id>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--metrics-port", help="--backend real: serve gangstorm's metrics (Prometheus format) "
                   "on 127.0.0.1:PORT while running (0: any free port)")
    p.add_argument("--dcgm-port", help="--backend real: serve the fake fleet's DCGM exporter "
                   "(DCGM_FI_PROF_SM_ACTIVE per allocated GPU) on 127.0.0.1:PORT (0: any free port)")
    p.add_argument("--prometheus", action="store_true",
                   help="--backend real: a real Prometheus (make prometheus-deps) on 127.0.0.1 scrapes gangstorm, the "
                        "fake DCGM exporter and the control plane during each scheduler's run; the seed's queries "
                        "and gangstorm's exact figures go into summary.json")
    p.set_defaults(func=main)


def port_flag(args, flag: str) -> int | None:
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    if value is None:
        return None
    if not (str(value).isascii() and str(value).isdigit()) or int(value) > 65535:
        raise UsageError(f"{flag}: expected a port number 0-65535, got {value!r}")
    if args.backend != "real":
        raise UsageError(f"{flag}: only with --backend real (a simulated run takes seconds: read summary.json)")
    return int(value)


def check_trace_flags(args) -> None:
    """A replay keeps its trace's own times: flags that would reshape a generated workload are refused
    rather than ignored (an openb CSV, whose times are compressed by the churn multiplier, takes --churn)."""
    if not args.trace:
        return
    from loadgen.input.traces import is_csv
    if args.duration_h is not None:
        raise UsageError("--duration-h: not used with --trace (a replay lasts as long as its trace; "
                         "set workload.trace_limit to replay fewer jobs)")
    if args.churn is not None and not is_csv(args.trace):
        raise UsageError("--churn: not used with a JSONL --trace (it replays its recorded submit times; "
                         "export it again with --churn)")


def main(args) -> int:
    from loadgen.drive.comparative import RunOptions, run
    from loadgen.input.plan import plan_run
    from loadgen.output.storage import check_out_dir
    existing = existing_from(args)
    if args.out is not None:
        check_out_dir(args.out)
    check_trace_flags(args)
    check_seed_flags(args, "--jobs")
    if args.seeds is not None and args.dry_run:
        raise UsageError("--seeds: not used with --dry-run (it describes one seed's plan; pass --seed S)")
    metrics_port, dcgm_port = port_flag(args, "--metrics-port"), port_flag(args, "--dcgm-port")
    if args.prometheus and args.backend != "real":
        raise UsageError("--prometheus: only with --backend real (a simulated run has nothing to scrape)")
    if args.prometheus:
        from loadgen.model.registry import component
        binary = component("prometheus").server.DEFAULT_BINARY
        if not Path(binary).exists():
            raise UsageError(f"--prometheus: {binary} not found; install it with `make prometheus-deps`")
    scenario = scenario_from(args)
    seeds, parallel, rule = seeds_from(args, scenario, "--jobs")
    names = parse_schedulers(args.schedulers, scenario) if existing is None else \
        (attached_schedulers(args.schedulers, existing) or parse_schedulers(args.schedulers, scenario))
    if seeds is not None and len(seeds) > 1:
        return run_seeds_main(args, scenario, names, seeds, parallel, rule, existing, metrics_port, dcgm_port)
    if seeds is not None:
        scenario = scenario.with_overrides(seed=seeds[0])
    plan = plan_run(scenario, args.trace)           # every input checked before anything is written
    if existing is not None or args.dry_run:
        # read-only checks of the cluster (foreign workloads, nodes, Volcano) before a folder exists
        from loadgen.model.target import run_label
        from loadgen.output.storage import new_run_id
        label = run_label(new_run_id(scenario.name) + "-xxxxxx")
        found = preflight(scenario, names, args.backend, plan, existing, args.time_scale, label)
        if args.dry_run:
            from loadgen.drive.dryrun import describe
            print(describe(plan, names, label, found, args.time_scale if args.backend == "real" else 1.0,
                           existing is not None))
            return 0
    bar = None if args.quiet else ProgressBar()
    banner = _banner(scenario, names, args.backend)
    opts = RunOptions(schedulers=names, backend=args.backend, out_dir=Path(args.out) if args.out else None,
                      time_scale=args.time_scale, trace=args.trace, progress=bar, existing=existing,
                      on_start=lambda out: print(f"{banner} -> {out}/", file=sys.stderr),
                      metrics_port=metrics_port, dcgm_port=dcgm_port, prometheus=args.prometheus)
    summary = run(scenario, opts, plan)
    if bar:
        bar.done()
    out = Path(summary["_dir"])
    print((out / "summary.md").read_text())
    page = ", report.html" if (out / "report.html").exists() else ""
    print(f"results: {out}/summary.json, summary.md, jobs.csv, timeseries.csv{page}")
    _refusals(summary)
    return 0


def _banner(scenario, names: list[str], backend: str) -> str:
    fleet = scenario.section("fleet")
    return (f"gangstorm: {scenario.name}: {fleet['nodes']:,} nodes x {fleet['gpus_per_node']} GPUs, "
            f"{scenario.data['duration_h']} h, schedulers {', '.join(names)} ({backend})")


def run_seeds_main(args, scenario, names, seeds, parallel, rule, existing, metrics_port, dcgm_port) -> int:
    """--seeds: every seed a complete run in <out>/seeds/<seed>/, the summary over the seeds."""
    from loadgen.drive.comparative import RunOptions
    from loadgen.drive.seeds import run_seeds
    if existing is not None:        # read-only checks of the cluster before a folder exists
        from loadgen.input.plan import plan_run
        from loadgen.model.target import run_label
        from loadgen.output.storage import new_run_id
        preflight(scenario, names, args.backend, plan_run(scenario, args.trace), existing, args.time_scale,
                  run_label(new_run_id(scenario.name) + "-xxxxxx"))
    at_once = (f"{parallel} at a time" if parallel > 1 else
               "one at a time" + (" (a real backend never runs two seeds side by side)"
                                  if args.backend == "real" else ""))
    banner = _banner(scenario, names, args.backend) + f", {len(seeds)} seeds {at_once}"
    opts = RunOptions(schedulers=names, backend=args.backend, out_dir=Path(args.out) if args.out else None,
                      time_scale=args.time_scale, trace=args.trace, existing=existing,
                      on_start=lambda out: print(f"{banner} -> {out}/", file=sys.stderr),
                      metrics_port=metrics_port, dcgm_port=dcgm_port, prometheus=args.prometheus)
    progress = None if args.quiet else SeedProgress(len(seeds))
    summary = run_seeds(scenario, seeds, opts, parallel, rule, progress)
    out = Path(summary["_dir"])
    print((out / "summary.md").read_text())
    page = ", report.html" if (out / "report.html").exists() else ""
    print(f"results: {out}/summary.json, summary.md{page}; each seed: {out}/seeds/<seed>/ "
          f"(summary.json, summary.md, jobs.csv, timeseries.csv)")
    _refusals(summary)
    return 0


def _refusals(summary: dict) -> None:
    from loadgen.output.markdown import refusals
    for name, head, first in refusals(summary):      # on stderr too: --quiet runs and CI logs see it
        print(f"gangstorm: {name}: {head}" + (f"; {first[0]}" if first else ""), file=sys.stderr)
