"""`gangstorm cluster up|down|status slurm`: a SlurmFleet that outlives the command.

up() boots slurmctld and one `slurmd -N` per fake node (each in its own session, see fleet.py)
and detaches them; the state it returns names the slurm.conf that drives the cluster
(`--slurm-conf`), the daemons' pids, the run marker they carry and the spool directory, so
down() can stop everything from another process: the daemons' process groups, then any
slurmstepd or job script left, whoever submitted the job.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from fakes.real.procs import alive
from fakes.slurm.conf import PARTITION
from fakes.slurm.existing import ExistingSlurm
from fakes.slurm.fleet import SlurmFleet, carries_marker, stop_detached
from loadgen.model.errors import BackendError
from loadgen.model.target import TargetContext

PARTITION_NAME = PARTITION.split()[0].split("=", 1)[1]


def up(ctx: TargetContext, name: str) -> dict[str, Any]:
    fleet = SlurmFleet(ctx.fleet, Path(ctx.run_dir), config=dict(ctx.config or {}))
    fleet.start(timeout_s=float((ctx.config or {}).get("boot_timeout_s", 1200)))
    state = fleet.detach()
    state.update(connect={"--slurm-conf": str(fleet.conf)}, partition=PARTITION_NAME, boot_s=round(fleet.boot_s, 1),
                 ctld_pid=fleet.ctld.pid)
    return state


def down(state: dict[str, Any]) -> list[str]:
    return stop_detached(state["pids"], state["token"], state["run_dir"], state.get("spool"))


def status(state: dict[str, Any]) -> dict[str, Any]:
    running = [p for p in state["pids"] if alive(p) and carries_marker(p, state["token"])]
    ctld = state.get("ctld_pid") in running
    slurmd = len(running) - int(ctld)
    out: dict[str, Any] = {"components": {"slurmctld": "running" if ctld else "exited",
                                          "slurmd": "running" if slurmd == len(state["pids"]) - 1 else "exited"},
                           "slurmd_running": f"{slurmd}/{len(state['pids']) - 1}"}
    if ctld:
        try:
            _, nodes = ExistingSlurm(Path(state["connect"]["--slurm-conf"]), state.get("partition")).nodes()
            out["nodes"] = ", ".join(f"{k} {s}" for s, k in sorted(Counter(n.state for n in nodes).items()))
        except BackendError as e:
            out["nodes"] = f"unknown ({e})"
            ctld = False
    out["up"] = ctld
    return out

