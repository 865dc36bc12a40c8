"""A real Slurm cluster on one machine: one slurmctld plus one `slurmd -N <node>` per emulated node.

The fleet model becomes slurm.conf (one NodeName line per leaf switch, port ranges), gres.conf
(fake GPU device files) and topology.conf (leaf switches under spine switches under a root).
Every slurmd gets a one-line slurm.conf of its own (the controller keeps the full file,
DebugFlags=NO_CONF_HASH): parsing a 10,000-node file costs each slurmd ~0.6 s of CPU.
TreeWidth is set past the fleet size so the controller talks to every slurmd directly; a slurmd
that only knows itself could not forward messages to its peers.

Local-emulation settings, not for a real cluster: AuthType=auth/none and CredType=cred/none
(no munge), SlurmdParameters=config_overrides (the declared 96 CPUs / 8 GPUs are believed),
GPU "devices" are /dev/tty0..7 as in Slurm's own test suite.

Slurm parses Gres= only when the program is named `slurmctld`/`slurmd`; Debian installs them as
*-wlm behind alternatives symlinks, so the launcher execs its own symlinks with the plain names.

Everything started here carries GANGSTORM_SLURM_RUN=<token> in its environment, inherited by
slurmstepd and by job scripts (sbatch exports the client environment), so stop() can find and end
batch steps that outlive a killed slurmd.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from loadgen.model.fleet import Fleet

MARKER = "GANGSTORM_SLURM_RUN"
NODE_MARKER = "GANGSTORM_SLURM_NODE"
DAEMONS = ("slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("sbatch", "squeue", "scontrol", "sinfo", "sdiag", "scancel")

# Scenario keys (schedulers.slurm) with the defaults the simulated slurm uses too.
SCHED_DEFAULTS: dict[str, Any] = {
    "sched_interval_s": 60,
    "sched_min_interval_s": 2,
    "bf_interval_s": 30,
    "bf_window_min": 1440,
    "bf_resolution_s": 60,
    "bf_max_job_test": 500,
    "default_queue_depth": 100,
    "priority_weight_age": 1000,
    "priority_weight_fairshare": 10000,
    "priority_weight_jobsize": 1000,
    "priority_max_age_h": 168,
    "priority_decay_half_life_h": 168,
    "switches_max_wait_s": 300,
}
# scenario key -> SchedulerParameters option
_SCHED_PARAM = {
    "sched_interval_s": "sched_interval",
    "bf_interval_s": "bf_interval",
    "bf_window_min": "bf_window",
    "bf_resolution_s": "bf_resolution",
    "bf_max_job_test": "bf_max_job_test",
    "default_queue_depth": "default_queue_depth",
    "switches_max_wait_s": "max_switch_wait",
}
_SCHED_SCALE = {"sched_min_interval_s": ("sched_min_interval", 1e6)}   # Slurm wants microseconds
_PRIO_PARAM = {
    "priority_weight_age": "PriorityWeightAge",
    "priority_weight_fairshare": "PriorityWeightFairshare",
    "priority_weight_jobsize": "PriorityWeightJobSize",
}

# Timers that keep a few thousand slurmd on 2 shared cores from being marked DOWN for being slow
# to answer pings (see docs/slurm.md for what was measured). Overridable via config["timeouts"].
TIMEOUT_DEFAULTS = {
    "SlurmdTimeout": 900,
    "MessageTimeout": 60,
    "TCPTimeout": 10,
    "BatchStartTimeout": 60,
    "KillWait": 5,
    # Finished jobs stay in slurmctld (and in every squeue reply) this long; squeue packs all of
    # them under the job lock, so a short window keeps the observer's cost down.
    "MinJobAge": 10,
}


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


def compress(prefix: str, idx: list[int], width: int) -> str:
    """Slurm hostlist for consecutive-friendly indices: gpu-[00000-00003,00007]."""
    if not idx:
        return ""
    runs, start, prev = [], idx[0], idx[0]
    for i in idx[1:]:
        if i == prev + 1:
            prev = i
            continue
        runs.append((start, prev))
        start = prev = i
    runs.append((start, prev))
    parts = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    if len(parts) == 1 and "-" not in parts[0]:
        return f"{prefix}{parts[0]}"
    return f"{prefix}[{','.join(parts)}]"


def expand(hostlist: str) -> list[str]:
    """Expand a Slurm hostlist (one bracket group per name, as Slurm prints ours)."""
    out: list[str] = []
    i, s = 0, hostlist.strip()
    while i < len(s):
        j, depth = i, 0
        while j < len(s) and (s[j] != "," or depth):
            depth += {"[": 1, "]": -1}.get(s[j], 0)
            j += 1
        item = s[i:j]
        i = j + 1
        if "[" not in item:
            if item and item != "(null)":
                out.append(item)
            continue
        pre, rest = item.split("[", 1)
        body, post = rest.split("]", 1)
        for part in body.split(","):
            if "-" in part:
                a, b = part.split("-")
                w = len(a)
                out.extend(f"{pre}{k:0{w}d}{post}" for k in range(int(a), int(b) + 1))
            else:
                out.append(f"{pre}{part}{post}")
    return out


def free_port_block(count: int, lo: int = 12000, hi: int = 32000) -> int:
    """Base of `count` consecutive ports free on 127.0.0.1, below the ephemeral range."""
    import random
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(lo, hi - count)
        if all(_port_free(p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no block of {count} free ports on 127.0.0.1 in [{lo}, {hi})")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def sched_config(config: dict[str, Any] | None) -> dict[str, Any]:
    cfg = dict(SCHED_DEFAULTS)
    cfg.update({k: v for k, v in (config or {}).items() if k in SCHED_DEFAULTS and v is not None})
    return cfg


def scheduler_lines(config: dict[str, Any] | None) -> list[str]:
    """slurm.conf lines set from the scenario's schedulers.slurm keys (shared with the sim)."""
    cfg = sched_config(config)
    params = [f"{opt}={int(cfg[key])}" for key, opt in _SCHED_PARAM.items()]
    params += [f"{opt}={int(round(float(cfg[key]) * mul))}" for key, (opt, mul) in _SCHED_SCALE.items()]
    # Real-backend-only tuning the simulator has no knob for (e.g. defer, bf_yield_interval=...).
    params += [str(x) for x in ((config or {}).get("scheduler_extra") or [])]
    lines = ["SchedulerType=sched/backfill", f"SchedulerParameters={','.join(params)}",
             "PriorityType=priority/multifactor",
             f"PriorityDecayHalfLife={int(round(float(cfg['priority_decay_half_life_h']) * 60))}",
             f"PriorityMaxAge={int(round(float(cfg['priority_max_age_h']) * 60))}"]
    lines += [f"{opt}={int(cfg[key])}" for key, opt in _PRIO_PARAM.items()]
    return lines


