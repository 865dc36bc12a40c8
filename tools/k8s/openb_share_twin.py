"""The kube twin on the real openb-slice run's wall-clock plan (results/gpushare/kube/README.md).

A real run at time scale S keeps its admission latencies in wall seconds (loadgen/drive/timescale.py),
so its jobs.csv and summary.json are not comparable with a sim run of the same scenario in virtual
seconds: a wait for capacity shrinks S-fold, a control-plane latency does not. The twin on the same
wall-clock plan (loadgen/calibration/twin.py) measures in the real run's seconds. Prints summary.json's
admission by class and gpu_sharing ratios of that twin as JSON.

    python tools/k8s/openb_share_twin.py results/gpushare/kube/openb-slice.yaml \\
        results/gpushare/kube/openb-slice.jsonl [time_scale, default 60]
"""
from __future__ import annotations

import json
import sys

from loadgen.calibration.twin import twin
from loadgen.input.scenario import load


def main(argv: list[str]) -> int:
    scenario_path, trace = argv[0], argv[1]
    scale = float(argv[2]) if len(argv) > 2 else 60.0
    s = twin(load(scenario_path), "kube", scale, trace=trace)
    keys = ("p50", "p99")
    out = {"time_scale": scale, "all": {k: s["admission_s"][k] for k in keys},
           "by_class": {c: {"count": v["admission_s"]["count"], **{k: v["admission_s"][k] for k in keys}}
                        for c, v in sorted(s["by_class"].items())},
           "gpu_sharing": {k: s["gpu_sharing"].get(k) for k in ("allocation_ratio", "whole_gpus_ratio",
                                                                 "fragmentation_ratio", "stranded_ratio")},
           "jobs": s["jobs"]}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
