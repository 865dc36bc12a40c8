"""gangstorm profile show|anchors [PROFILE]: what a calibration profile holds and what it reproduces.

show     every timing and cost parameter of the simulated schedulers: value, provenance, source;
         the scheduler defaults the scenario schema stands in for, with their sources; and the
         profile's held-out validation. --markdown writes the tables docs/fidelity.md quotes.
anchors  the published figures (scheduler_perf, Slurm, Ray, Volcano) rebuilt as workloads and run
         on the simulated schedulers with this profile: published, simulated, ratio.
"""
from __future__ import annotations

import json

from loadgen.input.schema import SCENARIO, Field
from loadgen.model.numbers import fixed, significant


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="show a calibration profile, or the published anchors it reproduces",
                       description=__doc__)
    psub = p.add_subparsers(dest="profile_cmd", required=True, parser_class=sub._parser_class)
    s = psub.add_parser("show", help="parameters with provenance, scheduler defaults with sources, validation")
    s.add_argument("profile", nargs="?", default=None, help="shipped name (reference, local) or a file")
    s.add_argument("--markdown", action="store_true", help="markdown tables (for docs/fidelity.md)")
    s.set_defaults(func=show)
    a = psub.add_parser("anchors", help="published figures reproduced by the simulated schedulers")
    a.add_argument("profile", nargs="?", default=None)
    a.add_argument("--schedulers", help="comma-separated subset (default all with anchors)")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=anchors)


def _load(name):
    from loadgen.cli.common import UsageError
    from loadgen.input.profile import ProfileError, load
    try:
        return load(name)
    except ProfileError as e:
        raise UsageError(str(e)) from None


def sourced_defaults(spec=SCENARIO, path: str = "") -> list[tuple[str, object, str]]:
    out = []
    for key, sub in spec.items():
        dotted = f"{path}.{key}" if path else key
        if isinstance(sub, dict):
            out += sourced_defaults(sub, dotted)
        elif isinstance(sub, Field) and sub.source:
            # a profile parameter with a fallback: the value used where the profile has none
            out.append((dotted, sub.fallback if sub.fallback is not None else sub.default, sub.source))
    return out


def show(args) -> int:
    prof = _load(args.profile)
    md = args.markdown
    print(f"# profile {prof.name} ({prof.path})\n\n{prof.description}\n")
    print("| parameter | value | unit | provenance | source | command |" if md else "parameters:")
    if md:
        print("|---|---:|---|---|---|---|")
    for section, keys in prof.params.items():
        for key, p in keys.items():
            if md:
                print(f"| {section}.{key} | {p.value:g} | {p.unit} | {p.provenance} | {p.source} | "
                      f"{('`' + p.command + '`') if p.command else ''} |")
            else:
                print(f"  {section + '.' + key:<36} {p.value:>10g} {p.unit:<6} {p.provenance:<9} {p.source}")
    print("\nscheduler defaults (scenario schema):" if not md else
          "\n| setting | default | source |\n|---|---|---|")
    for dotted, default, source in sourced_defaults():
        print(f"| {dotted} | {default} | {source} |" if md else f"  {dotted:<48} {default!s:>10}  {source}")
    if md:
        _validation_markdown(prof)
        return 0
    print("\nvalidation:")
    if not prof.validation:
        print("  none: every scheduler is uncalibrated under this profile")
    for name, v in prof.validation.items():
        print(f"  {name}: " + (json.dumps(v["held_out"]) if v.get("held_out") else "no held-out case: uncalibrated"
                               + (f", because {v['uncalibrated_because']}" if v.get("uncalibrated_because") else "")))
    return 0


def _validation_markdown(prof) -> None:
    from loadgen.calibration.fidelity import table
    for name, v in prof.validation.items():
        print(f"\n### {name}\n")
        if v.get("rows"):
            print(table(name, v["rows"]))
        if v.get("anchors"):
            print("| anchor | role | published | simulated | ratio (published / sim) |\n|---|---|---:|---:|---:|")
            for r in v["anchors"]:
                print(f"| {r['anchor']} | {r['role']} | {r['published']:g} {r['unit']} | {significant(r['sim'])} "
                      f"| {significant(r['ratio'])} |")
        held = v.get("held_out")
        why = f", because {v['uncalibrated_because']}" if v.get("uncalibrated_because") else ""
        print(f"\nHeld out: {json.dumps(held)}" if held else
              f"\nNo held-out case: uncalibrated under this profile{why}.")


def anchors(args) -> int:
    from loadgen.calibration.anchors import anchors_for, table
    prof = _load(args.profile)
    names = set(args.schedulers.split(",")) if args.schedulers else None
    rows = table(prof, [a for a in anchors_for(prof.name) if names is None or a.scheduler in names])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"benchmark figures reproduced by the simulated schedulers, profile {prof.name}:\n")
    print(f"{'anchor':<40} {'role':<9} {'figure':>10} {'sim':>10}  {'ratio':>6}  unit")
    for r in rows:
        fig, sim = fixed(r["figure"], 1, grouping=False), fixed(r["sim"], 1, grouping=False)
        print(f"{r['anchor']:<40} {r['role']:<9} {fig:>10} {sim:>10}  {fixed(r['ratio'], 2):>6}  {r['unit']}")
        if r.get("explain"):
            print(f"  {'':<38} {r['explain']}")
        if r.get("outside_because"):
            print(f"  {'':<38} OUTSIDE the goal band, because {r['outside_because']}")
    print("\nratio = figure / simulated; origins: " + "; ".join(sorted({r["origin"] for r in rows}))
          + "; sources: " + "; ".join(sorted({r["source"] for r in rows})))
    return 0
