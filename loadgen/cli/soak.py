"""gangstorm soak SCENARIO: drive one scheduler without pause, in rolling windows (docs/soak.md)."""
from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

from loadgen.cli.common import UsageError, add_overrides, add_targets, parse_schedulers, scenario_from
from loadgen.cli.existing import attached_schedulers, existing_from, preflight

DEFAULT_WINDOW_S = "60"


def add_parser(sub) -> None:
    p = sub.add_parser("soak", help="drive one scheduler continuously in rolling windows (index, Prometheus, alerts)",
                       description="Drives the scenario's workload without pause against one scheduler, attached "
                                   "(--kubeconfig, --slurm-conf, --ray-address) or launched (--backend real), cut "
                                   "into windows: each window gets a folder under <out>/windows/, a line in "
                                   "results/index.jsonl and its figures on the live metrics endpoint. Bound it with "
                                   "--windows and/or --until, or end it with Ctrl-C (SIGINT): the current window is "
                                   "kept partial and everything the soak labelled is deleted.")
    p.add_argument("scenario", help="scenario YAML (its workload; a chaos plan is refused)")
    add_targets(p, "the scheduler the attach flag reaches, else the scenario's first")
    add_overrides(p, "nodes", "seed", "churn", "time_scale", "ray_nodes")
    p.add_argument("--window-s", dest="window_s", default=DEFAULT_WINDOW_S,
                   help=f"window length in wall seconds (default {DEFAULT_WINDOW_S})")
    p.add_argument("--windows", help="stop after N windows")
    p.add_argument("--until", help="stop at this deadline: a duration from now (20m, 1h30m), a time today (HH:MM) "
                                   "or a date and time (2026-12-06T03:00:00Z); the last window ends there")
    p.add_argument("--churn-schedule", dest="churn_schedule", metavar="T:M[,T:M...]",
                   help="the churn multiplier from a time into the soak on, e.g. 0:400,10m:2000 (a window offers "
                        "the churn in force when it starts; default: the scenario's churn throughout)")
    p.add_argument("--out", help="output directory (default results/<soak-id>)")
    p.add_argument("--metrics-port", help="serve the soak's metrics on 127.0.0.1:PORT (default 0: any free port)")
    p.add_argument("--prometheus", action="store_true",
                   help="a real Prometheus (make prometheus-deps) scrapes the soak and the control plane and "
                        "evaluates fakes/prom/rules/gangstorm.rules.yml; each window records the alerts firing")
    p.add_argument("--quiet", action="store_true", help="no line per window")
    p.set_defaults(func=main)


def options_from(args, scenario, now: datetime):
    """Bounds and churn schedule from the flags (one line naming the flag on bad input)."""
    from loadgen.input import soak
    window_s = soak.window_seconds(args.window_s)
    windows = soak.window_count(args.windows) if args.windows is not None else None
    until_s = soak.until_seconds(args.until, now) if args.until is not None else None
    if args.churn_schedule is not None and args.churn is not None:
        raise UsageError("--churn: not used with --churn-schedule (its first step is the churn the soak starts with)")
    churn = soak.churn_schedule(args.churn_schedule, scenario.data["workload"]["churn_multiplier"])
    return soak.SoakBounds(window_s=window_s, windows=windows), until_s, churn


