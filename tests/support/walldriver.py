"""A minimal wall-clock driver for a real target in a test: submit at intended times, advance,
keep every event, wait on a condition (the real Volcano and Kueue tests)."""
from __future__ import annotations

import time

from loadgen.model.events import Kind
from loadgen.model.job import Job


class Driver:
    def __init__(self, target):
        self.target = target
        self.t0 = time.monotonic()
        self.events = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def submit(self, job: Job) -> None:
        self.events += self.target.submit(job, self.now())

    def until(self, done, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.events += self.target.advance(self.now())
            if done():
                return
            if time.monotonic() > deadline:
                kinds = [(round(e.t, 2), e.job_id, e.kind.value, e.members) for e in self.events[-30:]]
                raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last events {kinds}")
            time.sleep(0.05)

    def of(self, job_id: int, kind: Kind):
        return [e for e in self.events if e.job_id == job_id and e.kind == kind]

    def finished(self, *ids: int) -> bool:
        return all(self.of(i, Kind.FINISHED) for i in ids)


def gang(i: int, tenant: str, members: int, gpus: int, duration_s: float, submit_s: float, priority: int = 0) -> Job:
    return Job(id=i, tenant=tenant, queue=f"q-{tenant}", cls="large" if members > 1 else "small",
               members=members, gpus_per_member=gpus, duration_s=duration_s, submit_s=submit_s,
               min_available=members, cpus_per_member=8, priority=priority)
