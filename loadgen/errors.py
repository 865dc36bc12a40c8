"""The one error type of bad input. Every entry (scenario, trace, flags, paths, profiles) raises a
subclass with a message of one line naming the file or flag, the field and what was expected; the
CLI prints it after `gangstorm: error:` and exits with status 2."""
from __future__ import annotations

from loadgen.model.errors import BackendError, UserError

__all__ = ["BackendError", "TraceError", "UserError"]


class TraceError(UserError):
    """A bad trace file (gangstorm JSONL or openb CSV)."""

    def __init__(self, source: str, where: str, expected: str):
        super().__init__(f"{source}: {where}: {expected}")
