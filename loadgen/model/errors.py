"""The two error kinds every layer raises, backends included (fakes/ imports only loadgen.model).

UserError: bad input; one line naming the file or flag, the field and what was expected; the CLI
prints it after `gangstorm: error:` and exits with status 2, nothing written.
BackendError: a real backend that failed to start or died; one line naming the scheduler, the
cause and where its logs are; the CLI exits with status 1 and keeps what was recorded.
"""
from __future__ import annotations


class UserError(ValueError):
    """Bad input: one line, exit status 2, nothing written."""


class BackendError(RuntimeError):
    """A real backend that failed to start or died (not bad input): one line, exit status 1."""


class TraceError(UserError):
    """A bad trace file (gangstorm JSONL or openb CSV)."""

    def __init__(self, source: str, where: str, expected: str):
        super().__init__(f"{source}: {where}: {expected}")
