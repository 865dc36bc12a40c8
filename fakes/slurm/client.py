"""The Slurm client commands the real adapter runs against a cluster (a SlurmFleet it launched or
an ExistingSlurm), with their timings.

sbatch is retried on transient errors (slurmctld busy or restarting); squeue lists every job in
one call (epoch timestamps, SLURM_TIME_FORMAT=%s); `scontrol -d show job` tells which GRES
index (GPU, shard's GPU, MIG instance) each job got; sdiag is parsed; scontrol drains, resumes and
downs nodes and requeues jobs. Safe to call from several threads.
"""
from __future__ import annotations

import subprocess
import threading
import time
from typing import Any, NamedTuple

from fakes.slurm.endpoint import SlurmEndpoint
from fakes.slurm.gres import job_details
from fakes.slurm.sdiag import parse_sdiag

TRANSIENT = ("temporarily", "Socket timed out", "Unable to contact", "Connection refused", "Zero Bytes")
SQUEUE_FMT = "%i|%T|%V|%S|%e|%N|%j"     # the name last: it may hold "|"
SBATCH_TRIES = 6


class Row(NamedTuple):
    """One job as squeue lists it; times in epoch seconds, None when Slurm has none yet."""
    state: str
    submit: int | None
    start: int | None          # StartTime of the current allocation
    end: int | None
    nodelist: str              # a hostlist, see fakes.slurm.hostlist.expand
    name: str = ""             # the job's name (gs-<run label>-<job id> for the run's own)


class SlurmClient:
    def __init__(self, cluster: SlurmEndpoint):
        self.cluster = cluster
        self.retries = 0                                  # sbatch calls repeated after a transient error
        self._timing: dict[str, list[float]] = {}         # command -> [calls, total s, max s]
        self._lock = threading.Lock()

    def batch_argv(self, name: str, sleep_s: float, *opts: str) -> list[str]:
        """sbatch for a job that holds its allocation for sleep_s seconds, its output discarded."""
        return ["sbatch", "--parsable", f"--job-name={name}", f"--chdir={self.cluster.jobs_dir}",
                "--output=/dev/null", "--error=/dev/null", *opts, "--wrap", f"sleep {max(0.0, sleep_s):.3f}"]

    def sbatch(self, argv: list[str], stop: threading.Event) -> tuple[int | None, str]:
        """(Slurm job id, "") or (None, the last line of sbatch's error); no retry once `stop` is set."""
        err = ""
        for attempt in range(SBATCH_TRIES):
            try:
                r = self._timed("sbatch", argv)
                out, err, rc = r.stdout.strip(), r.stderr.strip(), r.returncode
            except subprocess.TimeoutExpired:
                out, err, rc = "", "sbatch timed out after 120 s", 1
            if rc == 0 and out:
                return int(out.split(";")[0]), ""
            if stop.is_set() or not any(s in err for s in TRANSIENT):
                break
            with self._lock:
                self.retries += 1
            time.sleep(0.5 * (attempt + 1))
        return None, err.splitlines()[-1] if err else ""

    def squeue(self) -> dict[int, Row] | None:
        """Every job slurmctld still lists (finished ones for MinJobAge), by Slurm job id; None when
        squeue failed. Raises subprocess.TimeoutExpired after 120 s."""
        r = self._timed("squeue", ["squeue", "-h", "--states=all", "-o", SQUEUE_FMT])
        if r.returncode != 0:
            return None
        rows = {}
        for line in r.stdout.splitlines():
            p = line.split("|", 6)
            if len(p) == 7 and p[0].isdigit():
                rows[int(p[0])] = Row(p[1], _epoch(p[2]), _epoch(p[3]), _epoch(p[4]), p[5], p[6])
        return rows

    def job_gres(self) -> dict[int, list[tuple[str, str, str, int, int]]] | None:
        """Which GRES each listed job holds, from one `scontrol -d show job` (all jobs):
        job id -> [(node list, kind, type, index, amount)] (fakes.slurm.gres.job_details); None
        when scontrol failed."""
        r = self._timed("scontrol_show_job", ["scontrol", "-d", "show", "job"])
        return job_details(r.stdout) if r.returncode == 0 else None

    def sdiag(self) -> dict[str, Any]:
        """parse_sdiag of the controller's statistics; {} when sdiag did not answer."""
        try:
            r = self.cluster.run(["sdiag"], check=False, timeout=60)
        except subprocess.TimeoutExpired:
            return {}
        return parse_sdiag(r.stdout) if r.returncode == 0 else {}

    def set_nodes(self, names: list[str], state: str, reason: str = "") -> None:
        """scontrol update State=<state> for these nodes, 500 names a call."""
        for k in range(0, len(names), 500):
            argv = ["scontrol", "update", f"NodeName={','.join(names[k:k + 500])}", f"State={state}"]
            self.cluster.run(argv + ([f"Reason={reason}"] if reason else []), check=False)

    def requeue(self, slurm_ids: list[int]) -> None:
        self.cluster.run(["scontrol", "requeue", ",".join(map(str, slurm_ids))], check=False)

    def cancel(self, slurm_ids: list[str]) -> None:
        for k in range(0, len(slurm_ids), 500):
            self.cluster.run(["scancel", *slurm_ids[k:k + 500]], check=False)

    def calls(self, command: str) -> int:
        return int(self._timing.get(command, [0])[0])

    def summary(self) -> dict[str, Any]:
        """Calls, mean and max seconds of sbatch and squeue, and sbatch retries."""
        out: dict[str, Any] = {}
        for cmd in ("sbatch", "squeue") + (("scontrol_show_job",) if "scontrol_show_job" in self._timing else ()):
            calls, total, most = self._timing.get(cmd, (0, 0.0, 0.0))
            out.update({f"{cmd}_calls": int(calls), f"{cmd}_mean_s": round(total / max(1, calls), 4),
                        f"{cmd}_max_s": round(most, 4)})
        out["sbatch_retries"] = self.retries
        return out

    def _timed(self, command: str, argv: list[str]) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        try:
            return self.cluster.run(argv, check=False)
        finally:
            dt = time.monotonic() - t0
            with self._lock:
                calls, total, most = self._timing.get(command, (0, 0.0, 0.0))
                self._timing[command] = [calls + 1, total + dt, max(most, dt)]


def _epoch(s: str) -> int | None:
    return int(s) if s.isdigit() and int(s) > 0 else None
