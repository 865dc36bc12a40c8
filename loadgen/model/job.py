"""The one job type every backend consumes.

A Target turns a Job into a pod group, a Volcano job, a placement group or an sbatch call.
Times are seconds from the start of the run (virtual or wall clock, the caller decides).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

from loadgen.model.gpushare import GpuShare, parse_share


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    tenant: str
    queue: str
    cls: str                # job class from the scenario mix, e.g. "small" or "large"
    members: int            # gang size: pods / bundles / nodes
    gpus_per_member: int
    duration_s: float       # run time once the whole gang is admitted
    submit_s: float         # intended (scheduled) submit time: admission is measured from here
    min_available: int      # members that must be bound before the gang counts as admitted
    cpus_per_member: int = 0
    priority: int = 0
    name: str = ""
    share: str = ""         # "" whole GPUs, else one slice of one GPU: loadgen.model.gpushare's text form
    gpu_spec: str = ""      # GPU models the job accepts, "|"-separated catalogue names ("" any), as openb's gpu_spec

    @property
    def gpus(self) -> int:
        """Whole GPUs asked for; a shared member counts as one GPU here (see `gpu_share`)."""
        return self.members * self.gpus_per_member

    @property
    def gpu_share(self) -> GpuShare:
        """The parsed share each member takes (WHOLE unless `share` names a slice)."""
        return parse_share(self.share, f"job {self.id}: share")

    @property
    def whole_node(self) -> bool:
        """8-GPU members take a whole node (exclusive) on every backend."""
        return self.gpus_per_member >= 8

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """The GPU models this job accepts (empty: any)."""
        return tuple(m for m in self.gpu_spec.split("|") if m)

    def to_json(self) -> str:
        row = asdict(self)
        for key in ("share", "gpu_spec"):
            if not row[key]:
                del row[key]     # whole-GPU traces stay as they were before shares existed
        return json.dumps(row, separators=(",", ":"))

    @classmethod
    def from_dict(cls, row: dict) -> Job:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in known})
