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

SUBCOMMANDS = ("run", "ceiling", "sweep", "frag", "report", "compare", "trace", "calibrate", "profile", "locust",
               "cluster")


def build_parser():
    import argparse
    import importlib

    class _Parser(argparse.ArgumentParser):
        def error(self, message):          # argparse's own errors: one line, status 2
            self.exit(2, f"{self.prog}: error: {message}\n")

        def parse_known_args(self, args=None, namespace=None):
            # an empty value (`--trace ''`, `--kubeconfig ''`) is refused, never read as "not given"
            namespace, extras = super().parse_known_args(args, namespace)
            for action in self._actions:
                if getattr(namespace, action.dest, None) == "" and action.dest != "help":
                    name = (action.option_strings[0] if action.option_strings
                            else (action.metavar or action.dest).upper())
                    namespace.empty_value = getattr(namespace, "empty_value", None) or name
            return namespace, extras

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


SIGNALLED: list[int] = []      # every SIGINT / SIGTERM this process received


def _on_signal(signum, frame):
    # SIGTERM takes Ctrl-C's path: every `finally` runs, so real backends stop their process groups.
    # The signal is also remembered: Python drops an exception raised inside a weakref callback or
    # a __del__ (garbage collection, e.g. while matplotlib frees a figure), and such a lost interrupt
    # must still end the run as interrupted.
    SIGNALLED.append(signum)
    raise KeyboardInterrupt


def _unraisable(info) -> None:
    """A KeyboardInterrupt Python could not raise (see _on_signal) is not a traceback to print, nor
    is what it leaves behind once a signal came: an interrupt inside a constructor leaves a
    half-built object whose __del__ then fails (pyparsing's Forward, while matplotlib imports)."""
    if not isinstance(info.exc_value, KeyboardInterrupt) and not SIGNALLED:
        sys.__unraisablehook__(info)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    sys.unraisablehook = _unraisable
    try:
        from loadgen.model.errors import BackendError, UserError
        args = build_parser().parse_args(argv)
        try:
            if getattr(args, "empty_value", None):
                raise UserError(f"{args.empty_value}: expected a value, got an empty one")
            return int(args.func(args) or 0)
        except UserError as e:
            print(f"gangstorm: error: {e}{_kept() if getattr(e, 'after_start', False) else ''}", file=sys.stderr)
            return 2
        except BackendError as e:
            print(f"gangstorm: error: {e}{_kept()}", file=sys.stderr)
            return 1
        except OSError as e:
            # what the machine refuses for any path (too long for the OS, a full disk, a quota, a
            # read-only file system) is one line, wherever it is met
            import errno
            if e.errno not in (errno.ENAMETOOLONG, errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                raise
            where = f"{e.filename}: " if e.filename else ""
            print(f"gangstorm: error: {where}{e.strerror}{_kept()}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        print(_interrupted(), file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`gangstorm ... | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception:
        # an interrupt a library turned into its own error (numpy's import raises ImportError when
        # a KeyboardInterrupt lands inside its C initialisation) is still the interrupt
        if SIGNALLED:
            print(_interrupted(), file=sys.stderr)
            return 130
        raise


def _last_folder():
    """The results folder this process created last (None before any), for the closing line."""
    storage = sys.modules.get("loadgen.output.storage")
    return storage.CREATED[-1] if storage and storage.CREATED else None


def _kept() -> str:
    folder = _last_folder()
    return f"; partial results kept in {folder}" if folder else ""


def _interrupted() -> str:
    folder = _last_folder()
    if folder is None:
        return "gangstorm: interrupted before any result was written"
    kept = "ceiling.json" if (folder / "ceiling.json").exists() else "summary.json"
    if _complete(folder / kept):
        # the signal came while report.html (or the index line) was being written: the results are whole
        return (f"gangstorm: interrupted after the run finished; complete results in {folder} "
                f"(report.html may be missing: `gangstorm report {folder}` builds it)")
    return f"gangstorm: interrupted; partial results kept in {folder} ({kept} has \"complete\": false)"


def _complete(path) -> bool:
    import json
    try:
        return json.loads(path.read_text()).get("complete") is True
    except (OSError, ValueError, AttributeError):
        return False


def console() -> int:
    """The installed `gangstorm` command. Once main has returned, a late signal must neither turn
    the exit into a traceback nor kill the shutdown, so both are ignored from then on (ignored, not
    blocked: a mask is per thread, and a library's thread would take the signal with the default
    action once the interpreter has restored it). After an interrupt the status is 130 even if
    the interrupt landed inside an import (CPython then marks the process to re-raise SIGINT at
    exit), so that exit skips the interpreter's shutdown."""
    try:
        try:
            code = main()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
    except KeyboardInterrupt:
        # a signal that landed in a C call at the very end of main() is handled at the next
        # bytecode boundary, which can be here, outside main's own handler
        print(_interrupted(), file=sys.stderr)
        code = 130
    if SIGNALLED and code != 130:
        print(_interrupted(), file=sys.stderr)      # the interrupt was swallowed: see _on_signal
        code = 130
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(console())
