"""gangstorm frag SCENARIO: the "Beware of Fragmentation" experiment: GPU allocation ratio and
fragmentation against arrived load (up to 130% of capacity), per simulated scheduler and each of
its placement policies (loadgen/drive/frag.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from loadgen.cli.common import add_overrides, parse_schedulers, positive_float, scenario_from


def add_parser(sub) -> None:
    p = sub.add_parser(
        "frag", help="GPU allocation and fragmentation against arrived load, per scheduler and placement policy",
        description="Draw tasks from the scenario's trace until they ask for --max-load of the fleet's GPUs; "
                    "they never leave. Writes frag.json, frag.md and report.html.")
    p.add_argument("scenario")
    p.add_argument("--schedulers", help="comma-separated schedulers (default: the scenario's schedulers_enabled)")
    add_overrides(p, "seed")
    p.add_argument("--max-load", dest="max_load", type=positive_float, default=1.3,
                   help="arrived GPU ask, as a share of capacity, to stop at (default 1.3)")
    p.add_argument("--step", type=positive_float, default=0.05, help="arrived load between samples (default 0.05)")
    p.add_argument("--out", help="output directory (default results/<scenario>-frag)")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.drive.frag import FragSettings, experiment
    from loadgen.output import frag as out_frag
    from loadgen.output.storage import atomic_write, check_out_dir
    sc = scenario_from(args, {})
    names = parse_schedulers(args.schedulers, sc)
    out = Path(args.out) if args.out else Path("results") / f"{sc.name}-frag"
    check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    result = experiment(sc, names, FragSettings(args.max_load, args.step),
                        progress=lambda n, p: print(f"gangstorm: frag: {n} / {p}", file=sys.stderr))
    atomic_write(out / "frag.json", json.dumps(result, indent=1) + "\n")
    atomic_write(out / "frag.md", out_frag.markdown(result))
    atomic_write(out / "report.html", out_frag.report_html(result))
    print(out_frag.markdown(result))
    print(f"results: {out}/frag.json, frag.md, report.html")
    return 0
