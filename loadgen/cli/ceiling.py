"""gangstorm ceiling SCENARIO: per scheduler, search the churn multiplier at which the SLO breaks,
and name the control-plane component that saturated there."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from loadgen.cli.common import (
    SeedProgress,
    UsageError,
    add_overrides,
    add_seeds,
    check_seed_flags,
    parse_schedulers,
    positive_float,
    scenario_from,
    seeds_from,
)
from loadgen.model.numbers import NA, fixed, significant


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ceiling", help="search each scheduler's churn ceiling (SLO break point) and what saturated",
        description="From --start (default: the scenario's churn multiplier) multiply the churn by --growth "
                    "until the admission SLO breaks, then bisect until the bracket is within --precision. "
                    "Every point offers --jobs jobs. With --backend real each point starts the real scheduler.")
    p.add_argument("scenario")
    p.add_argument("--schedulers")
    add_overrides(p, "nodes", "seed", "ray_nodes")
    p.add_argument("--backend", choices=("sim", "real"), default=None, help="sim (default) or real")
    p.add_argument("--time-scale", type=positive_float, default=None,
                   help="real backend: virtual seconds per wall second (default 1: the control plane at its own speed)")
    p.add_argument("--slo-p99-s", dest="slo_p99_s", type=positive_float,
                   help="admission p99 SLO in seconds (default: the scenario's slo.admission_p99_s)")
    p.add_argument("--start", type=positive_float, help="first churn multiplier (sets ceiling.start)")
    p.add_argument("--growth", type=positive_float, help="factor between points until the SLO breaks (ceiling.growth)")
    p.add_argument("--precision", type=positive_float, help="stop when broken/met <= 1 + this (ceiling.precision)")
    p.add_argument("--max-multiplier", dest="max_multiplier", type=positive_float,
                   help="largest multiplier tried (ceiling.max_multiplier)")
    p.add_argument("--max-points", dest="max_points", type=int,
                   help="points per scheduler at most (ceiling.max_points)")
    p.add_argument("--jobs", type=int, help="jobs offered at every point (ceiling.jobs)")
    p.add_argument("--out", help="output directory (default results/<run-id>-ceiling)")
    add_seeds(p, "--parallel")
    from loadgen.cli.existing import add_existing
    add_existing(p)
    p.set_defaults(func=main)


FLAG_FIELDS = {"start": "ceiling.start", "growth": "ceiling.growth", "precision": "ceiling.precision",
               "max_multiplier": "ceiling.max_multiplier", "max_points": "ceiling.max_points",
               "jobs": "ceiling.jobs", "slo_p99_s": "slo.admission_p99_s"}


def main(args) -> int:
    from loadgen.cli.existing import attached_schedulers, existing_from, preflight
    from loadgen.drive.ceiling import sweep
    from loadgen.drive.comparative import RESULTS_ROOT, write_report
    from loadgen.model.errors import BackendError
    from loadgen.output import storage
    from loadgen.output.storage import atomic_write, check_out_dir, fresh_run_dir, new_run_id
    existing = existing_from(args)
    if args.dry_run:
        raise UsageError("--dry-run: not used with ceiling (try it on `gangstorm run` with the same flags)")
    if args.out is not None:
        check_out_dir(args.out)
    check_seed_flags(args, "--parallel")
    sc = scenario_from(args, FLAG_FIELDS)       # validated as the file's own values would be
    seeds, parallel, rule = seeds_from(args, sc, "--parallel")
    if seeds is not None and len(seeds) == 1:
        sc = sc.with_overrides(seed=seeds[0])
    names = (existing and attached_schedulers(args.schedulers, existing)) or parse_schedulers(args.schedulers, sc)
    if existing is not None:       # foreign workloads, nodes, Volcano: refused before the first point
        from loadgen.input.plan import plan_run
        preflight(sc, names, args.backend, plan_run(sc), existing, args.time_scale or 1.0)
    out = Path(args.out) if args.out else fresh_run_dir(RESULTS_ROOT, new_run_id(sc.name) + "-ceiling")
    check_out_dir(out)
    time_scale = args.time_scale if args.time_scale is not None else 1.0

    def save(result: dict) -> None:
        atomic_write(out / "ceiling.json", json.dumps(result, indent=2, allow_nan=False) + "\n")

    if seeds is not None and len(seeds) > 1:
        return seeds_main(sc, names, out, seeds, parallel, rule, args.backend, time_scale, existing)
    try:
        result = sweep(sc, names, out, backend=args.backend, time_scale=time_scale,
                       progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True), checkpoint=save,
                       existing=existing)
    except (KeyboardInterrupt, BackendError):
        if (out / "ceiling.json").exists():
            storage.CREATED.append(out)     # the line the CLI prints names the search's folder, not a point's
        raise
    save(result)
    page = write_report(out)
    print(render(result))
    print(f"results: {out}/ceiling.json" + (", report.html (the ceiling curve)" if page else ""))
    return 0


def seeds_main(sc, names, out, seeds, parallel, rule, backend, time_scale, existing) -> int:
    """--seeds: a complete search per seed in <out>/seeds/<seed>/, the ceilings over the seeds."""
    from loadgen.drive.ceiling import sweep_seeds
    from loadgen.drive.comparative import write_report
    from loadgen.model.errors import BackendError
    from loadgen.output import storage
    at_once = f"{parallel} at a time" if parallel > 1 else "one at a time"
    print(f"gangstorm: ceiling {sc.name}: {', '.join(names)} ({backend}), {len(seeds)} seeds {at_once} -> {out}/",
          file=sys.stderr)
    try:
        result = sweep_seeds(sc, names, out, seeds, parallel, rule, backend=backend, time_scale=time_scale,
                             existing=existing, on_event=SeedProgress(len(seeds)))
    except (KeyboardInterrupt, BackendError, UsageError):
        if (out / "ceiling.json").exists():
            storage.CREATED.append(out)
        raise
    page = write_report(out)
    print(render_seeds(result))
    print(f"results: {out}/ceiling.json" + (", report.html" if page else "")
          + f"; each seed: {out}/seeds/<seed>/ceiling.json")
    return 0


def render_seeds(result: dict) -> str:
    """The ceilings over seeds: median [low, high], what saturated on how many seeds, the pair tests."""
    from loadgen.output.aggregate import ALL, CEILING
    from loadgen.output.markdown_seeds import marks, too_few
    slo = result["slo"]["admission_p99_s"]
    seeds = result.get("seeds") or {}
    n = len(seeds.get("completed") or [])
    sig = result.get("significance") or {}
    lines = [f"SLO: admission p99 <= {slo:g} s and <= 1% never admitted; {result['nodes']:,} nodes, "
             f"{result['jobs_per_point']:,} jobs per point, backend {result['backend']}; {n} seeds "
             f"({', '.join(map(str, seeds.get('completed') or []))}); median [interval] over the seeds",
             f"{'scheduler':<12} {'ceiling (churn x)':>28} {'jobs/s at it':>12}  saturated at the break (seeds)"]
    m = marks({"schedulers": result["ceiling"], "significance": sig}, ALL, CEILING)
    for name, c in result["ceiling"].items():
        e = (c.get("spread") or {}).get(CEILING.name) or {}
        ceil = "none" if e.get("median") is None else f"{e['median']:g}x [{e['low']:g}x, {e['high']:g}x]"
        ceil += f" {m[name]}" if name in m else ""
        sat = ", ".join(f"{k} x{v}" for k, v in (c.get("saturated_seeds") or {}).items())
        caps = ", ".join(f"{k} x{v}" for k, v in (c.get("cap_seeds") or {}).items())
        lines.append(f"{name:<12} {ceil:>28} {fixed(c.get('jobs_per_s'), 1):>12}  {sat}"
                     + (f" (search cap: {caps})" if caps else ""))
    if not sig.get("testable"):
        lines.append(too_few(n, sig))
    else:
        lines.append(f"≈: not significantly different from the highest ceiling ({sig['test']}, alpha {sig['alpha']:g})")
        for p in sig.get("pairs") or []:
            verdict = f"{p['better']} higher" if p["significant"] and p.get("better") else (
                "differ" if p["significant"] else "n.s.")
            diff = "n/a" if p["median_diff"] is None else f"{p['median_diff']:+g}x"
            lines.append(f"  {p['b']} - {p['a']}: {diff} (p {p['p_value']:.3g}) {verdict}")
    return "\n".join(lines)


def render(result: dict) -> str:
    slo = result["slo"]["admission_p99_s"]
    lines = [f"SLO: admission p99 <= {slo:g} s and <= 1% never admitted; {result['nodes']:,} nodes, "
             f"{result['jobs_per_point']:,} jobs per point, backend {result['backend']}",
             f"{'scheduler':<12} {'ceiling':>9} {'broke at':>9} {'jobs/s':>8} {'pods/s':>8} {'points':>6}  saturated "
             "at the break"]
    for n, c in result["ceiling"].items():
        best, bad = c["ceiling_churn_multiplier"], c["broke_at_churn_multiplier"]
        label = "none" if best is None else significant(best, unit="x")
        cap = f" (search cap: {c['cap']})" if c["cap"] else ""
        evidence = c["evidence"] or {}
        load = evidence["load"].get(c["saturated"]) if c["saturated"] and evidence else None
        held = evidence.get("control_plane", {}).get("allocated_over_offered")
        waited = "none near full (waited for GPUs" + (f", allocated {held:g}x offered)" if held else ")")
        sat = NA if bad is None else (c["saturated"] or waited)
        if load is not None:
            sat += f" (load {load:.2f})"
        lines.append(f"{n:<12} {label:>9} {significant(bad, unit='x'):>9} "
                     f"{fixed(c['jobs_per_s']):>8} {fixed(c['pods_per_s']):>8} {c['points_run']:>6}  {sat}{cap}")
    return "\n".join(lines)
