"""Slurm configuration from the fleet model: slurm.conf, gres.conf, topology.conf, per-slurmd files.

One NodeName line per leaf switch (and node pool: fakes/slurm/gres.py says what each pool's GPU
sharing mode advertises) with port ranges, gres.conf with fake GPU device files and
topology.conf with leaf switches under spine switches under a root. Every slurmd gets a
slurm.conf of its own holding only its node line (the controller keeps the full file,
DebugFlags=NO_CONF_HASH): parsing a 10,000-node file costs each slurmd ~0.6 s of CPU.
TreeWidth is set past the fleet size so the controller talks to every slurmd directly; a slurmd
that only knows itself could not forward messages to its peers.

Local-emulation settings, not for a real cluster: AuthType=auth/none and CredType=cred/none
(no munge), SlurmdParameters=config_overrides (the declared 96 CPUs / 8 GPUs are believed),
GPU "devices" are /dev/tty0..7 as in Slurm's own test suite.

With a startup spec the target sets config[PROLOG_KEY]: every daemon then runs the ready prolog
on each allocated node (Prolog=, PrologFlags=Alloc; fakes/slurm/prolog.py).

The scenario's schedulers.slurm keys become SchedulerParameters and priority lines
(scheduler_lines), and read_sched_config reads them back from a slurm.conf for calibration.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes.slurm import gres, prolog
from fakes.slurm.hostlist import compress
from loadgen.model.fleet import Fleet

# Scenario keys (schedulers.slurm) that become slurm.conf settings. Only keys the scenario carries
# are written; their schema defaults are Slurm's own (loadgen/input/schema.py says where each comes from).
# scenario key -> SchedulerParameters option (whole units)
_SCHED_PARAM = {
    "sched_interval_s": "sched_interval",
    "batch_sched_delay_s": "batch_sched_delay",
    "max_sched_time_s": "max_sched_time",
    "bf_interval_s": "bf_interval",
    "bf_window_min": "bf_window",
    "bf_resolution_s": "bf_resolution",
    "bf_max_job_test": "bf_max_job_test",
    "bf_max_job_start": "bf_max_job_start",
    "default_queue_depth": "default_queue_depth",
    "switches_max_wait_s": "max_switch_wait",
}
# ... options Slurm takes in microseconds
_SCHED_SCALE = {"sched_min_interval_s": ("sched_min_interval", 1e6),
                "bf_yield_interval_s": ("bf_yield_interval", 1e6),
                "bf_yield_sleep_s": ("bf_yield_sleep", 1e6)}
_PRIO_TIME = {"priority_decay_half_life_h": "PriorityDecayHalfLife", "priority_max_age_h": "PriorityMaxAge"}
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

# config key (set by the target, not a scenario key): the ready prolog's path, see fakes/slurm/prolog.py
PROLOG_KEY = "prolog"

PARTITION = "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"


def conf_path(run_dir: Path) -> Path:
    """The controller's (full) slurm.conf; client commands read it through SLURM_CONF."""
    return run_dir / "etc" / "slurm.conf"


