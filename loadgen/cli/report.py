"""gangstorm report RUN_DIR: (re)build report.html from a run folder or a ceiling folder."""
from __future__ import annotations

from pathlib import Path

from loadgen.cli.common import check_output_file


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="rebuild report.html of a run folder (or a ceiling folder)",
                       description="Writes one self-contained HTML page (figures as inline SVG, no script, no "
                                   "network) from summary.json, jobs.csv and timeseries.csv, or from ceiling.json. "
                                   "Works on a partial run (\"complete\": false).")
    p.add_argument("run_dir", metavar="RUN_DIR", help="results/<run-id>/ (or a `gangstorm ceiling` folder)")
    p.add_argument("--out", help="file to write (default RUN_DIR/report.html)")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.output.html import REPORT, write
    from loadgen.output.html.data import load
    from loadgen.output.html.sweep import build as build_sweep
    from loadgen.output.html.sweep import is_sweep
    from loadgen.output.soak import is_soak
    if is_soak(args.run_dir):                       # a `gangstorm soak` folder: its windows over time
        from loadgen.output.html.soak import build as build_soak
        out = str(Path(args.run_dir) / REPORT) if args.out is None else args.out
        check_output_file(out, "--out" if args.out is not None else "", within=args.run_dir, allowed=(REPORT,))
        path = build_soak(args.run_dir, out)
        print(f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)")
        return 0
    if is_sweep(args.run_dir):                      # a `gangstorm sweep` folder
        out = str(Path(args.run_dir) / REPORT) if args.out is None else args.out
        check_output_file(out, "--out" if args.out is not None else "", within=args.run_dir, allowed=(REPORT,))
        path = build_sweep(args.run_dir, out)
        print(f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)")
        return 0
    folder = load(args.run_dir)                     # a bad folder is refused before anything is written
    out = str(Path(args.run_dir) / REPORT) if args.out is None else args.out
    # the page may replace the folder's own report.html, never one of the files it is built from
    check_output_file(out, "--out" if args.out is not None else "", within=args.run_dir, allowed=(REPORT,))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = write(folder, out)
    print(f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0