def read_sched_config(slurm_conf: Path | str, effective: bool = True) -> dict[str, Any]:
    """Inverse of scheduler_lines: the scenario keys as a real slurm.conf sets them.

    Calibration sets the simulated slurm from this, so its parameters are read, not fitted.
    effective=True reports what slurmctld actually applies: without SlurmDBD it ignores the
    age and fair-share weights, so they read as 0.
    """
    cfg: dict[str, Any] = {}
    inv_sched = {v: (k, 1.0) for k, v in _SCHED_PARAM.items()}
    inv_sched.update({opt: (k, mul) for k, (opt, mul) in _SCHED_SCALE.items()})
    dbd = False
    inv_prio = {v.lower(): k for k, v in _PRIO_PARAM.items()}
    for raw in Path(slurm_conf).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, val = line.split("=", 1)
        if key.lower() == "schedulerparameters":
            for opt in val.split(","):
                if "=" in opt:
                    o, v = opt.split("=", 1)
                    if o in inv_sched:
                        k, mul = inv_sched[o]
                        cfg[k] = int(v) / mul if mul != 1.0 else int(v)
        elif key.lower() in inv_prio:
            cfg[inv_prio[key.lower()]] = int(val)
        elif key.lower() == "prioritydecayhalflife":
            cfg["priority_decay_half_life_h"] = _minutes(val) / 60
        elif key.lower() == "prioritymaxage":
            cfg["priority_max_age_h"] = _minutes(val) / 60
        elif key.lower() == "accountingstoragetype":
            dbd = "slurmdbd" in val
    if effective and not dbd:
        # slurmctld ignores these without SlurmDBD ("can only be used with SlurmDBD, ignoring").
        cfg["priority_weight_age"] = 0
        cfg["priority_weight_fairshare"] = 0
    return cfg


def _minutes(val: str) -> float:
    """Slurm time string (min | d-h | d-h:m | h:m:s ...) in minutes; enough for PriorityDecayHalfLife."""
    days = 0
    if "-" in val:
        d, val = val.split("-", 1)
        days = int(d)
        parts = [int(x) for x in val.split(":")] + [0, 0]
        return days * 1440 + parts[0] * 60 + parts[1] + parts[2] / 60
    parts = [int(x) for x in val.split(":")]
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[0] + parts[1] / 60
    return parts[0] * 60 + parts[1] + parts[2] / 60


