"""What RealSlurm keeps per job (attempts, Slurm states) and the small helpers its parts share."""
from __future__ import annotations

import queue
from collections.abc import Iterator
from dataclasses import dataclass, field

from loadgen.model.job import Job

RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}

PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "CONFIGURING", "RESV_DEL_HOLD"}

DONE_OK = {"COMPLETED"}

DONE_BAD = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}

SDIAG_EVERY_S = 5.0

SDIAG_LIVE = ("main_last_cycle_us", "main_mean_cycle_us", "bf_last_cycle_us", "server_thread_count",
              "agent_queue_size", "jobs_pending")

@dataclass
class Attempt:
    """What the prologs of one allocation of a job reported (Slurm's restart count = the attempt)."""
    restart: int
    placed: float                   # the first node's prolog asked: the allocation as the nodes saw it
    gang_ready: float               # the model's ready time of the allocation's last node
    done: dict[str, float] = field(default_factory=dict)    # node -> its prolog reported done

@dataclass
class Tracked:
    job: Job
    slurm_id: int = 0
    submitted_t: float = 0.0            # client: sbatch returned
    seen: bool = False                  # squeue has listed it
    started: bool = False
    done: bool = False
    evicted: bool = False               # chaos already reported the eviction of this allocation
    restarting: bool = False            # restart() reported EVICTED and REQUEUED; Slurm has not shown it pending yet
    # The lowest Slurm restart count the current attempt can have: raised at each requeue seen, so
    # what the prologs of an earlier attempt still report never makes the next one READY.
    floor: int = 0
    admitted_t: float = 0.0             # ADMITTED of the current attempt
    ready: bool = False                 # READY reported in the current attempt
    attempt: Attempt | None = None      # the latest attempt the prologs reported
    nodes: list[str] = field(default_factory=list)
    starts: list[tuple[float, int | None, list[str]]] = field(default_factory=list)   # (obs t, StartTime, nodes)

def _few(items: list, k: int = 10) -> str:
    return ", ".join(map(str, items[:k])) + (f", ... {len(items) - k} more" if len(items) > k else "")

def _drained(q: queue.SimpleQueue | queue.Queue) -> Iterator:
    """What `q` holds now, without waiting."""
    while True:
        try:
            yield q.get_nowait()
        except queue.Empty:
            return

def lock_busy(sdiag: dict) -> tuple[dict[str, float], dict[str, float]]:
    """slurmctld's lock holders' time from sdiag: main and backfill cycles, and the submit and
    completion RPCs. sdiag's RPC time includes waiting for the locks, so this is an upper bound."""
    def cycles(prefix: str) -> float:
        return sdiag.get(f"{prefix}_cycles", 0) * sdiag.get(f"{prefix}_mean_cycle_us", 0) / 1e6
    rpc = sdiag.get("rpc") or {}
    rpc_s = sum(rpc.get(k, {}).get("total_time", 0) for k in ("REQUEST_SUBMIT_BATCH_JOB",
                                                              "REQUEST_COMPLETE_BATCH_SCRIPT")) / 1e6
    parts = {"rpc": round(rpc_s, 6), "main": round(cycles("main"), 6), "backfill": round(cycles("bf"), 6)}
    return parts, {"slurmctld-locks": round(sum(parts.values()), 6)}
