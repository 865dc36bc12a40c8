"""A real Slurm cluster on one machine: one slurmctld plus one `slurmd -N <node>` per emulated node.

The configuration comes from fakes/slurm/conf.py; this module runs the daemons, each in its own
session through fakes/real/procs.py, and stops them on exit, SIGINT or failure.

Slurm parses Gres= only when the program is named `slurmctld`/`slurmd`; Debian installs them as
*-wlm behind alternatives symlinks, so the launcher execs its own symlinks with the plain names.

Everything started here carries GANGSTORM_SLURM_RUN=<token> in its environment, inherited by
slurmstepd and by job scripts (sbatch exports the client environment), so stop() can find and end
batch steps that outlive a killed slurmd.
"""
from __future__ import annotations

import atexit
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.real.procs import alive, free_port_block, signal_group, spawn, stop_all, stop_at_exit
from fakes.slurm.conf import SlurmConf, conf_path
from fakes.slurm.endpoint import SlurmEndpoint
from loadgen.model.fleet import Fleet
from loadgen.model.signals import signals_held

MARKER = "GANGSTORM_SLURM_RUN"
NODE_MARKER = "GANGSTORM_SLURM_NODE"
DAEMONS = ("slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("sbatch", "squeue", "scontrol", "sinfo", "sdiag", "scancel")


class SlurmMissing(RuntimeError):
    pass


def daemon_binary(name: str) -> str:
    """The real binary behind Debian's alternatives symlink (/usr/sbin/<name>-wlm)."""
    for cand in (f"/usr/sbin/{name}-wlm", shutil.which(name) or ""):
        if cand and os.path.exists(cand):
            return os.path.realpath(cand)
    raise SlurmMissing(f"{name} not found: Slurm is not installed (run `make slurm-deps`)")


def require_slurm() -> None:
    for d in DAEMONS:
        daemon_binary(d)
    for c in CLIENTS:
        if not shutil.which(c):
            raise SlurmMissing(f"{c} not found: Slurm client is not installed (run `make slurm-deps`)")


@dataclass
class SlurmFleet(SlurmEndpoint):
    """Generates the configuration for `fleet` under run_dir and runs the daemons.

    Use as a context manager, or call start()/stop(); stop() also runs at exit and on SIGTERM,
    unless detach() handed the daemons over to stop_detached() in another process.
    """
    fleet: Fleet
    run_dir: Path
    config: dict[str, Any] = field(default_factory=dict)
    slurmd_debug: str = "error"
    ctld_debug: str = "info"
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self):
        self.run_dir = Path(self.run_dir).resolve()
        self.ctld: subprocess.Popen | None = None
        self.slurmd: dict[str, subprocess.Popen] = {}
        self.node_conf: dict[str, Path] = {}
        # slurmstepd listens on <spool>/<node>/<node>_<job>.<step>: a Unix socket path, at most 107
        # bytes, so the spool lives in a short directory of its own (run_dir/spool links to it).
        self.spool_dir: Path | None = None
        self._stopped = True
        self.boot_s: float | None = None

    @property
    def names(self) -> list[str]:
        return [self.fleet.node_name(i) for i in range(self.fleet.nodes)]

    @property
    def conf(self) -> Path:
        return conf_path(self.run_dir)

    @property
    def jobs_dir(self) -> Path:
        return self.run_dir / "jobs"

    def job_marker(self) -> dict[str, str]:
        return {MARKER: self.token}

    # ---- starting ------------------------------------------------------------------------
    def start(self, timeout_s: float = 900, batch: int = 100, progress=None) -> SlurmFleet:
        require_slurm()
        _raise_nofile()
        self._prepare()
        self._stopped = False
        stop_at_exit(self.stop)
        t0 = time.monotonic()
        try:
            self.ctld = spawn([self.run_dir / "bin" / "slurmctld", "-D", "-i", "-f", self.conf],
                              log=self.run_dir / "log" / "slurmctld.stderr", env=self._daemon_env())
            self._wait_ctld(t0 + 60)
            self._share_hwloc_topology()
            for k, name in enumerate(self.names):
                self.start_slurmd(name)
                if (k + 1) % batch == 0:
                    self._check_ctld()
                    time.sleep(0.05)   # let the controller drain registrations on 2 cores
            self.wait_idle(t0 + timeout_s, progress=progress)
            self.boot_s = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare(self) -> None:
        """Run directories, the daemons under their plain names, ports and the configuration."""
        r = self.run_dir
        for d in ("state", "run", "log", "bin", "jobs"):
            (r / d).mkdir(parents=True, exist_ok=True)
        self.spool_dir = Path(tempfile.mkdtemp(prefix="gsslurm-", dir="/tmp"))
        if (r / "spool").is_symlink() or (r / "spool").exists():
            (r / "spool").unlink()
        (r / "spool").symlink_to(self.spool_dir)
        for name in DAEMONS:
            link = r / "bin" / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(daemon_binary(name))
        nodes = self.fleet.nodes
        ctld_port, node_port0 = free_port_block(1), free_port_block(nodes)
        if node_port0 <= ctld_port < node_port0 + nodes:
            ctld_port = free_port_block(1, hi=node_port0) if node_port0 > 12001 else \
                free_port_block(1, lo=node_port0 + nodes)
        self.node_conf = SlurmConf(self.fleet, r, ctld_port, node_port0, self.config, self.spool_dir,
                                   socket.gethostname(), self.ctld_debug, self.slurmd_debug).write()

    def _daemon_env(self, node: str = "") -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), MARKER: self.token,
               "HOME": os.environ.get("HOME", "/root")}
        if node:
            env[NODE_MARKER] = node
        return env

    def _share_hwloc_topology(self, wait_s: float = 20.0) -> None:
        """Boot the first slurmd alone and give every spool dir a copy of the hwloc topology it
        saved, so the other slurmds load it instead of each rediscovering the machine's CPUs."""
        names = self.names
        self.start_slurmd(names[0])
        xml = self.spool_dir / names[0] / "hwloc_topo_whole.xml"
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not (xml.exists() and xml.stat().st_size > 0):
            time.sleep(0.1)
        if not xml.exists():
            return
        time.sleep(0.2)
        data = xml.read_bytes()
        for name in names[1:]:
            d = self.spool_dir / name
            d.mkdir(parents=True, exist_ok=True)
            (d / xml.name).write_bytes(data)

    def start_slurmd(self, name: str) -> None:
        old = self.slurmd.get(name)
        if old is not None and old.poll() is None:
            return
        bin_ = self.run_dir / "bin"
        # No log file: thousands of `-D` slurmds appending to one shared stderr file serialise on its
        # inode lock (seen as 8,000 slurmd in D state). Each has SlurmdLogFile=log/slurmd-%n.log.
        self.slurmd[name] = spawn([bin_ / "slurmd", "-D", "-N", name, "-f", self.node_conf[name],
                                   "-d", bin_ / "slurmstepd"], env=self._daemon_env(name))

    def kill_slurmds(self, names: list[str]) -> None:
        """SIGKILL these nodes' slurmds and everything they left running (steps, job scripts)."""
        procs = [p for p in map(self.slurmd.get, names) if p is not None]
        for p in procs:
            signal_group(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait(timeout=10)
        for pid in self.marked_pids(nodes=names):
            signal_group(pid, signal.SIGKILL)

    def _check_ctld(self) -> None:
        if self.ctld is None or self.ctld.poll() is not None:
            tail = _tail(self.run_dir / "log" / "slurmctld.log")
            raise RuntimeError(f"slurmctld exited (see {self.run_dir}/log/slurmctld.log):\n{tail}")

    def _wait_ctld(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            self._check_ctld()
            if "UP" in self.run(["scontrol", "ping"], check=False).stdout:
                return
            time.sleep(0.3)
        raise TimeoutError("slurmctld did not answer `scontrol ping` within 60 s")

    def node_states(self) -> dict[str, int]:
        r = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
        counts: dict[str, int] = {}
        for line in r.stdout.split():
            counts[line] = counts.get(line, 0) + 1
        return counts

    def wait_idle(self, deadline: float, progress=None) -> None:
        want = self.fleet.nodes
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            self._check_ctld()
            counts = self.node_states()
            if progress:
                progress(counts)
            if counts.get("idle", 0) >= want:
                return
            time.sleep(1.0)
        raise TimeoutError(f"nodes not idle in time: {counts}")

    # ---- finding and stopping ------------------------------------------------------------
    def marked_pids(self, node: str | None = None, nodes: Iterable[str] | None = None) -> list[int]:
        """Live processes of this run (optionally only those of some nodes), see marked_pids()."""
        return marked_pids(self.token, self.run_dir, ([node] if node else []) + list(nodes or []))

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every process group, then SIGKILL; then end leftover steps and job scripts."""
        if self._stopped:
            return
        # A second SIGTERM/SIGINT must not interrupt the cleanup half-way (it did: 1,700 slurmd left).
        with signals_held():
            stop_all([self.ctld, *self.slurmd.values()], grace_s)
            # slurmstepd and job scripts run in their own sessions and outlive slurmd.
            for _ in range(5):
                left = marked_pids(self.token, self.run_dir, jobs_by_folder=True)   # also jobs submitted by hand
                if not left:
                    break
                for pid in left:
                    signal_group(pid, signal.SIGKILL)
                time.sleep(0.2)
            if self.spool_dir is not None:
                shutil.rmtree(self.spool_dir, ignore_errors=True)
            self._stopped = True
        atexit.unregister(self.stop)

    def detach(self) -> dict[str, Any]:
        """Leave the daemons running after this process exits (`gangstorm cluster up`): what
        stop_detached() needs to stop them from another process."""
        atexit.unregister(self.stop)
        self._stopped = True
        return {"pids": [p.pid for p in (self.ctld, *self.slurmd.values()) if p is not None],
                "token": self.token, "run_dir": str(self.run_dir), "spool": str(self.spool_dir)}

    def __enter__(self) -> SlurmFleet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def marked_pids(token: str, run_dir: Path, nodes: list[str] | None = None, jobs_by_folder: bool = False) -> list[int]:
    """Live processes of the run `token` under run_dir (optionally only those of some nodes).

    Daemons and job scripts carry the run marker in their environment. slurmstepd wipes its
    environment, so it is recognised by the slurmd log file (under run_dir) it keeps open.
    jobs_by_folder: also job scripts submitted without the marker (by a run attached to this
    cluster, or by hand), recognised by the slurm.conf under run_dir their environment names.
    """
    want = f"{MARKER}={token}".encode()
    node_env = {f"{k}={n}".encode() for n in nodes or [] for k in (NODE_MARKER, "SLURMD_NODENAME")}
    log = tuple(str(run_dir / "log" / f"slurmd-{n}.log") for n in nodes or []) or (str(run_dir / "log") + "/",)
    folder = str(run_dir).encode() + b"/"
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                stat = fh.read()
            if stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X"):
                continue
            with open(f"/proc/{d}/environ", "rb") as fh:
                env = set(fh.read().split(b"\0"))
        except (OSError, ValueError):
            continue
        if want in env:
            if not nodes or env & node_env:
                out.append(int(d))
        elif b"(slurmstepd)" in stat and _holds(int(d), log):
            out.append(int(d))
        elif jobs_by_folder and any(v.startswith(b"SLURM_JOB_ID=") for v in env) and \
                any(v.startswith(b"SLURM_CONF=") and folder in v for v in env):
            out.append(int(d))
    return out


def stop_detached(pids: list[int], token: str, run_dir: str | Path, spool: str | None,
                  grace_s: float = 5.0) -> list[str]:
    """Stop a fleet detach() left running, from any process: SIGTERM the daemons' process groups,
    then SIGKILL, then every leftover step and job script; removes the spool directory. Returns
    "pid command" of what is still running (empty: clean). A pid is only signalled while it
    carries the run marker, so a reused pid is never hit."""
    run_dir = Path(run_dir)
    with signals_held():
        leaders = [p for p in pids if carries_marker(p, token)]
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            leaders = [p for p in leaders if carries_marker(p, token)]
            for p in leaders:
                signal_group(p, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(alive(p) for p in leaders):
                time.sleep(0.1)
        for _ in range(10):
            left = marked_pids(token, run_dir, jobs_by_folder=True)
            if not left:
                break
            for pid in left:
                signal_group(pid, signal.SIGKILL)
            time.sleep(0.3)
        if spool:
            shutil.rmtree(spool, ignore_errors=True)
    return [f"{pid} {_cmdline(pid)}" for pid in marked_pids(token, run_dir, jobs_by_folder=True)]


def carries_marker(pid: int, token: str) -> bool:
    """The process carries the run marker `token` (so a pid saved earlier was not reused)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return f"{MARKER}={token}".encode() in fh.read().split(b"\0")
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _holds(pid: int, prefix: tuple[str, ...]) -> bool:
    """The process has a file open whose path starts with one of `prefix`."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
