"""The kube twin on the real openb-slice run's wall-clock plan (results/gpushare/kube/README.md).

A real run at time scale S keeps its admission latencies in wall seconds (loadgen/drive/timescale.py),
so its jobs.csv and summary.json are not comparable with a sim run of the same scenario in virtual
seconds: a wait for capacity shrinks S-fold, a control-plane latency does not. The twin on the same
wall-clock plan (loadgen/calibration/twin.py) measures in the real run's seconds. Prints summary.json's
admission by class and gpu_sharing ratios of that twin as JSON.

    python tools/k8s/openb_share_twin.py results/gpushare/kube/openb-slice.yaml \\
        results/gpushare/kube/openb-slice.jsonl [time_scale, default 60] [--seeds N]

--seeds N runs the twin once per scenario seed 1..N instead (the seed breaks the scheduler's score
ties) and prints the command and load average, one JSON line per seed, then the median over seeds
of each figure (figure by figure, not one run's): with 4 eight-GPU pods, whether one node empties
early decides their waits, so one seed is one draw.
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import sys

from loadgen.calibration.twin import twin
from loadgen.input.scenario import load

RATIOS = ("allocation_ratio", "whole_gpus_ratio", "fragmentation_ratio", "stranded_ratio")


def one(scenario_path: str, trace: str, scale: float, seed: int | None = None) -> dict:
    sc = load(scenario_path, overrides={"seed": seed} if seed is not None else None)
    s = twin(sc, "kube", scale, trace=trace)
    keys = ("p50", "p99")
    return {"time_scale": scale, "seed": sc.seed, "all": {k: s["admission_s"][k] for k in keys},
            "by_class": {c: {"count": v["admission_s"]["count"], **{k: v["admission_s"][k] for k in keys}}
                         for c, v in sorted(s["by_class"].items())},
            "gpu_sharing": {k: s["gpu_sharing"].get(k) for k in RATIOS},
            "jobs": s["jobs"]}


def flat(out: dict) -> dict[str, float]:
    """The figures of one run by name, for the median over seeds."""
    row = {f"all_{k}": v for k, v in out["all"].items()}
    for c, v in out["by_class"].items():
        row.update({f"{c}_{k}": v[k] for k in ("p50", "p99")})
    row.update(out["gpu_sharing"])
    return row


def main(argv: list[str]) -> int:
    seeds = 0
    if "--seeds" in argv:
        i = argv.index("--seeds")
        seeds = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    scenario_path, trace = argv[0], argv[1]
    scale = float(argv[2]) if len(argv) > 2 else 60.0
    if not seeds:
        print(json.dumps(one(scenario_path, trace, scale), indent=1))
        return 0
    print(json.dumps({"command": "python tools/k8s/openb_share_twin.py " + " ".join(sys.argv[1:]),
                      "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                      "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    rows = []
    for seed in range(1, seeds + 1):
        row = flat(one(scenario_path, trace, scale, seed))
        rows.append(row)
        print(json.dumps({"seed": seed, **{k: round(v, 3) for k, v in row.items()}}), flush=True)
    print(json.dumps({"median_over_seeds": seeds,
                      **{k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
