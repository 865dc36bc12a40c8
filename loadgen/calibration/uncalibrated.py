"""Why a gang twin stays uncalibrated in a profile fitted to published figures, stated from what was
measured, so every result prints the reason beside the word (issue 32).

`gangstorm calibrate --anchors` holds kube, Volcano, Ray and Slurm out on published benchmarks. The
kube family's gang twins (kube-gang, coscheduling, kueue) have none to hold them out on: no
benchmark their projects publish runs the gang path as a throughput. What they do have is measured:
their per-pod costs are kube's, whose anchors this profile's validation holds, and each was run
against its real scheduler on this machine class. The reason quotes both, so a reader sees how far
the parts that are checked came out. Kueue does publish CI averages of its own scalability test;
tools/kueue/perf.sh runs that test here with the real Kueue, and the reason quotes both until the
twin runs it too.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from loadgen.calibration.fidelity import GOAL_RATIO, GOAL_UTIL_PP
from loadgen.input.profile import Profile

KUEUE_HELDOUT = "results/kueue/heldout/fidelity.json"
KUEUE_HELDOUT_COMMAND = "PYTHONPATH=. python tools/kueue/fidelity.py"

KUEUE_PERF = "results/kueue/perf-baseline"
# the averages of 5 CI runs in the comments of Kueue v0.19.2's
# test/performance/scheduler/configs/baseline/rangespec.yaml (large: with SchedulingEquivalenceHashing)
KUEUE_PERF_PUBLISHED_S = {"large": 16.501, "medium": 76.768, "small": 215.468}


def _fixed(text: str) -> Callable[[Path], str]:
    return lambda root: text


def _kueue_own_benchmark(root: Path) -> str:
    head = "Kueue publishes no throughput figure, and the twin does not run Kueue's own scalability test yet"
    try:
        classes = yaml.safe_load((root / KUEUE_PERF / "summary.yaml").read_text())["workloadClasses"]
        here = [classes[c]["averageTimeToAdmissionMs"] / 1000 for c in KUEUE_PERF_PUBLISHED_S]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return f"{head} (tools/kueue/perf.sh runs it with the real Kueue)"
    return (f"{head}: with the real Kueue v0.19.2 here (tools/kueue/perf.sh) its average times to admission were "
            + " / ".join(f"{x:.1f}" for x in here) + " s (" + " / ".join(KUEUE_PERF_PUBLISHED_S)
            + ") against its release's CI averages of "
            + " / ".join(f"{x:.1f}" for x in KUEUE_PERF_PUBLISHED_S.values()) + " s")


# why no published figure holds the twin out (sourced: what each project's own benchmarks contain)
NO_BENCHMARK: dict[str, Callable[[Path], str]] = {
    "kube-gang": _fixed("no published benchmark runs kube-scheduler's gangs (scheduler_perf in kubernetes v1.36.1 "
                        "has no workload with a Workload or PodGroup)"),
    "coscheduling": _fixed("no published benchmark runs the coscheduling plugin (scheduler-plugins v0.34.7 has "
                           "integration tests, no performance test)"),
    "kueue": _kueue_own_benchmark,
}
DONOR = {"kube-gang": "kube", "coscheduling": "kube", "kueue": "kube"}


def _span(v: list) -> str:
    return f"{v[0]:g}" if v[0] == v[1] else f"{v[0]:g} to {v[1]:g}"


def _runs(n: int) -> str:
    return f"{n} real run" + ("" if n == 1 else "s")


def _gang_local(scheduler: str, local: Profile, root: Path) -> str:
    held = (local.validation.get(scheduler) or {}).get("held_out")
    if not held:
        return f"no held-out run against the real scheduler in profile {local.name}"
    parts = [f"{k} {_span(held[f'{k}_ratio'])}" for k in ("p50", "p99") if held.get(f"{k}_ratio")]
    if held.get("util_diff_pp"):
        parts.append(f"util {_span(held['util_diff_pp'])} pp")
    verdict = "within the goal band" if held.get("within_goal") else "OUTSIDE the goal band"
    return (f"held out against the real scheduler on this machine class in profile {local.name} ({held['cases']}, "
            f"{_runs(held['real_runs_per_case'])}): real/sim {', '.join(parts)}, {verdict}")


def _kueue_local(scheduler: str, local: Profile, root: Path) -> str:
    try:
        d = json.loads((root / KUEUE_HELDOUT).read_text())
        r = d["real_over_sim"]
        util = d["util_diff_pp"]
        jobs = d["real"]["jobs"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no held-out run against the real Kueue ({KUEUE_HELDOUT} is missing: {KUEUE_HELDOUT_COMMAND})"
    lo, hi = GOAL_RATIO
    band = lo <= r["admission_p50_s"] <= hi and lo <= r["admission_p99_s"] <= hi and abs(util) <= GOAL_UTIL_PP
    return (f"held out against the real Kueue on this machine class once ({KUEUE_HELDOUT_COMMAND}, {jobs} jobs): "
            f"real/sim p50 {r['admission_p50_s']:g}, p99 {r['admission_p99_s']:g}, util {util:g} pp, "
            + ("within the goal band" if band else "OUTSIDE the goal band"))


def _donor(profile: Profile, donor: str) -> str:
    anchors = (profile.validation.get(donor) or {}).get("anchors") or []
    rows = [r for r in anchors if r.get("role") in ("fit", "held_out")]
    if not rows:
        return f"its per-pod costs are {donor}'s, which this profile does not validate"
    return (f"its per-pod costs are {donor}'s, whose anchors give published/sim "
            + ", ".join(f"{r['ratio']:g} ({r['anchor']}, {r['role'].replace('_', ' ')})" for r in rows))


# where each twin's held-out runs against its real scheduler here are recorded
HERE = {"kube-gang": _gang_local, "coscheduling": _gang_local, "kueue": _kueue_local}


def reason(scheduler: str, profile: Profile, local: Profile, root: Path) -> str:
    here = HERE[scheduler](scheduler, local, root)
    return f"{NO_BENCHMARK[scheduler](root)}; {_donor(profile, DONOR[scheduler])}; {here}"


def add_reasons(profile: Profile, local: Profile, root: Path, donors: list[str]) -> dict[str, Any]:
    """Write the reason into the profile's validation for each gang twin whose donor was just
    validated and that has no held-out validation of its own; returns what it wrote."""
    out = {}
    for s, donor in DONOR.items():
        if donor in donors and not profile.calibrated(s):
            out[s] = profile.validation[s] = {"uncalibrated_because": reason(s, profile, local, root)}
    return out
