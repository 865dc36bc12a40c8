"""Names a user gives: the scenario's name, job classes, tenants and queues (from a scenario or a trace).

They reach folder names (the run id), CSV cells, summary.md's tables, report.html, sbatch's
--account and Kubernetes labels, so a name that is not plain text is refused here, at input, with
one line: control characters (NUL, newline, escape), format characters (zero-width spaces and
joiners, right-to-left overrides: text that reads differently from what it holds), line and
paragraph separators, or nothing but blanks. A class name also keys the per-class tables, where
`all` stands for every job and a dot separates keys (`by_class.<class>.admission_s`), so `all` and
names holding a dot are refused for classes.

Characters that are only unsafe in a path (`/`, `..`) are not refused: loadgen/output/paths.py
turns a name into a safe folder-name component where it becomes one.
"""
from __future__ import annotations

import unicodedata

MAX_NAME = 200
RESERVED_CLASSES = ("all",)
BAD_CATEGORIES = {"Cc": "a control character", "Cf": "a format character (zero-width or text direction)",
                  "Zl": "a line separator", "Zp": "a paragraph separator", "Cs": "a lone surrogate",
                  "Co": "a private-use character", "Cn": "an unassigned character"}


def problem(name: str) -> str | None:
    """Why `name` is not a plain name, as the end of a one-line error (None: it is one)."""
    if not name.strip():
        return f"expected a name with at least one visible character, got {name!r}"
    if len(name) > MAX_NAME:
        return f"expected a name of at most {MAX_NAME} characters, got {len(name):,}"
    for i, ch in enumerate(name):
        what = BAD_CATEGORIES.get(unicodedata.category(ch))
        if what:
            return f"expected plain text, got {what} (U+{ord(ch):04X}) at character {i} of {name!r}"
    return None


def shown(key) -> str:
    """A user-chosen key as a one-line error's field path shows it: as written when it is plain
    (letters, digits, `_`, `-`), quoted and escaped otherwise (a newline never breaks the line)."""
    text = str(key)
    return text if text and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in text) else repr(text)


def class_problem(name: str) -> str | None:
    """Why `name` cannot name a job class (None: it can)."""
    if name in RESERVED_CLASSES:
        return f"expected a class name other than {name!r} (it stands for every job in the per-class tables)"
    if "." in name:
        return f"expected a class name without '.' (it separates the keys of per-class tables), got {name!r}"
    return problem(name)
