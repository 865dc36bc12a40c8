"""Flag parsing shared by subcommands: schedulers, overrides, progress bar."""
from __future__ import annotations

import argparse
import sys
import time

from loadgen.input.overrides import OVERRIDES, TIME_SCALE, Override, OverrideError, load_with_overrides
from loadgen.input.scenario import Scenario
from loadgen.model.errors import UserError
from loadgen.model.registry import SCHEDULERS, backends


class UsageError(UserError):
    """A bad flag value: one line, exit status 2."""


def add_targets(parser, default_help: str = "the scenario's schedulers_enabled") -> None:
    """--schedulers and --backend, as every run-like subcommand takes them."""
    parser.add_argument("--schedulers",
                        help=f"comma-separated subset of {','.join(SCHEDULERS)} (default: {default_help})")
    parser.add_argument("--backend", choices=backends(), default=None,
                        help="sim: the embedded simulated schedulers (default); real: launch the real ones "
                             "(or attach to an existing cluster, see below)")
    parser.add_argument("--profile", help="calibration profile of the simulated schedulers: a shipped name "
                        "(reference, local) or a profile file from `gangstorm calibrate` (default: the "
                        "scenario's `profile:`, else reference)")
    from loadgen.cli.existing import add_existing
    add_existing(parser)


def parse_schedulers(text: str | None, scenario: Scenario) -> list[str]:
    if text is None:
        return list(scenario.data["schedulers_enabled"])
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in SCHEDULERS]
    if bad or not names:
        raise UsageError(f"--schedulers: expected a comma-separated list of {', '.join(SCHEDULERS)}, got {text!r}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--schedulers: expected each scheduler once, got {', '.join(twice)} twice in {text!r}")
    return names


def add_overrides(parser, *dests: str, required: tuple[str, ...] = (), time_scale: float = TIME_SCALE) -> None:
    """Add the shared scenario overrides (loadgen.input.overrides) named by dests to a subcommand."""
    for dest in dests:
        o = OVERRIDES[dest]
        scale = dest == "time_scale"
        parser.add_argument(o.flag, dest=dest, type=_argtype(o), required=dest in required,
                            help=o.help.replace(f"default {TIME_SCALE:g}",
                                                f"default {time_scale:g}") if scale else o.help,
                            default=time_scale if scale else None)


SEEDS_HELP = ("run every seed as a complete run in <out>/seeds/<seed>/: N = the scenario's seed and the next N-1 "
              "(1 to 60), a,b,c = those seeds; the summary gives each figure as the median over the seeds with its "
              "95%% order-statistic interval and marks head-to-head differences that are not significant (exact "
              "signed-rank test, alpha 0.05, needs >= 6 seeds); see docs/seeds.md")
PARALLEL_HELP = ("with --seeds: at most J seeds at once, each in its own process (default: os.cpu_count()); "
                 "a real backend runs one seed at a time")


def add_seeds(parser, *parallel_flags: str) -> None:
    """--seeds and the flag(s) bounding how many run at once (text, checked by seeds_from)."""
    parser.add_argument("--seeds", metavar="N|a,b,c", help=SEEDS_HELP)
    parser.add_argument(*parallel_flags, dest="parallel", metavar="J", help=PARALLEL_HELP)


def check_seed_flags(args, parallel_flag: str) -> None:
    """What the flags alone refuse, before the scenario is read."""
    if args.seeds is not None and getattr(args, "seed", None) is not None:
        raise UsageError("--seeds: not used with --seed (--seeds N runs the scenario's seed and the next N-1; "
                         "--seeds a,b,c names every seed)")
    if args.seeds is None and args.parallel is not None:
        raise UsageError(f"{parallel_flag}: only with --seeds (a single seed's schedulers run one after another "
                         f"on the same plan)")


def seeds_from(args, scenario: Scenario, parallel_flag: str) -> tuple[list[int] | None, int, str]:
    """(the seeds, how many at once, the rule that chose them); (None, 1, "") without --seeds."""
    from loadgen.drive.seeds import parse_parallel, parse_seeds, seeds_rule
    if args.seeds is None:
        return None, 1, ""
    seeds = parse_seeds(args.seeds, scenario.seed)
    counted = "," not in args.seeds
    return seeds, parse_parallel(args.parallel, args.backend or "sim", len(seeds), parallel_flag), \
        seeds_rule(seeds, scenario.seed, counted)


