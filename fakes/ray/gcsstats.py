"""The GCS's own event-loop statistics, read from gcs_server.out: pure text parsing.

Ray's GCS counts every handler it runs on each of its io_contexts (instrumented_io_context) and
prints the counts every RAY_event_stats_print_interval_ms at INFO level, one block per context:

    [...] gcs_server.cc:1322: Main service Event stats:
    ...
        NodeManagerService.grpc_client.PrepareBundleResources - 660 total (0 active), Execution time: mean = 7.67ms,
    total = 5060.84ms, Queueing time: mean = 0.00ms, ...  (one line in the log, tab-indented)

The figures are cumulative since the GCS started, so the difference of two prints is what happened
between them. Two kinds of names are durations of asynchronous RPCs, not time a thread was busy:
`<Service>.grpc_client.<Method>` (request sent to reply received: what a call to a raylet took) and
`<Service>.grpc_server.<Method>` (request received to reply sent); their `.OnReplyReceived` and
`.HandleRequestImpl` parts are the handlers that did run on the thread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HEADER = re.compile(r"\] \(gcs_server\) [\w.]+:\d+: (.+?) Event stats:\s*$")
LINE = re.compile(r"^\t(.*?) - (\d+) total \((\d+) active\), Execution time: mean = [-\d.]+ms, total = ([-\d.]+)ms, "
                  r"Queueing time: mean = [-\d.]+ms, max = [-\d.]+ms, min = [-\d.]+ms, total = ([-\d.]+)ms")
MAIN = "Main service"
# what Ray needs to print them: at INFO, every this many ms (the head's processes only)
PRINT_ENV = {"RAY_event_stats_print_interval_ms": "2000", "RAY_BACKEND_LOG_LEVEL": "info"}


@dataclass(frozen=True)
class Stat:
    count: int
    exec_ms: float       # execution time, summed
    queue_ms: float      # time queued on the io_context before running, summed

    def minus(self, other: Stat | None) -> Stat:
        if other is None:
            return self
        return Stat(self.count - other.count, self.exec_ms - other.exec_ms, self.queue_ms - other.queue_ms)

    @property
    def mean_ms(self) -> float | None:
        return self.exec_ms / self.count if self.count > 0 else None


Snapshot = dict[str, dict[str, Stat]]           # io_context -> handler -> Stat


def parse(text: str) -> tuple[Snapshot, int]:
    """The last print of every io_context in `text`, and how many prints of the main service it held."""
    snap: Snapshot = {}
    current: dict[str, Stat] | None = None
    prints = 0
    for line in text.splitlines():
        head = HEADER.search(line)
        if head:
            current = snap[head.group(1)] = {}
            prints += head.group(1) == MAIN
            continue
        m = LINE.match(line)
        if m and current is not None:
            current[m.group(1)] = Stat(int(m.group(2)), float(m.group(4)), float(m.group(5)))
        elif line.startswith("[") and current is not None:
            current = None                               # another log line ends the block
    return snap, prints


def read(path: Path) -> tuple[Snapshot, int]:
    try:
        return parse(path.read_text(errors="replace"))
    except OSError:
        return {}, 0


def diff(after: Snapshot, before: Snapshot) -> Snapshot:
    return {ctx: {k: s.minus(before.get(ctx, {}).get(k)) for k, s in handlers.items()}
            for ctx, handlers in after.items()}


def is_rpc_duration(name: str) -> bool:
    """A grpc_client/grpc_server entry that times a whole asynchronous call, not a handler that ran."""
    return (".grpc_client." in name or ".grpc_server." in name) and not name.endswith(
        (".OnReplyReceived", ".HandleRequestImpl"))


def busy_ms(handlers: dict[str, Stat]) -> float:
    """Time the io_context's thread spent running handlers."""
    return sum(s.exec_ms for k, s in handlers.items() if not is_rpc_duration(k))


def rpc_mean_ms(snap: Snapshot, method: str) -> tuple[float | None, int]:
    """Mean duration and count of the GCS's calls `NodeManagerService.grpc_client.<method>`, over every io_context."""
    count, total = 0, 0.0
    for handlers in snap.values():
        s = handlers.get(f"NodeManagerService.grpc_client.{method}")
        if s is not None:
            count, total = count + s.count, total + s.exec_ms
    return (round(total / count, 3) if count > 0 else None), count
