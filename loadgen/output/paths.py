"""Where gangstorm may write: the one output-path policy every writer follows.

gangstorm writes only inside a run folder it created itself (loadgen/output/storage.py refuses a
folder that already holds files), or to a file the user named (`--out` of `report`, `trace export`'s
output, `calibrate --write-profile`, a pytest baseline), and then only as a new or replaced
regular file: never over a directory, a FIFO, a device (as root, renaming over /dev/null would
replace it) or a socket, never over one of the command's own inputs (`trace export X.yaml X.yaml`,
`report RUN --out RUN/summary.json`), and never through an empty path.

A name that becomes part of a path (a scenario's name in the run id, a baseline's name, a run id in
results/index.jsonl) goes through `component`: one folder-name component that cannot climb out of
its folder (`../../x`), nest folders (`a/b`), hide (`.x`) or carry control characters.
"""
from __future__ import annotations

import os
import re
import stat
import unicodedata
from pathlib import Path

from loadgen.input.files import kind, os_reason
from loadgen.model.errors import UserError

MAX_COMPONENT = 80            # characters; a folder name may hold at most 255 bytes


class OutputPathError(UserError):
    """An output path the policy refuses: one line naming it and what was expected."""


def component(name: str, fallback: str = "run") -> str:
    """`name` as one safe folder-name component: letters, digits, `.`, `_` and `-`; anything else
    (`/`, `\\`, blanks, control or format characters) becomes `-`; no leading dot or dash, at most
    MAX_COMPONENT characters; `fallback` when nothing is left."""
    text = unicodedata.normalize("NFKC", str(name))
    out = "".join(ch if (ch.isalnum() and ch.isprintable()) or ch in "._-" else "-" for ch in text)
    out = re.sub(r"-{2,}", "-", out)
    out = re.sub(r"\.{2,}", ".", out).lstrip(".-")[:MAX_COMPONENT].rstrip(".-")
    return out or fallback


def is_component(text: object) -> bool:
    """A single folder name inside its parent (what results/index.jsonl's `dir` must be)."""
    return (isinstance(text, str) and text not in ("", ".", "..") and "/" not in text and "\\" not in text
            and "\x00" not in text and len(text.encode("utf-8", "surrogateescape")) <= 255)


def same_file(a: str | Path, b: str | Path) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output_file(path: str | Path, flag: str = "", inputs: tuple = (), within: str | Path | None = None,
                      allowed: tuple[str, ...] = ()) -> Path:
    """Refuse, before anything is written, a file path gangstorm must not write: empty, over-long or
    holding a NUL; a directory or any non-regular file; one of `inputs`; a file already inside the
    folder `within` (a run folder whose files are the input) other than the names in `allowed`; a
    path under a file; or a folder or file that is not writable."""
    text = str(path)
    name = f"{flag} {text}" if flag else text
    if text == "":
        raise OutputPathError(f"{flag or 'output'}: expected a file path, got an empty one")
    if "\x00" in text:
        raise OutputPathError(f"{flag or 'output'}: expected a file path, got one holding a NUL character")
    p = Path(text)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None               # reported below, naming the file it is under
    except OSError as e:
        raise OutputPathError(f"{name}: {os_reason(e)}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputPathError(f"{name}: expected a file to write, got a directory")
        if not stat.S_ISREG(st.st_mode):
            raise OutputPathError(f"{name}: expected a regular file to write, got {kind(st.st_mode)} (it would be "
                                  "replaced); name a new file")
        for other in inputs:
            if other is not None and same_file(p, other):
                raise OutputPathError(f"{name}: expected a new file, it is this command's input {other}; name "
                                      "another file")
        if within is not None and _inside(p, Path(within)) and p.name not in allowed:
            raise OutputPathError(f"{name}: expected a new file, it is one of the files of {within}; name another "
                                  "file")
    for parent in p.parents:
        try:
            exists = parent.exists()
        except OSError as e:
            raise OutputPathError(f"{name}: {os_reason(e)}") from None
        if exists:
            if not parent.is_dir():
                raise OutputPathError(f"{name}: expected a file to write, but {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise OutputPathError(f"{name}: expected a writable directory, {parent} is not writable")
            break
    if st is not None and not os.access(p, os.W_OK):
        raise OutputPathError(f"{name}: expected a writable file, it is read-only")
    return p


def _inside(p: Path, folder: Path) -> bool:
    try:
        return folder.resolve() in p.resolve().parents
    except (OSError, RuntimeError):
        return False


def inside(p: str | Path, folder: str | Path) -> bool:
    """Whether `p` (resolved, symbolic links followed) lies inside `folder`."""
    return _inside(Path(p), Path(folder))