@dataclass
class SlurmConf:
    """The configuration of one run: where the daemons listen, log and keep state."""
    fleet: Fleet
    run_dir: Path
    ctld_port: int
    node_port0: int                    # slurmd of fleet node i listens on node_port0 + i
    config: dict[str, Any]             # the target's config: timeouts, cred_expire_s, scheduler keys
    spool_dir: Path                    # slurmd spool: step sockets live here, so its path must be short
    hostname: str
    ctld_debug: str
    slurmd_debug: str

    def write(self) -> dict[str, Path]:
        """Write every file under run_dir/etc; returns each node's own slurm.conf by node name."""
        etc, f = self.run_dir / "etc", self.fleet
        etc.mkdir(parents=True, exist_ok=True)
        gres.check_fleet(f)
        groups = list(self._groups())
        common = self._common()
        node_lines = [self._node_line(idx) for idx, _ in groups]
        conf_path(self.run_dir).write_text("\n".join(
            common + scheduler_lines(self.config) + node_lines + [f"{PARTITION} OverSubscribe=NO"]) + "\n")
        lines = ["AutoDetect=off"] + [x for idx, _ in groups
                                      for x in gres.node_gres(f, idx[0]).conf_lines(self._hosts(idx))]
        (etc / "gres.conf").write_text("\n".join(lines) + "\n")
        topo = [f"SwitchName=leaf-{leaf:04d} Nodes={self._hosts(self._leaf(leaf))}" for leaf in range(f.leaves)]
        for spine in range(f.spines):
            leaves = list(range(spine * f.leaves_per_spine, min(f.leaves, (spine + 1) * f.leaves_per_spine)))
            topo.append(f"SwitchName=spine-{spine:03d} Switches={compress('leaf-', leaves, 4)}")
        if f.spines > 1:
            topo.append(f"SwitchName=root Switches={compress('spine-', list(range(f.spines)), 3)}")
        (etc / "topology.conf").write_text("\n".join(topo) + "\n")
        return self._write_node_confs(common, groups)

    def _write_node_confs(self, common: list[str], groups: list[tuple[list[int], str]]) -> dict[str, Path]:
        # The common header plus the node's own line, in one directory per GPU model (and pool, when
        # the fleet has pools) holding its gres.conf (read from the directory of the -f file). No topology for slurmd: a
        # slurmd reading the full topology.conf logs a lookup failure for every node it does not
        # know (10,000 x 10,000 lines); only slurmctld places by it.
        header = "\n".join("TopologyPlugin=topology/none" if line.startswith("TopologyPlugin=") else line
                           for line in common) + "\n"
        confs = {}
        for idx, key in groups:
            d = self.run_dir / "etc" / "nodes" / key
            if not d.exists():
                d.mkdir(parents=True)
                lines = ["AutoDetect=off", *gres.node_gres(self.fleet, idx[0]).conf_lines()]
                (d / "gres.conf").write_text("\n".join(lines) + "\n")
            for i in idx:
                name = self.fleet.node_name(i)
                confs[name] = d / f"{name}.conf"
                confs[name].write_text(header + self._node_line([i]) + f"\n{PARTITION}\n")
        return confs

    def _groups(self) -> Iterable[tuple[list[int], str]]:
        """Consecutive nodes sharing leaf and GPU model, and pool when there are pools (one NodeName
        line each), with the name of their node-conf directory (the model, or <pool>-<model>)."""
        f = self.fleet
        models = f.model_names()
        for leaf in range(f.leaves):
            idx = self._leaf(leaf)
            cuts = [k for k in range(1, len(idx)) if f.pool_of[idx[k]] != f.pool_of[idx[k - 1]]]
            for a, b in zip([0, *cuts], [*cuts, len(idx)]):
                model = models[int(f.model_of[idx[a]])]
                yield idx[a:b], (f"{f.pool(idx[a]).name}-{model}" if f.pools else model)

    def _leaf(self, leaf: int) -> list[int]:
        f = self.fleet
        return list(range(leaf * f.leaf_size, min(f.nodes, (leaf + 1) * f.leaf_size)))

    def _hosts(self, idx: list[int]) -> str:
        f = self.fleet
        if all(f.node_name(i) == f"gpu-{i:05d}" for i in idx):
            return compress("gpu-", idx, 5)
        return ",".join(f.node_name(i) for i in idx)

    def _node_line(self, idx: list[int]) -> str:
        f, port0 = self.fleet, self.node_port0
        ports = f"{port0 + idx[0]}" if len(idx) == 1 else f"[{port0 + idx[0]}-{port0 + idx[-1]}]"
        cores = max(1, f.cpus_per_node // 2)
        model = f.model_names()[int(f.model_of[idx[0]])]
        feats = ",".join([model, f"leaf-{idx[0] // f.leaf_size:04d}", *gres.features(f, idx[0])])
        return (f"NodeName={self._hosts(idx)} NodeHostname=127.0.0.1 NodeAddr=127.0.0.1 Port={ports} "
                f"Sockets=2 CoresPerSocket={cores} ThreadsPerCore=1 "
                f"RealMemory={f.memory_gib_per_node * 1024} Gres={gres.node_gres(f, idx[0]).node_gres()} "
                f"Feature={feats} State=UNKNOWN")

    def _shards(self) -> bool:
        return any(p.sharing.mode in ("shards", "fraction") for p in self.fleet.pools)

    def _common(self) -> list[str]:
        r = self.run_dir
        t = {**TIMEOUT_DEFAULTS, **(self.config.get("timeouts") or {})}
        return [
            "# generated by fakes/slurm/conf.py; local emulation only (auth/none, cred/none)",
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
            f"SlurmdSpoolDir={self.spool_dir}/%n",
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
            "GresTypes=gpu,shard" if self._shards() else "GresTypes=gpu",
            "TopologyPlugin=topology/tree",
            "MaxJobCount=200000",
            "PropagateResourceLimits=NONE",
            *prolog.conf_lines(self.config.get(PROLOG_KEY)),
            *[f"{k}={v}" for k, v in t.items()],
        ]


def scheduler_lines(config: dict[str, Any] | None) -> list[str]:
    """slurm.conf lines set from the scenario's schedulers.slurm keys (the same keys the sim reads)."""
    cfg = {k: v for k, v in (config or {}).items() if v is not None}
    params = [f"{opt}={int(cfg[key])}" for key, opt in _SCHED_PARAM.items() if key in cfg]
    params += [f"{opt}={int(round(float(cfg[key]) * mul))}" for key, (opt, mul) in _SCHED_SCALE.items() if key in cfg]
    # Real-backend-only tuning the simulator has no knob for (e.g. defer).
    params += [str(x) for x in (cfg.get("scheduler_extra") or [])]
    # slurmctld refuses an empty "SchedulerParameters=" (a parse error)
    lines = ["SchedulerType=sched/backfill"] + ([f"SchedulerParameters={','.join(params)}"] if params else []) + \
        ["PriorityType=priority/multifactor"]
    lines += [f"{opt}={int(round(float(cfg[key]) * 60))}" for key, opt in _PRIO_TIME.items() if key in cfg]
    lines += [f"{opt}={int(cfg[key])}" for key, opt in _PRIO_PARAM.items() if key in cfg]
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
