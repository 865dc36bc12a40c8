"""Running the gangstorm CLI in-process on generated input, and judging the outcome.

The promise every case is held to: exit 2 with one `gangstorm: error:` line and nothing written,
or exit 0 with a complete, consistent run folder; never a traceback, never past a time bound,
never a file outside the run folder.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from loadgen.cli.main import main
from loadgen.output.storage import CREATED, verify

TIME_BOUND_S = 30.0
OUTCOMES: Counter = Counter()          # per test: "error", "ran" (read by test_bad_input_fuzz's report)


class TimeBoundExceeded(Exception):
    pass


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    written: list[str]                 # files created in the sandbox besides the inputs and the run folder
    out: Path
    summary: dict | None = None        # the run folder's summary.json, read before the sandbox goes
    kept: object = None                # what run_cli's `keep(sandbox)` returned, before the sandbox goes


def _alarm(signum, frame):
    raise TimeBoundExceeded(f"no answer within {TIME_BOUND_S:g} s")


@dataclass(frozen=True)
class Special:
    """A sandbox entry that is not a regular file: "fifo", "device" (a character device like
    /dev/null: made with mknod as root, else a symbolic link to /dev/null, which a non-root process
    cannot replace) or "symlink" to `target` ({dir} replaced). After the command it must still be
    what it was: no output may replace a FIFO or a device."""
    kind: str
    target: str = ""


FIFO, DEVICE = Special("fifo"), Special("device")
LONG = "x" * 300 + "/" + "y" * 5000            # {long}: a path longer than the OS allows


def _make(path: Path, spec: Special, sandbox: str) -> None:
    if spec.kind == "fifo":
        os.mkfifo(path)
    elif spec.kind == "device" and os.geteuid() == 0:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))       # a private /dev/null
    elif spec.kind == "device":
        os.symlink("/dev/null", path)
    else:
        os.symlink(spec.target.replace("{dir}", sandbox), path)


def _still(path: Path, spec: Special) -> bool:
    mode = os.lstat(path).st_mode
    if spec.kind == "fifo":
        return stat.S_ISFIFO(mode)
    if spec.kind == "device":
        return stat.S_ISCHR(mode) or stat.S_ISLNK(mode)
    return stat.S_ISLNK(mode)


def run_cli(argv: list[str], files: dict[str, bytes | Special], out_name: str = "out", keep=None,
            codes: tuple[int, ...] = (0, 2), label: str = "") -> Outcome:
    """argv with {dir} replaced by a fresh sandbox folder holding `files` ({long} by an over-long
    path); cwd is the sandbox. `keep(sandbox)` may look at the sandbox before it is removed.
    `codes`: the exit statuses the command may end in (1: a regression found by compare, or a
    backend that failed, in one line); `label` tallies the outcome under that name in OUTCOMES."""
    with tempfile.TemporaryDirectory(prefix="gs-fuzz-") as d:
        sandbox = Path(d)
        for name, data in files.items():           # "name/": an empty folder
            (sandbox / name).parent.mkdir(parents=True, exist_ok=True)
            if name.endswith("/"):
                (sandbox / name).mkdir(exist_ok=True)
            elif isinstance(data, Special):
                _make(sandbox / name, data, d)
            else:
                (sandbox / name).write_bytes(data)
        given = {Path(name).parts[0] for name in files}
        inputs = given - {out_name}
        argv = [a.replace("{dir}", d).replace("{long}", LONG) for a in argv]
        cwd = os.getcwd()
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
        out, err = io.StringIO(), io.StringIO()
        os.chdir(d)
        CREATED.clear()                             # each command is a process of its own
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as e:          # argparse's own one-line errors
                    code = e.code if isinstance(e.code, int) else 2
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            os.chdir(cwd)
            for s, h in handlers.items():
                signal.signal(s, h)
        run_dir = sandbox / out_name
        written = sorted(str(p.relative_to(sandbox)) for p in sandbox.rglob("*")
                         if p.relative_to(sandbox).parts[0] not in inputs | {out_name})
        changed = [name for name, data in files.items()
                   if not name.endswith("/") and (not _still(sandbox / name, data) if isinstance(data, Special)
                                                  else (sandbox / name).read_bytes() != data)]
        assert changed == [], f"inputs changed: {changed}"
        outcome = Outcome(code, out.getvalue(), err.getvalue(), written, run_dir)
        check(outcome, out_given=out_name in given, codes=codes, label=label)
        if (run_dir / "summary.json").is_file():
            outcome.summary = json.loads((run_dir / "summary.json").read_text())
        if keep is not None:
            outcome.kept = keep(sandbox)
        return outcome


def check(o: Outcome, out_given: bool = False, codes: tuple[int, ...] = (0, 2), label: str = "") -> None:
    lines = o.stderr.strip().splitlines()
    assert o.code in codes, (o.code, o.stderr)
    assert "Traceback" not in o.stderr, o.stderr
    assert o.written == [], o.written
    if label:
        OUTCOMES[f"{label}: exit {o.code}"] += 1
    if o.code == 1:
        OUTCOMES["regression or backend failed"] += 1
        assert not lines or (len(lines) <= 2 and "error: " in lines[-1]), o.stderr
    elif o.code == 2:
        OUTCOMES["error"] += 1
        started = o.out.exists() and len(lines) == 2 and " -> " in lines[0]    # a run's banner, then what stopped it
        assert (len(lines) == 1 or started) and lines[-1].startswith("gangstorm") and "error: " in lines[-1], o.stderr
        assert out_given or started or not o.out.exists(), "a refused input left a run folder"
        if started:
            assert verify(o.out) == []
    else:
        OUTCOMES["ran"] += 1
        if o.out.exists() and (o.out / "summary.json").exists():
            assert verify(o.out) == []