def main(args) -> int:
    from loadgen.cli.run import port_flag
    from loadgen.drive.soak import Soak, SoakOptions, window_plan, window_scenario
    from loadgen.output.storage import check_out_dir
    explicit = args.backend
    existing = existing_from(args)
    if existing is None and explicit is None:
        args.backend = "real"                  # a soak drives a real control plane: launched unless attached
    if args.backend != "real":
        raise UsageError(f"--backend {args.backend}: a soak drives a real scheduler on the wall clock "
                         "(attach with --kubeconfig/--slurm-conf/--ray-address, or --backend real to launch one)")
    if args.dry_run:
        raise UsageError("--dry-run: not used with soak (`gangstorm run SCENARIO ... --dry-run` shows what the "
                         "scenario's workload would create and disrupt)")
    if args.out is not None:
        check_out_dir(args.out)
    metrics_port = port_flag(args, "--metrics-port")
    now = datetime.now().astimezone()
    scenario = scenario_from(args)
    bounds, until_s, churn = options_from(args, scenario, now)
    if scenario.data.get("chaos"):
        raise UsageError(f"{args.scenario}: chaos: a soak replays the workload only; expected a scenario without "
                         "a chaos plan")
    names = parse_schedulers(args.schedulers, scenario) if existing is None else \
        (attached_schedulers(args.schedulers, existing) or parse_schedulers(args.schedulers, scenario))
    if len(names) != 1:
        if args.schedulers is None and existing is None:
            names = names[:1]
        else:
            raise UsageError(f"--schedulers: a soak drives one scheduler, got {', '.join(names)}; "
                             "run one soak per scheduler")
    if args.prometheus:
        from loadgen.model.registry import component
        binary = component("prometheus").server.DEFAULT_BINARY
        if not Path(binary).exists():
            raise UsageError(f"--prometheus: {binary} not found; install it with `make prometheus-deps`")
    # every window's workload is generated when it starts: the first one and the busiest are
    # checked now, so a churn the limits refuse ends here and not minutes into the soak
    busiest = max(s[1] for s in churn.steps)
    first = window_plan(window_scenario(scenario, 1, churn.steps[0][1]), 1, 0.0, bounds.window_s, args.time_scale)
    window_plan(window_scenario(scenario, 2, busiest), 2, 0.0, bounds.window_s, args.time_scale)
    if existing is not None:
        from loadgen.model.target import run_label
        from loadgen.output.storage import new_run_id
        preflight(scenario, names, "real", first, existing, args.time_scale,
                  run_label(new_run_id(scenario.name) + "-xxxxxx"))
    quiet = args.quiet
    deadline = None if until_s is None else now.timestamp() + until_s

    def started(head: dict) -> None:
        bound = [f"{head['windows_bound']} windows" if head["windows_bound"] else "",
                 f"until {datetime.fromtimestamp(deadline).astimezone().isoformat(timespec='seconds')}"
                 if deadline else ""]
        bound = " or ".join(b for b in bound if b) or "until Ctrl-C"
        how = "attached" if head["attached"] else "launched"
        print(f"gangstorm: soak {head['scenario']} on {head['scheduler']} ({how}, {head['nodes']} nodes), "
              f"windows of {head['window_s']:g} s, {bound} -> {soak.out}/", file=sys.stderr)
        print(f"gangstorm: metrics on {head['metrics_endpoint']}"
              + (f", Prometheus on {head['prometheus']['url']} (rules: {head['prometheus']['rules'][0]})"
                 if head.get("prometheus") else ""), file=sys.stderr, flush=True)

    opts = SoakOptions(scheduler=names[0], bounds=bounds, churn=churn, backend="real", time_scale=args.time_scale,
                       until_epoch=deadline, existing=existing, out_dir=Path(args.out) if args.out else None,
                       metrics_port=metrics_port or 0, prometheus=args.prometheus, on_start=started,
                       on_window=None if quiet else (lambda row: print(window_line(row), file=sys.stderr, flush=True)))
    soak = Soak(scenario, opts)
    try:
        head = soak.run()
    except KeyboardInterrupt:
        print(closing(soak.head, soak.out, interrupted=True), file=sys.stderr)
        return 130
    print(closing(head, soak.out, interrupted=False))
    return 0


def window_line(row: dict) -> str:
    from loadgen.model.numbers import readable
    out = []
    for name, by_class in row["admission_s"].items():
        a = by_class["all"]
        classes = ", ".join(f"{c} {readable(v['p99'])}" for c, v in by_class.items() if c != "all")
        late = (row["generator_lateness_s"].get(name) or {}).get("p99")
        part = (row["partial_gang_gpus"].get(name) or {}).get("mean")
        out.append(f"{name} p99 {readable(a['p99'])} s (n {a['count']}; {classes}), pending at close "
                   f"{row['pending_at_close'].get(name)}, lateness p99 {readable(late)} s, "
                   f"partial GPUs {readable(part)}")
    firing = row.get("alerts_firing")
    alerts = "" if firing is None else f"; firing: {', '.join(firing) or 'none'}"
    partial = "" if row["complete"] else " (partial)"
    return (f"  window {row['window']}{partial} [{row['start_s']:g}-{row['end_s']:g} s] churn "
            f"{row['churn_multiplier']:g}x: " + "; ".join(out) + alerts)


def closing(head: dict, out: Path, interrupted: bool) -> str:
    n = len(head.get("windows") or [])
    left = head.get("left_behind")
    cleanup = ("" if left is None else
               "; everything labelled deleted" if not any(left.values()) else
               f"; LEFT on the cluster: {', '.join(f'{v} {k}' for k, v in left.items() if v)}")
    if interrupted:
        last = " (the last kept partial)" if n and not head["windows"][-1].get("complete") else ""
        return (f"gangstorm: soak interrupted after {n} windows{last}{cleanup}; "
                f"results in {out}/ (soak.json, report.html)")
    return (f"soak: {n} windows, ended by {head.get('ended_by')}{cleanup}; "
            f"results in {out}/ (soak.json, report.html, windows/)")
