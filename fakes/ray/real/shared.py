"""One attached Ray cluster, several Locust processes (ctx.role): what the observing process
makes of the run's groups that other processes' drivers own.

The submitters' drivers create, hold and remove their groups as in a run of one process; their
targets say SUBMITTED (and FAILED when a group's creation failed) and nothing else. The observing
process's driver reads the GCS's placement group table every POLL_S and reports each change
of a group named gs-<label>-<id> of a job it expects ("seen"); this turns them into the gang events.
A group the GCS lists CREATED is ADMITTED (and STARTED, READY) at that poll; removed (or no longer
listed) after its hold it FINISHED; removed sooner, its owner stopped first (the end of the run, or
a worker that died): no event, as a run of one process says nothing of the gangs its stop removes."""
from __future__ import annotations

from typing import Any

from loadgen.model.events import Kind
from loadgen.model.job import Job

POLL_S = 0.25           # the observer's GCS table read this often: admissions are seen this late at most
WAITING = ("PENDING", "PREPARED", "RESCHEDULING")
# The owner's hold starts when its driver sees the group ready, up to one poll (and the table
# read) before this process does: a removal that much before the end of the hold is its end.
HOLD_SLACK_S = 1.0


class RayShared:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

    def expect(self, jobs: dict[int, Job]) -> None:
        """Observe role: the jobs other processes submit; each is followed from the first poll
        that lists its group."""
        self.expected = dict(jobs)

    def _on_seen(self, m: dict[str, Any]) -> None:
        gid, t, state = m["id"], self.clock.at(m["t"]), m["state"]
        job = self.expected.get(gid)
        if job is None:
            return
        if gid not in self.group_of:
            self._count_shape(job)              # first seen: it has arrived
        if gid in self.running and self.group_of.get(gid) != m["pg"]:   # its owner created it again
            self._lost_shared(gid, t, "recreated")
        self.group_of[gid] = m["pg"]
        if state == "CREATED":
            if gid not in self.running:
                self._admitted_shared(gid, job, t, m)
        elif state in WAITING:
            if gid in self.running:
                self._lost_shared(gid, t, state.lower())
            self.jobs[gid] = self.pending[gid] = job
        elif gid in self.jobs:                  # REMOVED, or GONE from the table
            self._unbook(gid)
            since = self.admitted_at.pop(gid, None) if gid in self.running else None
            for held in (self.pending, self.running, self.jobs):
                held.pop(gid, None)
            if since is not None and t - since >= job.duration_s - HOLD_SLACK_S:
                self.counters["finished"] += 1
                self._emit(t, gid, Kind.FINISHED)
            else:
                self.removed_unfinished += 1

    def _admitted_shared(self, gid: int, job: Job, t: float, m: dict[str, Any]) -> None:
        self.jobs[gid] = job
        self.pending.pop(gid, None)
        self.running[gid] = [self.node_index.get(n, -1) for n in m["nodes"]]
        self.admitted_at[gid] = t
        self._first_ready(gid, t, m)
        self._book(gid, job, self.running[gid])
        self._emit(t, gid, Kind.ADMITTED, job.members, nodes=tuple(n for n in self.running[gid] if n >= 0))
        self._emit(t, gid, Kind.STARTED, job.members)
        self._emit(t, gid, Kind.READY)

    def _lost_shared(self, gid: int, t: float, reason: str) -> None:
        self._unbook(gid)
        self.running.pop(gid, None)
        self.admitted_at.pop(gid, None)
        self.counters["evicted"] += 1
        self._emit(t, gid, Kind.EVICTED, 0, reason)
        self._emit(t, gid, Kind.REQUEUED, 0, reason)
