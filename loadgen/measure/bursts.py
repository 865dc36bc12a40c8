"""Bind bursts: a session-loop scheduler binds in runs separated by its sessions' gaps.

vc-scheduler binds a job's pods as its allocate walk commits them, so within a long session the
binds stream at one per walk; between sessions nothing is bound for at least the schedule period.
Splitting the bind times at gaps longer than `gap_s` recovers the sessions that bound pods, and
the pace inside the long ones is the per-pod walk as the scheduler ran it, whatever else shared
the machine. The same split applies to a twin's admissions, so the two can be compared.
"""
from __future__ import annotations

from collections.abc import Iterable


def bursts(times_s: Iterable[float], gap_s: float = 0.4) -> list[dict]:
    """Sorted bind times split at gaps > gap_s: [{"start_s", "end_s", "pods"}], in time order."""
    out: list[dict] = []
    for t in sorted(times_s):
        if out and t - out[-1]["end_s"] <= gap_s:
            out[-1]["end_s"] = t
            out[-1]["pods"] += 1
        else:
            out.append({"start_s": t, "end_s": t, "pods": 1})
    return out


def stream_ms_per_pod(runs: list[dict], min_pods: int = 100) -> float | None:
    """Milliseconds per pod inside the bursts of at least min_pods pods: their summed span over
    their summed pods less one each (the first bind of a burst opens it); None if there is none."""
    long = [b for b in runs if b["pods"] >= min_pods]
    if not long:
        return None
    return 1000.0 * sum(b["end_s"] - b["start_s"] for b in long) / sum(b["pods"] - 1 for b in long)
