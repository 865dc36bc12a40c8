"""Helpers for the Locust tests: run locust in its own process group and always clean it up."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes.real.procs import free_port  # noqa: F401 (the tests' port picker)
from support.paths import ROOT

LOCUSTFILE = ROOT / "loadgen" / "locust" / "locustfile.py"


class LocustProc:
    def __init__(self, args: list[str], cwd: Path, env: dict | None = None):
        self.log = open(cwd / "locust.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "locust", *args], cwd=cwd, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        self.logpath = cwd / "locust.log"

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return self.logpath.read_text()

    def stop(self) -> None:
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(self.proc.pid):
                self.proc.poll()
                time.sleep(0.1)
        self.proc.poll()
        self.log.close()
        assert not _group_alive(self.proc.pid), "locust left processes behind"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # zombies of our own child count as gone once reaped
    try:
        out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return True
    return any(s and not s.startswith("Z") for s in out.split())


@pytest.fixture
def run_locust(tmp_path):
    procs: list[LocustProc] = []

    def _start(*args: str, env: dict | None = None, cwd: Path | None = None) -> LocustProc:
        p = LocustProc(list(args), cwd or tmp_path, env)
        procs.append(p)
        return p

    try:
        yield _start
    finally:
        for p in procs:
            p.stop()


def locust_rows(path: Path) -> dict[tuple[str, str], dict]:
    return {(r["Type"], r["Name"]): r for r in csv.DictReader(open(path))}


def jobs_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(open(path)))
