"""A Slurm cluster gangstorm did not start (`--slurm-conf`), as the client side sees it.

Nothing here starts or stops a daemon: the client commands run with SLURM_CONF=<that file>, and
the read-only queries say which nodes a partition holds (sorted, with their state and GPUs) and
which jobs are queued, with their comment (the run label lives there).
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from fakes.slurm.endpoint import SlurmEndpoint
from loadgen.model.errors import BackendError
from loadgen.model.target import ClusterRefused

_GPUS = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")


class NodeInfo(NamedTuple):
    name: str
    state: str          # sinfo %T: idle, mixed, allocated, drained, down*, ...
    gpus: int           # GPUs its Gres= declares


class QueuedJob(NamedTuple):
    id: str             # "123", or "123_4" / "123_[5-9]" for array jobs
    state: str
    nodelist: str
    comment: str


def gres_gpus(gres: str) -> int:
    """GPUs a sinfo %G string declares: gpu:h100:8 -> 8, gpu:8(S:0-1),gpu:a100:2 -> 10."""
    return sum(int(n) for n in _GPUS.findall(gres or ""))


@dataclass
class ExistingSlurm(SlurmEndpoint):
    conf: Path
    partition: str | None = None          # None: the cluster's default partition
    jobs_dir: Path = Path("/tmp")         # exists on every slurmd host; the job writes nothing there

    def ask(self, argv: list[str]) -> str:
        """A read-only query; an unreachable controller is one line naming the conf."""
        try:
            r = self.run(argv, check=False, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            raise BackendError(f"slurm: {self.conf}: `{' '.join(argv[:2])}` failed: {e}") from None
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise BackendError(f"slurm: {self.conf}: `{' '.join(argv[:2])}` failed ({r.returncode}): {last}")
        return r.stdout

    def partition_name(self) -> str:
        """The partition the run uses: the one given, else the default (sinfo marks it '*')."""
        names = [p.strip() for p in self.ask(["sinfo", "-h", "-o", "%P"]).split()]
        if self.partition:
            if self.partition not in {n.rstrip("*") for n in names}:
                raise ClusterRefused(f"--partition {self.partition}: {self.conf} has no such partition "
                                   f"(partitions: {', '.join(n.rstrip('*') for n in names) or 'none'})")
            return self.partition
        default = [n.rstrip("*") for n in names if n.endswith("*")]
        if not default:
            raise ClusterRefused(f"--slurm-conf {self.conf}: no default partition; pass --partition "
                               f"(partitions: {', '.join(names) or 'none'})")
        return default[0]

    def nodes(self) -> tuple[str, list[NodeInfo]]:
        """(partition, its nodes sorted by name)."""
        part = self.partition_name()
        out = self.ask(["sinfo", "-h", "-N", "-p", part, "-o", "%N|%T|%G"])
        found: dict[str, NodeInfo] = {}
        for line in out.splitlines():
            p = line.split("|")
            if len(p) == 3 and p[0]:
                found[p[0]] = NodeInfo(p[0], p[1], gres_gpus(p[2]))
        return part, [found[n] for n in sorted(found)]

    def queued(self, nodes: list[str] | None = None) -> list[QueuedJob]:
        """Jobs pending or running (squeue's default states), optionally only those on `nodes`."""
        argv = ["squeue", "-h", "-o", "%i|%T|%N|%k"] + (["-w", ",".join(nodes)] if nodes else [])
        jobs = []
        for line in self.ask(argv).splitlines():
            p = line.split("|", 3)          # a comment may hold '|'
            if len(p) == 4 and p[0]:
                jobs.append(QueuedJob(p[0], p[1], p[2], p[3]))
        return jobs
