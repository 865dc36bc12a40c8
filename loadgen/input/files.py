"""Reading a user's input file: a regular file only, never more than a cap, one-line reasons.

Every file gangstorm reads on a user's word (a scenario, profile, trace, kubeconfig, slurm.conf,
a compared run or summary, results/index.jsonl, a run folder's files) comes through here, because
a plain open() + read() of the wrong kind of path never ends: a FIFO or /dev/stdin waits forever
for a writer, /dev/zero and /dev/urandom never reach an end, and a directory or an over-long path
ends in a traceback. The file is opened without blocking, checked to be a regular file on the
descriptor itself (no window between the check and the read), and read up to its cap; what else it
is (a directory, a FIFO, a character device, ...) or why it cannot be opened is one line naming the
path.

JSON from such a file is parsed with the same care: NaN and Infinity (not JSON), numbers beyond a
float or integers longer than any count (a 400-digit id), and nesting deeper than any gangstorm file
are refused with a reason, never a RecursionError or an OverflowError further on.
"""
from __future__ import annotations

import errno
import io
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loadgen.model.errors import UserError

MIB = 1024 * 1024
MAX_INT_DIGITS = 20          # an int64 has 19; a job id is at most 2**53 (16)
MAX_JSON_DEPTH = 64          # summary.json nests about 8 levels; a trace line 1


class FileError(UserError):
    """(path, expectation): one line; `expected` alone for callers that name the file their way."""

    def __init__(self, path: str | Path, expected: str):
        self.path, self.expected = str(path), expected
        super().__init__(f"{path}: {expected}")


KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a stat mode is, in words ("a regular file", "a FIFO (named pipe)", ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def os_reason(e: OSError) -> str:
    """Why the OS refused a path, as the end of a one-line error."""
    if e.errno == errno.ENOENT:
        return "no such file"
    if e.errno == errno.ENAMETOOLONG:
        return f"the path is longer than the system allows ({e.strerror})"
    if e.errno == errno.ENOTDIR:
        return "no such file (a folder on its path is a file)"
    if e.errno == errno.ELOOP:
        return "a symbolic link loop"
    return f"cannot be read ({e.strerror or type(e).__name__})"


def open_regular(path: str | Path, what: str = "file") -> io.BufferedReader:
    """`path` opened for reading in binary, or FileError if it is anything but a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except ValueError:                      # an embedded NUL
        raise FileError(repr(str(path)), f"expected a {what} path, got one holding a NUL character") from None
    except IsADirectoryError:
        raise FileError(path, f"expected a {what}, got a directory") from None
    except OSError as e:
        raise FileError(path, os_reason(e)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileError(path, f"expected a {what}, got {kind(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _size(n: int) -> str:
    return f"{n / MIB:,.1f} MiB" if n >= MIB else f"{n:,} bytes"


def read_bytes(path: str | Path, cap: int, what: str = "file") -> bytes:
    """The whole of a regular file of at most `cap` bytes."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise FileError(path, f"expected a {what} of at most {_size(cap)}, got {_size(size)}")
        try:
            data = f.read(cap + 1)          # /proc files report size 0; a growing file may pass the stat
        except OSError as e:
            raise FileError(path, os_reason(e)) from None
    if len(data) > cap:
        raise FileError(path, f"expected a {what} of at most {_size(cap)}, it holds more")
    return data


def read_text(path: str | Path, cap: int, what: str = "file") -> str:
    """A regular UTF-8 text file of at most `cap` bytes (a leading BOM dropped)."""
    data = read_bytes(path, cap, what)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise FileError(path, f"byte {e.start}: expected UTF-8 text (is this a binary file?)") from None


def lines(path: str | Path, cap: int, what: str = "file") -> Iterator[str]:
    """The lines of a regular UTF-8 text file, read as they come, at most `cap` bytes in all; the
    caller names a line's own problems (this raises FileError for the file's)."""
    with open_regular(path, what) as raw:
        size = os.fstat(raw.fileno()).st_size
        if size > cap:
            raise FileError(path, f"expected a {what} of at most {_size(cap)}, got {_size(size)}")
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        seen = 0
        try:
            for line in text:
                seen += len(line)
                if seen > cap:
                    raise FileError(path, f"expected a {what} of at most {_size(cap)}, it holds more")
                yield line
        except OSError as e:
            raise FileError(path, os_reason(e)) from None


# --- JSON ---------------------------------------------------------------------------------------
def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits:,} digits; expected at most {MAX_INT_DIGITS}")
    return int(text)


def _float(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is beyond a float's range")
    return v


def loads(text: str, parse_constant: Callable[[str], Any] = _no_constant, depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON text as Python values, or ValueError with a short reason: NaN and Infinity, numbers
    beyond a float, integers of more than MAX_INT_DIGITS digits, nesting deeper than `depth`."""
    try:
        value = json.loads(text, parse_constant=parse_constant, parse_int=_int, parse_float=_float)
    except RecursionError:
        raise ValueError(f"nested deeper than {depth} levels") from None
    check_depth(value, depth)
    return value


def check_depth(value: Any, depth: int = MAX_JSON_DEPTH) -> None:
    """ValueError if lists and mappings nest deeper than `depth` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > depth:
                raise ValueError(f"nested deeper than {depth} levels")
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))


def read_json(path: str | Path, cap: int, what: str = "JSON file") -> Any:
    """A regular file of at most `cap` bytes holding JSON, or FileError naming the problem."""
    text = read_text(path, cap, what)
    try:
        return loads(text)
    except ValueError as e:
        line = f"line {e.lineno}: " if isinstance(e, json.JSONDecodeError) else ""
        msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        raise FileError(path, f"{line}expected {what_article(what)} ({msg})") from None


def what_article(what: str) -> str:
    return ("an " if what[:1].lower() in "aeiou" else "a ") + what

