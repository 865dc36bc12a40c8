"""A gang as the Kubernetes-family adapters track it, and the constants their calls share."""
from __future__ import annotations

from dataclasses import dataclass, field

from loadgen.model.job import Job

NS = "gangstorm"
TIMEOUT = (10, 60)      # connect, read: a call on a dead keep-alive connection must not hang a run


@dataclass(eq=False)
class Gang:
    job: Job
    bound: dict[str, str] = field(default_factory=dict)     # pod uid -> node, current attempt
    succeeded: set[str] = field(default_factory=set)
    retired: set[str] = field(default_factory=set)          # pods of an attempt given up on: ignored
    admitted_t: float | None = None                         # admitted in the current attempt
    requeued_t: float | None = None                         # lost members, not yet admitted again
    ready: set[str] = field(default_factory=set)            # bound pods whose Ready condition is True
    ready_t: float | None = None                            # READY in the current attempt

    @property
    def need(self) -> int:
        return self.job.min_available or self.job.members