@dataclass
class SlurmFleet:
    """Generates the configuration for `fleet` under run_dir and runs the daemons.

    Use as a context manager, or call start()/stop(); stop() is also registered with atexit.
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
        self.ctld_port = 0
        self.node_port0 = 0
        self.hostname = socket.gethostname()
        self._stopped = True
        self.boot_s: float | None = None

    # ---- configuration -------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [self.fleet.node_name(i) for i in range(self.fleet.nodes)]

    @property
    def conf(self) -> Path:
        return self.run_dir / "etc" / "slurm.conf"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for client commands (sbatch, squeue, ...); carries the run marker."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env.update(SLURM_CONF=str(self.conf), SLURM_TIME_FORMAT="%s", **{MARKER: self.token})
        env.update(extra)
        return env

    def _hosts(self, idx: list[int]) -> str:
        f = self.fleet
        if all(f.node_name(i) == f"gpu-{i:05d}" for i in idx):
            return compress("gpu-", idx, 5)
        return ",".join(f.node_name(i) for i in idx)

    def _node_line(self, idx: list[int], model: str, port0: int) -> str:
        f = self.fleet
        hosts = self._hosts(idx)
        ports = f"{port0 + idx[0]}" if len(idx) == 1 else f"[{port0 + idx[0]}-{port0 + idx[-1]}]"
        cores = max(1, f.cpus_per_node // 2)
        return (f"NodeName={hosts} NodeHostname=127.0.0.1 NodeAddr=127.0.0.1 Port={ports} "
                f"Sockets=2 CoresPerSocket={cores} ThreadsPerCore=1 "
                f"RealMemory={f.memory_gib_per_node * 1024} Gres=gpu:{model}:{f.gpus_per_node} "
                f"Feature={model},leaf-{idx[0] // f.leaf_size:04d} State=UNKNOWN")

    def _groups(self) -> Iterable[tuple[list[int], str]]:
        """Consecutive nodes sharing leaf and GPU model (one NodeName line each)."""
        f = self.fleet
        models = f.model_names()
        for leaf in range(f.leaves):
            idx = list(range(leaf * f.leaf_size, min(f.nodes, (leaf + 1) * f.leaf_size)))
            yield idx, models[int(f.model_of[idx[0]])]

    def _common(self) -> list[str]:
        r = self.run_dir
        t = {**TIMEOUT_DEFAULTS, **(self.config.get("timeouts") or {})}
        return [
            "# generated by fakes/slurm/fleet.py; local emulation only (auth/none, cred/none)",
            "ClusterName=gangstorm",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/none", "CredType=cred/none",
            # cred_expire is also how long a requeued job must wait before it may start again.
            f"AuthInfo=cred_expire={max(5, int(round(float(self.config.get('cred_expire_s', 120)))))}",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            "SlurmdParameters=config_overrides",
            "DebugFlags=NO_CONF_HASH",
            f"TreeWidth={min(65533, max(50, self.fleet.nodes + 1))}",
            f"StateSaveLocation={r}/state",
            f"SlurmctldPidFile={r}/run/slurmctld.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdPidFile={r}/run/slurmd-%n.pid",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldDebug={self.ctld_debug}",
            f"SlurmdDebug={self.slurmd_debug}",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "TopologyPlugin=topology/tree",
            "MaxJobCount=200000",
            "PropagateResourceLimits=NONE",
            *[f"{k}={v}" for k, v in t.items()],
        ]

    def write_configs(self) -> None:
        r = self.run_dir
        for d in ("etc", "etc/nodes", "state", "run", "log", "spool", "bin", "jobs"):
            (r / d).mkdir(parents=True, exist_ok=True)
        for name in DAEMONS:
            link = r / "bin" / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(daemon_binary(name))
        f = self.fleet
        groups = list(self._groups())
        common = self._common()
        node_lines = [self._node_line(idx, model, self.node_port0) for idx, model in groups]
        self.conf.write_text("\n".join(
            common + scheduler_lines(self.config) + node_lines +
            ["PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"]) + "\n")
        gres = ["AutoDetect=off"] + [
            f"NodeName={self._hosts(idx)} "
            f"Name=gpu Type={model} File=/dev/tty[0-{f.gpus_per_node - 1}]" for idx, model in groups]
        (r / "etc" / "gres.conf").write_text("\n".join(gres) + "\n")
        topo = []
        for leaf, (idx, _) in enumerate(groups):
            topo.append(f"SwitchName=leaf-{leaf:04d} Nodes={self._hosts(idx)}")
        for spine in range(f.spines):
            leaves = list(range(spine * f.leaves_per_spine, min(f.leaves, (spine + 1) * f.leaves_per_spine)))
            topo.append(f"SwitchName=spine-{spine:03d} Switches={compress('leaf-', leaves, 4)}")
        if f.spines > 1:
            topo.append(f"SwitchName=root Switches={compress('spine-', list(range(f.spines)), 3)}")
        (r / "etc" / "topology.conf").write_text("\n".join(topo) + "\n")
        # Per-slurmd configuration: the common header plus its own node line, in one directory per
        # GPU model holding that model's gres.conf (read from the directory of the -f file).
        # No topology for slurmd: a slurmd reading the full topology.conf logs a lookup failure
        # for every node it does not know (10,000 x 10,000 lines); only slurmctld places by it.
        header = "\n".join("TopologyPlugin=topology/none" if l.startswith("TopologyPlugin=") else l
                           for l in common) + "\n"
        self._node_conf = {}
        for idx, model in groups:
            d = r / "etc" / "nodes" / model
            if not d.exists():
                d.mkdir(parents=True)
                (d / "gres.conf").write_text(
                    f"AutoDetect=off\nName=gpu Type={model} File=/dev/tty[0-{f.gpus_per_node - 1}]\n")
            for i in idx:
                path = d / f"{f.node_name(i)}.conf"
                path.write_text(header + self._node_line([i], model, self.node_port0) + "\n"
                                "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")
                self._node_conf[f.node_name(i)] = path

    # ---- processes -----------------------------------------------------------------------
    def _spawn(self, argv: list[str], env: dict[str, str], log: Path | None) -> subprocess.Popen:
        if log is None:
            return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        with open(log, "ab") as out:
            return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, close_fds=True)

    def _daemon_env(self, node: str = "") -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), MARKER: self.token,
               "HOME": os.environ.get("HOME", "/root")}
        if node:
            env[NODE_MARKER] = node
        return env

    def start(self, timeout_s: float = 900, batch: int = 100, progress=None) -> "SlurmFleet":
        require_slurm()
        self._raise_nofile()
        self.ctld_port = free_port_block(1)
        self.node_port0 = free_port_block(self.fleet.nodes)
        if self.node_port0 <= self.ctld_port < self.node_port0 + self.fleet.nodes:
            self.ctld_port = free_port_block(1, hi=self.node_port0) if self.node_port0 > 12001 else \
                free_port_block(1, lo=self.node_port0 + self.fleet.nodes)
        self.write_configs()
        self._stopped = False
        atexit.register(self.stop)
        t0 = time.monotonic()
        try:
            bin_ = self.run_dir / "bin"
            self.ctld = self._spawn([str(bin_ / "slurmctld"), "-D", "-i", "-f", str(self.conf)],
                                    self._daemon_env(), self.run_dir / "log" / "slurmctld.stderr")
            self._wait_ctld(t0 + 60)
            self._share_hwloc_topology()
            for k, name in enumerate(self.names):
                self.start_slurmd(name)
                if (k + 1) % batch == 0:
                    self._check_ctld()
                    time.sleep(0.05)   # let the controller drain registrations on 2 cores
            self.wait_idle(t0 + timeout_s, progress=progress)
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.monotonic() - t0
        return self

    def _share_hwloc_topology(self, wait_s: float = 20.0) -> None:
        """Boot the first slurmd alone and give every spool dir a copy of the hwloc topology it
        saved, so the other slurmds load it instead of each rediscovering the machine's CPUs."""
        names = self.names
        self.start_slurmd(names[0])
        xml = self.run_dir / "spool" / names[0] / "hwloc_topo_whole.xml"
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not (xml.exists() and xml.stat().st_size > 0):
            time.sleep(0.1)
        if not xml.exists():
            return
        time.sleep(0.2)
        data = xml.read_bytes()
        for name in names[1:]:
            d = self.run_dir / "spool" / name
            d.mkdir(parents=True, exist_ok=True)
            (d / xml.name).write_bytes(data)

    def start_slurmd(self, name: str) -> None:
        old = self.slurmd.get(name)
        if old is not None and old.poll() is None:
            return
        bin_ = self.run_dir / "bin"
        self.slurmd[name] = self._spawn(
            [str(bin_ / "slurmd"), "-D", "-N", name, "-f", str(self._node_conf[name]),
             "-d", str(bin_ / "slurmstepd")],
            # Not a shared stderr file: thousands of `-D` slurmds appending to one file serialise on
            # its inode lock (seen as 8,000 slurmd in D state). Each has SlurmdLogFile=log/slurmd-%n.log.
            self._daemon_env(name), None)

    def kill_slurmd(self, name: str) -> None:
        self.kill_slurmds([name])

    def kill_slurmds(self, names: list[str]) -> None:
        """SIGKILL these nodes' slurmds and everything they left running (steps, job scripts)."""
        for name in names:
            p = self.slurmd.get(name)
            if p is not None:
                _killpg(p.pid, signal.SIGKILL)
        for name in names:
            p = self.slurmd.get(name)
            if p is not None:
                p.wait(timeout=10)
        for pid in self.marked_pids(nodes=names):
            _kill(pid, signal.SIGKILL)

    def _check_ctld(self) -> None:
        if self.ctld is None or self.ctld.poll() is not None:
            tail = _tail(self.run_dir / "log" / "slurmctld.log")
            raise RuntimeError(f"slurmctld exited (see {self.run_dir}/log/slurmctld.log):\n{tail}")

    def _wait_ctld(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            self._check_ctld()
            r = subprocess.run(["scontrol", "ping"], env=self.env(), capture_output=True, text=True)
            if "UP" in r.stdout:
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

    def run(self, argv: list[str], check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed ({r.returncode}): {r.stderr.strip()[:400]}")
        return r

    def marked_pids(self, node: str | None = None, nodes: Iterable[str] | None = None) -> list[int]:
        """Live processes of this run (optionally only those of some nodes).

        Daemons and job scripts carry the run marker in their environment. slurmstepd wipes its
        environment, so it is recognised by the slurmd log file (under run_dir) it keeps open.
        """
        want = f"{MARKER}={self.token}".encode()
        some = ([node] if node else []) + list(nodes or [])
        node_env = {f"{k}={n}".encode() for n in some for k in (NODE_MARKER, "SLURMD_NODENAME")}
        log = tuple(str(self.run_dir / "log" / f"slurmd-{n}.log") for n in some) or \
            (str(self.run_dir / "log") + "/",)
        node = some or None
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
                if not node or env & node_env:
                    out.append(int(d))
            elif b"(slurmstepd)" in stat and self._holds(int(d), log):
                out.append(int(d))
        return out

    @staticmethod
    def _holds(pid: int, prefix: tuple[str, ...]) -> bool:
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

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every process group, then SIGKILL; then end leftover steps and job scripts."""
        if self._stopped:
            return
        # A second SIGTERM/SIGINT must not interrupt the cleanup half-way (it did: 1,700 slurmd left).
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            self._stop_all(grace_s)
            self._stopped = True
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass

    def _stop_all(self, grace_s: float) -> None:
        procs = [p for p in [self.ctld, *self.slurmd.values()] if p is not None]
        for p in procs:
            if p.poll() is None:
                _killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in procs:
            try:
                p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in procs:
            if p.poll() is None:
                _killpg(p.pid, signal.SIGKILL)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # slurmstepd and job scripts run in their own sessions and outlive slurmd.
        for _ in range(5):
            left = self.marked_pids()
            if not left:
                break
            for pid in left:
                _kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    def __enter__(self) -> "SlurmFleet":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @staticmethod
    def _raise_nofile() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        _kill(pid, sig)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _pss_mib(pids: Iterable[int]) -> float:
    """Proportional set size: shared library pages split among the processes sharing them."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total / 1024


def bench_sbatch(fl: SlurmFleet, n: int, workers: int, sleep_s: float, held: bool = False) -> dict[str, Any]:
    """Submit n one-GPU jobs from `workers` threads; rate, then Slurm's submit-to-start spread.

    held=True submits with --hold: the pure submission path, no job launches competing for CPU.
    """
    from concurrent.futures import ThreadPoolExecutor
    import statistics
    argv = ["sbatch", "--parsable", "-N1", "--gres=gpu:1", "--time=5", f"--chdir={fl.run_dir}/jobs",
            "-o", "/dev/null", "-e", "/dev/null", *(["--hold"] if held else []), "--wrap", f"sleep {sleep_s}"]
    env = fl.env()
    errors = []

    def one(_):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode:
            errors.append(r.stderr.strip()[-200:])

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    dt = time.monotonic() - t0
    if held:
        fl.run(["scancel", "--state=PENDING"], check=False)
        return {"sbatch": n, "workers": workers, "held": True, "submit_s": round(dt, 2),
                "sbatch_per_s": round(n / dt, 1), "errors": len(errors)}
    deadline = time.monotonic() + 300
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        out = fl.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%V|%S"], check=False).stdout
        rows = [l.split("|") for l in out.splitlines()]
        if rows and all(r[1] != "PENDING" for r in rows):
            break
        time.sleep(1)
    waits = sorted(int(r[3]) - int(r[2]) for r in rows if r[3].isdigit() and r[2].isdigit())
    sdiag = fl.run(["sdiag"], check=False).stdout
    mean_cycle = [l.split(":")[1].strip() for l in sdiag.splitlines() if "Mean cycle" in l]
    return {"sbatch": n, "workers": workers, "submit_s": round(dt, 2), "sbatch_per_s": round(n / dt, 1),
            "errors": len(errors), "first_error": errors[0] if errors else "",
            "started": len(waits), "start_wait_p50_s": statistics.median(waits) if waits else None,
            "start_wait_max_s": waits[-1] if waits else None, "sdiag_mean_cycle_us(main,bf)": mean_cycle}


def _meminfo(key: str) -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
    return 0


def main(argv: list[str] | None = None) -> int:
    """Boot a fleet, report boot time and memory, hold it for --hold seconds, stop it."""
    ap = argparse.ArgumentParser(prog="python -m fakes.slurm.fleet", description=main.__doc__)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--run-dir", type=Path, default=Path("results/slurm-fleet"))
    ap.add_argument("--hold", type=float, default=0, help="seconds to keep the fleet up, sampling node states")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--sbatch", type=int, default=0, metavar="N",
                    help="after boot, submit N one-GPU jobs (sleep --sleep s) and report sbatch/s and submit-to-start")
    ap.add_argument("--workers", type=int, default=4, help="concurrent sbatch processes for --sbatch")
    ap.add_argument("--sleep", type=float, default=30.0)
    ap.add_argument("--held", action="store_true", help="--sbatch with --hold: no job launches")
    ap.add_argument("--sched-extra", action="append", default=[], metavar="OPT",
                    help="extra SchedulerParameters option, e.g. defer or bf_yield_interval=200000")
    ap.add_argument("--set", action="append", default=[], metavar="Key=Value",
                    help="override a timer (SlurmdTimeout, MessageTimeout, ...)")
    args = ap.parse_args(argv)

    def _sigterm(signum, frame):
        raise KeyboardInterrupt          # run the finally below: the fleet is stopped

    signal.signal(signal.SIGTERM, _sigterm)
    timeouts = {}
    for kv in args.set:
        if "=" not in kv:
            print(f"--set: expected Key=Value, got {kv!r}", file=sys.stderr)
            return 2
        k, v = kv.split("=", 1)
        timeouts[k] = v
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    fl = SlurmFleet(Fleet(nodes=args.nodes), args.run_dir,
                    config={"timeouts": timeouts, "scheduler_extra": args.sched_extra})
    print(json.dumps({"mem_available_mib_before": _meminfo("MemAvailable")}), flush=True)
    t0 = time.monotonic()
    last = [0.0]

    def progress(c):
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            print(f"[{time.monotonic() - t0:6.1f}s] {c}", flush=True)

    try:
        fl.start(timeout_s=args.timeout, progress=progress)
        pids = [p.pid for p in fl.slurmd.values()]
        report = {"nodes": args.nodes, "boot_s": round(fl.boot_s, 1),
                  "slurmd_pss_mib": round(_pss_mib(pids), 1),
                  "slurmctld_pss_mib": round(_pss_mib([fl.ctld.pid]), 1),
                  "mem_available_mib": _meminfo("MemAvailable"),
                  "states_at_boot": fl.node_states()}
        print(json.dumps(report), flush=True)
        if args.sbatch:
            print(json.dumps(bench_sbatch(fl, args.sbatch, args.workers, args.sleep, args.held)), flush=True)
        end = time.monotonic() + args.hold
        while time.monotonic() < end:
            time.sleep(min(30, max(0, end - time.monotonic())))
            print(f"[{time.monotonic() - t0:6.1f}s] {fl.node_states()}", flush=True)
    finally:
        fl.stop()
        print(json.dumps({"left_after_stop": len(fl.marked_pids())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
