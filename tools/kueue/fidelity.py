"""A held-out fidelity case for the simulated Kueue: one real run (kueue-manager + kube-scheduler on
KWOK) and its twin on the same wall-clock plan (loadgen/calibration/realcase.py, shared with
tools/gangs/fidelity.py), admission p50/p99 and allocation utilization side by side, as
docs/fidelity.md compares the other schedulers.

Usage: PYTHONPATH=. python tools/kueue/fidelity.py [tools/kueue/heldout.yaml] [--time-scale 20]
       [--out results/kueue/heldout] [--runs 1]   (under `flock /work/cpu.lock` on a shared machine)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadgen.calibration.realcase import figures, real_runs
from loadgen.calibration.twin import twin
from loadgen.input.scenario import load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="tools/kueue/heldout.yaml")
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path("results/kueue/heldout"))
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    sc = load(args.scenario)
    reals = real_runs(sc, "kueue", args.out / "real", args.time_scale, args.runs, reuse=False)
    sim = twin(sc, "kueue", args.time_scale)
    t = figures(sim)
    out = {"scenario": args.scenario, "time_scale": args.time_scale, "sim": t, "runs": []}
    for real in reals:
        r = figures(real)
        out["runs"].append({"real": r, "real_over_sim": {k: round(r[k] / t[k], 3) if r.get(k) and t.get(k) else None
                                                          for k in ("admission_p50_s", "admission_p99_s")},
                            "util_diff_pp": round((r["alloc_util"] - t["alloc_util"]) * 100, 2)
                            if r.get("alloc_util") is not None and t.get("alloc_util") is not None else None})
    if len(out["runs"]) == 1:               # the single-run layout results/kueue/heldout/fidelity.json has
        out.update(out.pop("runs")[0])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fidelity.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
