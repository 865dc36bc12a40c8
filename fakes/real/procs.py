"""Child processes of a real backend: each in its own session, stopped on exit, SIGINT or failure.

Every launcher (KWOK cluster, Volcano, slurmd fleet, raylets, the Ray driver) starts its
processes through `spawn`, stops them with `stop`, and registers its own stop() with
`stop_at_exit`. A stop sends SIGTERM to the process group, waits, then SIGKILLs the group and any
straggler still in the session (daemons that fork and leave the group). All ports are on 127.0.0.1.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

LOOPBACK = "127.0.0.1"


# --- ports ---------------------------------------------------------------------------------------
def free_port() -> int:
    """A port free on 127.0.0.1 right now, for a server that binds it a moment later. Chosen below
    the kernel's ephemeral range: a port from that range (what binding port 0 gives) can be taken
    meanwhile by any outgoing connection, and a test run makes thousands (a kube-controller-manager
    once failed with "address already in use" that way)."""
    return free_port_block(1)


# Ports this process handed out lately: a port is free when it is checked, but its server binds it
# only a moment later, so two servers of one cluster could be handed the same port (a kube-scheduler
# once failed "address already in use" as its cluster started).
_HANDED: dict[int, float] = {}
HANDED_FOR_S = 600.0


def free_port_block(count: int, lo: int = 12000, hi: int = 32000) -> int:
    """Base of `count` consecutive free ports on 127.0.0.1, below the ephemeral range, none of
    them handed out by this process in the last HANDED_FOR_S seconds."""
    rng = random.Random()
    now = time.monotonic()
    for port in [p for p, t in _HANDED.items() if now - t > HANDED_FOR_S]:
        del _HANDED[port]
    for _ in range(200):
        base = rng.randrange(lo, hi - count)
        ports = range(base, base + count)
        if not any(p in _HANDED for p in ports) and all(_port_free(p) for p in ports):
            _HANDED.update(dict.fromkeys(ports, now))
            return base
    raise RuntimeError(f"no block of {count} free ports on {LOOPBACK} in [{lo}, {hi})")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


# --- starting ------------------------------------------------------------------------------------
def spawn(argv: list, log: Path | None = None, env: dict[str, str] | None = None, cwd: Path | str | None = None,
          pipes: bool = False, stderr_log: Path | None = None) -> subprocess.Popen:
    """Start argv in a new session (its own process group). Output goes to `log` (or nowhere);
    pipes=True gives a stdin/stdout pair for a JSON-lines child, its stderr going to stderr_log."""
    argv = [str(a) for a in argv]
    if pipes:
        with _opened(stderr_log) as err:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                    cwd=cwd, start_new_session=True)
    with _opened(log) as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT if log else out,
                                env=env, cwd=cwd, start_new_session=True, close_fds=True)


@contextlib.contextmanager
def _opened(path: Path | None) -> Iterator:
    if path is None:
        yield subprocess.DEVNULL
        return
    fh = open(path, "ab")
    try:
        yield fh
    finally:
        fh.close()          # the child keeps its own descriptor


# --- stopping ------------------------------------------------------------------------------------
def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is `sid`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[3]) == sid and rest[0] != "Z":
            found.append(int(d))
    return found


def signal_group(pid: int, sig: int) -> None:
    """`sig` to the process group `pid` leads (or to pid alone if it leads none)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop(pid: int, grace_s: float = 5.0) -> None:
    """SIGTERM the session `pid` leads, wait up to grace_s, then SIGKILL the group and whatever is
    left in the session; reap the leader when it is our child."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        signal_group(pid, sig)
        for straggler in session_pids(pid):       # left the group but not the session
            try:
                os.kill(straggler, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not alive(pid) and not session_pids(pid):
                return
            time.sleep(0.1)


def stop_all(procs: list[subprocess.Popen], grace_s: float = 5.0) -> None:
    """stop() for many children at once: SIGTERM all, one shared grace period, SIGKILL the rest."""
    live = [p for p in procs if p is not None]
    for p in live:
        if p.poll() is None:
            signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in live:
        try:
            p.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in live:
        signal_group(p.pid, signal.SIGKILL)       # the group may outlive its leader
    for p in live:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def stop_child(proc: subprocess.Popen, grace_s: float) -> None:
    """Ask a JSON-lines child to stop ({"op":"stop"}), wait up to grace_s, then stop its session
    and close its pipes."""
    try:
        if proc.poll() is None and proc.stdin is not None:
            proc.stdin.write(b'{"op":"stop"}\n')
            proc.stdin.flush()
            proc.wait(timeout=grace_s)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    stop(proc.pid)
    for f in (proc.stdin, proc.stdout):
        try:
            f and f.close()
        except OSError:
            pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# --- on exit -------------------------------------------------------------------------------------
def stop_at_exit(fn: Callable[[], None]) -> None:
    """Run fn at interpreter exit, and make SIGTERM an exit (so finally blocks and atexit run)
    when nobody else handles it. Undo with atexit.unregister(fn) once fn has run."""
    atexit.register(fn)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    except ValueError:       # not the main thread: the caller's own handler applies
        pass
