"""`gangstorm` entry point: a thin argparse layer; each subcommand lives in its own module."""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

from loadgen.cli.common import UsageError
from loadgen.scenario import ScenarioError
from loadgen.traces import TraceError

SUBCOMMANDS = ("run", "ceiling", "trace", "calibrate", "profile", "locust")


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # argparse's own errors: one line, status 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gangstorm", description="Load and chaos testbed for GPU gang schedulers.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"loadgen.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"loadgen.cli.{name}":
                continue
            raise
        mod.add_parser(sub)
    return parser


def _sigterm(signum, frame):
    # Same path as Ctrl-C: every `finally` runs, so real backends stop their process groups.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    # A shell starting us in the background hands down SIGINT as ignored; Ctrl-C must still work.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return int(args.func(args) or 0)
    except (ScenarioError, TraceError, UsageError) as e:
        print(f"gangstorm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gangstorm: interrupted; partial results kept (summary.json has \"complete\": false)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