def _argtype(o: Override):
    def parse(text: str):
        try:
            return o.parse(text)
        except OverrideError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None
    parse.__name__ = o.kind.__name__
    return parse


def scenario_from(args, fields: dict[str, str] | None = None) -> Scenario:
    """The subcommand's scenario with whichever shared overrides it declared and its own flags
    that set a scenario key (`fields`: dest -> dotted key), validated once."""
    more = {f"--{dest.replace('_', '-')}": (key, getattr(args, dest)) for dest, key in (fields or {}).items()}
    return load_with_overrides(args.scenario, profile=getattr(args, "profile", None), more=more,
                               **{d: getattr(args, d) for d in OVERRIDES if OVERRIDES[d].key and hasattr(args, d)})


def check_output_file(path: str, flag: str = "", **policy) -> None:
    """A file we may write (loadgen/output/paths.py): a new or regular file, not a directory, a
    device or a FIFO, not an input (`policy`: inputs=..., within=..., allowed=...), not under a
    file, in a writable folder."""
    from loadgen.output.paths import check_output_file as check
    check(path, flag, **policy)


def _positive(kind, noun: str):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            v = None
        if v is None or not v > 0 or v == float("inf") or v != v:
            raise argparse.ArgumentTypeError(f"expected a positive {noun}, got {text!r}")
        return v
    parse.__name__ = f"positive_{kind.__name__}"
    return parse


positive_int = _positive(int, "integer")
positive_float = _positive(float, "number")


class ProgressBar:
    """One line on stderr per scheduler, redrawn in place when stderr is a terminal."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream, self.width = stream, width
        self.tty = stream.isatty()
        self.current = None
        self.t0 = time.monotonic()
        self.last = -1.0

    def __call__(self, name: str, frac: float) -> None:
        if name != self.current:
            if self.current is not None:
                self._draw(self.current, 1.0, end=True)
            self.current, self.t0, self.last = name, time.monotonic(), -1.0
        if self.tty:
            self._draw(name, frac)
        elif frac - self.last >= 0.25:
            self.last = frac
            self._draw(name, frac, end=True)

    def _draw(self, name: str, frac: float, end: bool = False) -> None:
        n = int(self.width * min(frac, 1.0))
        line = f"  {name:<12} [{'#' * n}{'.' * (self.width - n)}] {frac * 100:5.1f}% {time.monotonic() - self.t0:6.1f}s"
        self.stream.write(("\r" + line) if self.tty and not end else (("\r" if self.tty else "") + line + "\n"))
        self.stream.flush()

    def done(self) -> None:
        if self.current is not None:
            self._draw(self.current, 1.0, end=True)
            self.current = None


class SeedProgress:
    """Seeds side by side (drive.seeds events): a line when each seed ends, and on a terminal one
    status line redrawn in place with each running seed's scheduler and share done. A text detail
    (the ceiling's progress lines) is printed as it comes, labelled with its seed."""

    def __init__(self, total: int, stream=sys.stderr):
        self.stream, self.total, self.finished = stream, total, 0
        self.tty = stream.isatty()
        self.running: dict[int, str] = {}

    def __call__(self, kind: str, seed: int, *detail) -> None:
        if kind == "start":
            self.running[seed] = "starting"
        elif kind == "progress" and len(detail) == 1 and isinstance(detail[0], str):
            self._line(f"  [seed {seed}] {detail[0]}")
            return
        elif kind == "progress":
            self.running[seed] = f"{detail[0]} {float(detail[-1]) * 100:3.0f}%"
        elif kind in ("done", "stopped"):
            self.running.pop(seed, None)
            self.finished += 1
            out = detail[0]
            word = "done" if kind == "done" else out.status
            self._line(f"  seed {seed:<6} {word} in {out.wall_s:.1f} s  [{self.finished}/{self.total}]")
            return
        if self.tty:
            self._status()

    def _line(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        if self.tty:
            self._status()
        self.stream.flush()

    def _status(self) -> None:
        if not self.running:
            return
        self.stream.write("\r\033[K  running: "
                          + ", ".join(f"seed {s} {what}" for s, what in sorted(self.running.items())))
        self.stream.flush()
