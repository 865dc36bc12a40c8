"""A Recorder that also keeps every event in order, for tests that check event sequences."""
from __future__ import annotations

from loadgen.measure.recorder import Recorder
from loadgen.model.events import Event
from loadgen.model.job import Job


class Recording(Recorder):
    def __init__(self, jobs: list[Job]):
        super().__init__(jobs)
        self.events: list[Event] = []

    def record(self, events: list[Event]) -> None:
        self.events.extend(events)
        super().record(events)
