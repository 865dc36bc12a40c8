"""JSON lines to and from a child's stdin/stdout: how RayFleet talks to the launcher and RealRay to
the driver. Reads never block the caller beyond the timeout it gives (drain() not at all), so the
target works from a gevent-patched Locust process too.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any


class ChildError(RuntimeError):
    pass


class JsonPipe:
    def __init__(self, proc: subprocess.Popen, name: str, log: Path | None = None):
        self.proc, self.name = proc, name
        self.see = f"; see {log}" if log else ""
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.closed = False
        self._buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(msg, separators=(",", ":")) + "\n").encode())
        self.proc.stdin.flush()

    def read(self, timeout: float) -> dict[str, Any]:
        """The next message, waiting up to `timeout` seconds; ChildError if none comes."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildError(f"{self.name} did not answer within {timeout:.0f} s{self.see}")
            if select.select([self.fd], [], [], min(left, 1.0))[0]:
                if not self._fill():
                    raise ChildError(f"{self.name} exited (rc={self.proc.poll()}){self.see}")
            elif self.proc.poll() is not None:
                raise ChildError(f"{self.name} exited (rc={self.proc.returncode}){self.see}")
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def drain(self) -> list[dict[str, Any]]:
        """Every complete message already sent, without waiting. When the child closes its stdout
        the last one is {"ev": "eof", "rc": exit status or None}."""
        was_open = not self.closed
        while not self.closed:
            try:
                if not self._fill():
                    self.closed = True
            except BlockingIOError:
                break
        *lines, self._buf = self._buf.split(b"\n")
        out = [json.loads(line) for line in lines if line.strip()]
        if was_open and self.closed:
            out.append({"ev": "eof", "rc": self.proc.poll()})
        return out

    def _fill(self) -> bool:
        """Append what is readable now to the buffer; False at end of file."""
        chunk = os.read(self.fd, 1 << 16)
        self._buf += chunk
        return bool(chunk)
