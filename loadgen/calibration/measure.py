"""Simulator parameters read straight off the real components' own metrics, and the ones left to fit.

Each extractor takes the fitting runs of one scheduler ((case, result) pairs, result being the
scheduler's part of summary.json, control-plane figures included) and returns
{(profile section, key): (value, what it was measured from)}.
"""
from __future__ import annotations

from typing import Callable

from loadgen.calibration.cases import Case
from loadgen.calibration.fit import Free

Runs = list[tuple[Case, dict]]
Extractor = Callable[[Runs], dict[tuple[str, str], tuple[float, str]]]

# What no component metric gives: fitted to the twins' admission tails.
FREE: dict[str, list[Free]] = {
    "kube": [Free("kube", "observe_ms", 0.1, 5000.0), Free("control_plane", "create_ms", 0.1, 5000.0)],
    "volcano": [Free("volcano", "observe_ms", 0.1, 5000.0), Free("volcano", "session_base_ms", 1.0, 20000.0)],
    "ray": [Free("ray", "observe_ms", 0.1, 5000.0), Free("ray", "gcs_per_node_us", 0.1, 1e5)],
    "slurm": [Free("slurm", "observe_ms", 0.1, 5000.0), Free("slurm", "main_cycle_base_ms", 0.01, 5000.0)],
}

EXTRACTORS: dict[str, Extractor] = {}


def extract(scheduler: str, runs: Runs) -> dict[tuple[str, str], tuple[float, str]]:
    fn = EXTRACTORS.get(scheduler)
    return fn(runs) if fn else {}
