"""A fake DCGM exporter: DCGM_FI_PROF_SM_ACTIVE for every allocated GPU of the fake fleet, from the
workload model (loadgen/model/startup/activity.py) instead of hardware counters. Pure: `render` turns the
allocations and the time into exposition text; an HTTP endpoint serves it (loadgen/live/endpoint.py).

Labels follow NVIDIA's dcgm-exporter (gpu, Hostname, modelName) plus the gangstorm job it is
allocated to. GPU indices are handed out per node in allocation order, as a device plugin would.
"""
from __future__ import annotations

from dataclasses import dataclass

from loadgen.model.startup import activity
from loadgen.model.startup.spec import ActivitySpec

METRIC = "DCGM_FI_PROF_SM_ACTIVE"
HELP = (f"# HELP {METRIC} Ratio of cycles an SM has at least 1 warp assigned (fake: gangstorm workload model).\n"
        f"# TYPE {METRIC} gauge\n")


@dataclass(frozen=True)
class Allocation:
    job_id: int
    hostname: str
    gpus: float                     # GPUs this job holds on that node (a slice at its compute share)
    train_since: float | None       # when the job started training (None: pulling, starting, in rendezvous)
    model: str = "h100"


def render(allocations: list[Allocation], spec: ActivitySpec, t: float) -> str:
    lines = [HELP]
    next_gpu: dict[str, int] = {}
    for a in allocations:
        value = activity.at(spec, a.train_since, t)
        whole = int(a.gpus)
        part = round(a.gpus - whole, 6)
        # a slice's GPU is active in proportion to the part the job holds
        for held in [1.0] * whole + ([part] if part > 0 else []):
            g = next_gpu.get(a.hostname, 0)
            next_gpu[a.hostname] = g + 1
            lines.append(f'{METRIC}{{gpu="{g}",Hostname="{a.hostname}",modelName="{a.model}",'
                         f'gangstorm_job="{a.job_id}"}} {value * held:.6f}\n')
    return "".join(lines)
