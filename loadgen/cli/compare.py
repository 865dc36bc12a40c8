"""gangstorm compare RUN_A RUN_B: metric-by-metric differences per scheduler and class; exit 1 on a
regression beyond tolerance (for CI against a stored baseline), 2 on bad input."""
from __future__ import annotations

import json
import math
from pathlib import Path

from loadgen.cli.common import UsageError
from loadgen.model.errors import UserError


class CompareError(UserError):
    """A run or baseline that cannot be compared: one line, exit 2."""


MAX_SUMMARY_BYTES = 256 * 1024 * 1024     # a 10,000-node four-scheduler summary.json is about 60 KiB


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare two runs metric by metric; exit 1 on a regression beyond tolerance",
        description="RUN_A is the baseline, RUN_B the candidate. Each is a run folder, a summary.json (or a "
                    "baseline file written from one), or a name from results/index.jsonl: latest, latest~N "
                    "(N runs before the latest) or a run id. Exit status: 0 no regression, 1 regression, "
                    "2 bad input.")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--tolerance", type=_tolerance, default=0.10,
                   help="relative change allowed before a worse value is a regression (default 0.10)")
    p.add_argument("--tolerance-metric", dest="per_metric", action="append", default=[], metavar="METRIC=T",
                   help="a tolerance for one metric, e.g. admission_p99=0.05 (repeatable; control_plane_busy_s "
                        "sets every control-plane component's)")
    p.add_argument("--all", action="store_true", help="print every metric, not only the changed ones")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    p.add_argument("--results", default="results", help="results folder holding index.jsonl (default results)")
    p.set_defaults(func=main)


def _tolerance(text: str) -> float:
    import argparse
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def per_metric(items: list[str]) -> dict[str, float]:
    from loadgen.output.compare import METRIC_NAMES
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in METRIC_NAMES:
            raise UsageError(f"--tolerance-metric {item}: expected METRIC=T with METRIC one of "
                             f"{', '.join(METRIC_NAMES)}")
        try:
            out[name] = _tolerance(value)
        except Exception as e:      # argparse.ArgumentTypeError
            raise UsageError(f"--tolerance-metric {item}: {e}") from None
    return out


def load_run(name: str, results: str) -> tuple[Path, dict]:
    """The summary a name points at: a folder with summary.json, a JSON file, or an index name."""
    from loadgen.input import files
    from loadgen.output.index import resolve, runs
    p = Path(name)
    try:
        exists = p.exists()
    except OSError as e:
        raise CompareError(f"{name}: {files.os_reason(e)}") from None
    if not exists:
        found = resolve(name, Path(results))
        if found is None:
            raise CompareError(f"{name}: expected a run folder, a summary.json or a name in {results}/index.jsonl "
                               f"(latest, latest~N, a run id); found none ({len(runs(Path(results)))} runs listed)")
        p = found
    f = p / "summary.json" if p.is_dir() else p
    try:
        data = files.read_bytes(f, MAX_SUMMARY_BYTES, "gangstorm summary.json")
    except files.FileError as e:
        if e.expected == "no such file":
            raise CompareError(f"{p}: expected a run folder holding summary.json, found none") from None
        raise CompareError(str(e)) from None
    try:
        doc = files.loads(data.decode("utf-8").removeprefix("\ufeff"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise CompareError(f"{f}: expected a gangstorm summary.json, got binary data") from None
    except ValueError as e:
        raise CompareError(f"{f}: expected a gangstorm summary.json, "
                           f"got invalid JSON ({str(e).split(':')[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("schedulers"), dict):
        raise CompareError(f"{f}: schedulers: expected a gangstorm summary.json with a schedulers mapping")
    for name, result in doc["schedulers"].items():
        if not isinstance(result, dict):
            raise CompareError(f"{f}: schedulers.{name}: expected a mapping of that scheduler's results, "
                               f"got {type(result).__name__}")
    return f, doc


def _no_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _finite(o):
    """NaN and infinities (a change from 0, a ratio to nothing) as null, as summary.json writes them."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def main(args) -> int:
    from loadgen.output.compare import compare, render
    tolerances = per_metric(args.per_metric)
    fa, a = load_run(args.run_a, args.results)
    fb, b = load_run(args.run_b, args.results)
    result = compare(a, b, args.tolerance, tolerances)
    if args.json:
        doc = {"a": str(fa), "b": str(fb), "notes": result.notes, "regressions": len(result.regressions),
               "rows": [{**r.__dict__, "delta": r.delta, "delta_pct": r.delta_pct} for r in result.rows]}
        print(json.dumps(_finite(doc), indent=2, allow_nan=False))     # JSON has no Infinity: null
    else:
        print(f"A: {fa}\nB: {fb}")
        print(render(result, show_all=args.all))
    return 1 if result.regressions else 0
