"""A target that does nothing: every gang is admitted the instant it is submitted.

Used to measure the Locust driver itself (loadgen.bench.locust): whatever lateness shows up
is the generator's own.
"""
from __future__ import annotations

from loadgen.model.events import Event, Kind
from loadgen.model.target import Snapshot, Target


class NoopTarget(Target):
    """Registered as kube/noop by the benchmark; runs on the wall clock like a real backend."""
    name = "kube"
    backend = "noop"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.count = 0

    def submit(self, job, now):
        self.count += 1
        return [Event(now, job.id, Kind.SUBMITTED), Event(now, job.id, Kind.ADMITTED, job.members)]

    def advance(self, now):
        return []

    def snapshot(self, now):
        return Snapshot(now, 0, 0, 0, 0, 0, 0, {"submitted": self.count})

    def control_plane(self):
        return {"model": "noop", "submitted": self.count}
