"""Kueue's quota arithmetic for one resource (GPUs) in one cohort of ClusterQueues, as Kueue v0.19.2
computes it; what the simulated Kueue (fakes/kueue/sim.py) admits by. Pure: no time, no nodes.

The model is the flat case gangstorm creates (fakes/kueue/controlplane.py queue_objects): one
cohort without quota of its own, one flavor, no lendingLimit, optional borrowingLimit.
- Usage and availability (pkg/cache/scheduler/resource_node.go): with no lendingLimit a queue keeps
  nothing locally, its whole nominal quota is stored in the cohort, so
  available(q) = sum(nominal) - sum(usage), capped by nominal + borrowingLimit - usage(q), and
  potentialAvailable(q) = sum(nominal), capped by nominal + borrowingLimit.
- Flavor assignment (pkg/scheduler/flavorassigner/flavorassigner.go fitsResourceQuota): a request
  above potentialAvailable never fits (ExceedsMaxQuota); within available it fits, borrowing when
  usage + request exceeds nominal; otherwise, if the request alone is within nominal, preemption
  may make room (reclaimWithinCohort, withinClusterQueue), else it waits (borrowWithinCohort
  unset, fair sharing off).
- Preemption (pkg/scheduler/preemption/preemption.go classicalPreemptions, classical/
  candidate_generator.go, common/ordering.go CandidatesOrdering): the preemptor's queue's
  policies decide: the admitted workloads of other queues of the cohort while that queue is still
  borrowing (reclaimWithinCohort Any: any priority; LowerPriority: lower only) and its own queue's
  lower-priority workloads (withinClusterQueue LowerPriority); ordered evicted first (none here),
  other queues before its own, lower priority first, most recently admitted first; taken one at a time until the request
  fits, then given back newest-but-last first when it still fits without them (fillBackWorkloads).
"""
from __future__ import annotations

from dataclasses import dataclass, field

FIT, PREEMPT, NO_FIT = "fit", "preempt", "no-fit"


@dataclass
class Admitted:
    wid: int
    queue: str
    gpus: int
    priority: int
    since: float            # quota reserved at (CandidatesOrdering: most recent first)


@dataclass
class ClusterQueue:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    reclaim_within_cohort: str = "Any"           # Never | LowerPriority | Any
    within_cluster_queue: str = "LowerPriority"  # Never | LowerPriority | LowerOrNewerEqualPriority
    usage: int = 0
    admitted: dict[int, Admitted] = field(default_factory=dict)

    @property
    def borrowed(self) -> int:
        return max(0, self.usage - self.nominal)


class Cohort:
    def __init__(self) -> None:
        self.queues: dict[str, ClusterQueue] = {}

    def add(self, cq: ClusterQueue) -> ClusterQueue:
        self.queues[cq.name] = cq
        return cq

    def available(self, q: ClusterQueue) -> int:
        pool = sum(c.nominal for c in self.queues.values()) - sum(c.usage for c in self.queues.values())
        if q.borrowing_limit is not None:
            pool = min(pool, q.nominal + q.borrowing_limit - q.usage)
        return pool

    def potential(self, q: ClusterQueue) -> int:
        pool = sum(c.nominal for c in self.queues.values())
        return pool if q.borrowing_limit is None else min(pool, q.nominal + q.borrowing_limit)

    def mode(self, q: ClusterQueue, gpus: int) -> str:
        """FIT, PREEMPT (preemption might make room) or NO_FIT for a request of `gpus` in q. The
        request is compared alone with the maximum capacity and the nominal quota, and with what
        is still available given every queue's usage."""
        if gpus > self.potential(q):
            return NO_FIT
        if gpus <= self.available(q):
            return FIT
        return PREEMPT if gpus <= q.nominal else NO_FIT

    def admit(self, q: ClusterQueue, a: Admitted) -> None:
        q.admitted[a.wid] = a
        q.usage += a.gpus

    def remove(self, wid: int, queue: str) -> Admitted | None:
        q = self.queues[queue]
        a = q.admitted.pop(wid, None)
        if a is not None:
            q.usage -= a.gpus
        return a

    def _candidates(self, q: ClusterQueue, priority: int, since: float) -> tuple[list[Admitted], list[Admitted]]:
        """The preemptor's queue's policies decide (classical/hierarchical_preemption.go): its
        withinClusterQueue for its own workloads, its reclaimWithinCohort for the others'."""
        own, others = [], []
        if q.within_cluster_queue == "LowerPriority":
            own = [a for a in q.admitted.values() if a.priority < priority]
        elif q.within_cluster_queue == "LowerOrNewerEqualPriority":
            own = [a for a in q.admitted.values()
                   if a.priority < priority or (a.priority == priority and a.since > since)]
        if q.reclaim_within_cohort != "Never":
            others = [a for o in self.queues.values() if o is not q for a in o.admitted.values()
                      if q.reclaim_within_cohort == "Any" or a.priority < priority]
        order = lambda a: (a.priority, -a.since, a.wid)     # noqa: E731 (CandidatesOrdering, none evicted)
        return sorted(own, key=order), sorted(others, key=order)

    def preemption_targets(self, q: ClusterQueue, gpus: int, priority: int, since: float) -> list[Admitted]:
        """The workloads Kueue evicts so that `gpus` fit in q; [] if none do. `since`: the
        preemptor's queue-order time (for LowerOrNewerEqualPriority). With borrowWithinCohort
        unset, reclaiming from other queues must leave q within its nominal quota; so while q is
        under nominal and other queues have candidates, that attempt comes first, then one with
        q's own candidates only in which q may borrow (preemption.go classicalPreemptions)."""
        own, others = self._candidates(q, priority, since)
        attempts = [(others + own, False)] if others and q.usage < q.nominal else []
        attempts.append((own, True))
        for candidates, may_borrow in attempts:
            targets = self._attempt(q, gpus, candidates, may_borrow)
            if targets:
                return targets
        return []

    def _fits(self, q: ClusterQueue, gpus: int, may_borrow: bool) -> bool:
        return gpus <= self.available(q) and (may_borrow or q.usage + gpus <= q.nominal)

    def _attempt(self, q: ClusterQueue, gpus: int, candidates: list[Admitted], may_borrow: bool) -> list[Admitted]:
        taken: list[Admitted] = []
        found = False
        for a in candidates:
            owner = self.queues[a.queue]
            if owner is not q and owner.usage <= owner.nominal:
                continue                    # that queue no longer borrows: nothing to reclaim from it
            self.remove(a.wid, a.queue)
            taken.append(a)
            if self._fits(q, gpus, may_borrow):
                found = True
                for i in range(len(taken) - 2, -1, -1):         # fillBackWorkloads
                    back = taken[i]
                    self.admit(self.queues[back.queue], back)
                    if self._fits(q, gpus, may_borrow):
                        taken.pop(i)
                    else:
                        self.remove(back.wid, back.queue)
                break
        for a in taken:                     # the snapshot is restored; the caller evicts them
            self.admit(self.queues[a.queue], a)
        return taken if found else []
