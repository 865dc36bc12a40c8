"""`gangstorm` entry point: a thin argparse layer; each subcommand lives in its own module.

Only the standard library is imported before the signal handlers are in place, so a Ctrl-C (or
SIGTERM) at any moment after the interpreter starts ends in one line and status 130, including
while numpy and the subcommands are still importing, and in a run started in the background by a
script (which inherits SIGINT as ignored).
"""
from __future__ import annotations

import os
import signal
import sys

SUBCOMMANDS = ("run", "ceiling", "report", "compare", "trace", "calibrate", "profile", "locust")


def build_parser():
    import argparse
    import importlib

    class _Parser(argparse.ArgumentParser):
        def error(self, message):          # argparse's own errors: one line, status 2
            self.exit(2, f"{self.prog}: error: {message}\n")

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
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        from loadgen.errors import BackendError, UserError
        args = build_parser().parse_args(argv)
        try:
            return int(args.func(args) or 0)
        except UserError as e:
            print(f"gangstorm: error: {e}", file=sys.stderr)
            return 2
        except BackendError as e:
            print(f"gangstorm: error: {e}{_kept()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        print(_interrupted(), file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`gangstorm ... | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _kept() -> str:
    storage = sys.modules.get("loadgen.storage")
    folders = storage.CREATED if storage else []
    return f"; partial results kept in {folders[-1]}" if folders else ""


def _interrupted() -> str:
    storage = sys.modules.get("loadgen.storage")
    folders = storage.CREATED if storage else []
    if not folders:
        return "gangstorm: interrupted before any result was written"
    kept = "ceiling.json" if (folders[-1] / "ceiling.json").exists() else "summary.json"
    return f"gangstorm: interrupted; partial results kept in {folders[-1]} ({kept} has \"complete\": false)"


def console() -> int:
    """The installed `gangstorm` command. Once main has returned, a late signal must not turn the
    exit into a traceback, so both are blocked while the interpreter shuts down; after an interrupt
    the status is 130 even if the interrupt landed inside an import (CPython then marks the process
    to re-raise SIGINT at exit), so that exit skips the interpreter's shutdown."""
    try:
        code = main()
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(console())
