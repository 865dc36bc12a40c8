"""What the Slurm client commands need of a cluster, launched (SlurmFleet) or existing
(ExistingSlurm): its slurm.conf, the environment the commands run in, and the directory batch
jobs start in (it must exist where slurmd runs them)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


class SlurmEndpoint:
    conf: Path          # the controller's slurm.conf; client commands read it through SLURM_CONF
    jobs_dir: Path      # sbatch --chdir

    def job_marker(self) -> dict[str, str]:
        """Variables every client command (and so every job script it submits) carries."""
        return {}

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for client commands (sbatch, squeue, ...): this cluster's SLURM_CONF only,
        epoch timestamps."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env.update(SLURM_CONF=str(self.conf), SLURM_TIME_FORMAT="%s", **self.job_marker())
        env.update(extra)
        return env

    def run(self, argv: list[str], check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """A client command against this cluster; check=True raises on a non-zero exit."""
        r = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed ({r.returncode}): {r.stderr.strip()[:400]}")
        return r
