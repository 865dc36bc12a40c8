"""What gangstorm needs to know about Kueue without running it, declared once for the simulated
(fakes/kueue/sim.py) and the real (fakes/kueue/target.py) target."""
from __future__ import annotations

import hashlib
import re
from typing import Any

from fakes.kube.traits import KubeTraits
from loadgen.model.job import Job

NAME_MAX = 60


def queue_name(job: Job) -> str:
    """The job's LocalQueue, and ClusterQueue, name: its queue (else tenant) as an RFC 1123 name
    of at most NAME_MAX characters; a longer one keeps a digest of the whole text."""
    clean = re.sub(r"[^a-z0-9-]+", "-", (job.queue or job.tenant).lower()).strip("-") or "q"
    if len(clean) <= NAME_MAX:
        return clean
    digest = hashlib.sha1(clean.encode()).hexdigest()[:8]
    return f"{clean[:NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def nominal_gpus(job: Job, cfg: dict[str, Any], fleet_gpus: int) -> int:
    """The job's queue's nominal GPU quota: queues.nominal_gpus[tenant or queue], else
    default_nominal_share of the fleet's GPUs (at least 1). What a queue leaves idle, the other
    queues of the cohort may borrow."""
    q = cfg.get("queues") or {}
    given = q.get("nominal_gpus") or {}
    for key in (job.tenant, job.queue):
        if key in given:
            return int(given[key])
    return max(1, int(fleet_gpus * float(q.get("default_nominal_share", 0.25))))


class KueueTraits:
    shares_one_watch = False    # the Workload watch is per process; one fleet per Locust process

    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        mode = cfg.get("topology", "preferred")
        return {"topology_aware": mode != "none", "tas": mode,
                "note": "Kueue TAS over the spine/leaf/hostname labels: a multi-member gang "
                        + ("must fit in one leaf" if mode == "required" else
                           "prefers one leaf" if mode == "preferred" else "is placed by kube-scheduler alone")}

    # Kueue admits, kube-scheduler places: its NodeResourcesFit scoring strategies are the policies
    placement_policies = KubeTraits.placement_policies
    placement_policy = KubeTraits.placement_policy
