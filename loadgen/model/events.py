"""Per-job events a Target reports back to the runner and the recorder."""
from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class Kind(str, Enum):
    SUBMITTED = "submitted"   # the target accepted the submission
    BOUND = "bound"           # `members` = members bound so far (partial gangs show up here)
    ADMITTED = "admitted"     # last required member bound: the admission instant
    STARTED = "started"       # the job began running (same instant as ADMITTED for gangs)
    READY = "ready"           # every member's container runs (image pulled): placement-to-ready ends
    TRAINING = "training"     # rendezvous done, first all-reduce: time-to-training ends
    START_FAILED = "start-failed"  # a rendezvous attempt timed out; `reason` says how it restarts
    FINISHED = "finished"     # ran to completion, resources released
    EVICTED = "evicted"       # chaos or preemption took members away; `members` still bound
    REQUEUED = "requeued"     # gang restarted as a whole and waits for re-admission
    FAILED = "failed"         # will never run; `reason` says why (e.g. "etcd-nospace")
    REJECTED = "rejected"     # refused at submission; `reason` says why


class Event(NamedTuple):
    # a tuple, not a frozen dataclass: a run makes millions of them, and a frozen dataclass's
    # __init__ sets each field through object.__setattr__ (about three times the cost)
    t: float
    job_id: int
    kind: Kind
    members: int = 0
    reason: str = ""
    backend_t: float | None = None   # the backend's own timestamp when it has one (Slurm StartTime)
    nodes: tuple[int, ...] = ()      # ADMITTED: fleet index of each bound member's node (placement quality)
