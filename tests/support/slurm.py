"""The real Slurm backend's fast test settings and a search for what a run left running."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fakes.slurm.fleet import SlurmMissing, require_slurm

FAST = {"sched_interval_s": 5, "bf_interval_s": 1, "sched_min_interval_s": 0.5, "bf_resolution_s": 5,
        "time_limit_factor": 1.5, "switches": 0, "cred_expire_s": 5}


def pids_of(run_dir: Path) -> list[str]:
    r = subprocess.run(["pgrep", "-a", "-f", str(run_dir)], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if "pgrep" not in line]


def need_slurm() -> None:
    """Fail (never skip) when Slurm's daemons are missing, with how to get them."""
    try:
        require_slurm()
    except SlurmMissing as e:
        pytest.fail(str(e), pytrace=False)
