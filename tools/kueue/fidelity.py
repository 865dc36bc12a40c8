"""A held-out fidelity case for the simulated Kueue: one real run (kueue-manager + kube-scheduler on
KWOK) and its twin on the same wall-clock plan (loadgen/calibration/twin.py), admission p50/p99
and allocation utilization side by side, as docs/fidelity.md compares the other schedulers.

Usage: PYTHONPATH=. python tools/kueue/fidelity.py [tools/kueue/heldout.yaml] [--time-scale 20]
       [--out results/kueue/heldout]   (under `flock /work/cpu.lock` on a shared machine)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadgen.calibration.twin import real_run, twin
from loadgen.input.scenario import load


def figures(s: dict) -> dict:
    adm = s["admission_s"]
    return {"jobs": s["jobs"]["admitted"], "admission_p50_s": adm.get("p50"), "admission_p99_s": adm.get("p99"),
            "alloc_util": s.get("alloc_util"), "partial_gang_gpu_hours": s.get("partial_gang_gpu_hours")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="tools/kueue/heldout.yaml")
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path("results/kueue/heldout"))
    args = ap.parse_args()
    sc = load(args.scenario)
    real = real_run(sc, "kueue", args.out / "real", args.time_scale)["schedulers"]["kueue"]
    sim = twin(sc, "kueue", args.time_scale)
    r, t = figures(real), figures(sim)
    ratio = {k: round(r[k] / t[k], 3) if r.get(k) and t.get(k) else None
             for k in ("admission_p50_s", "admission_p99_s")}
    out = {"scenario": args.scenario, "time_scale": args.time_scale, "real": r, "sim": t, "real_over_sim": ratio,
           "util_diff_pp": round((r["alloc_util"] - t["alloc_util"]) * 100, 2)
           if r.get("alloc_util") is not None and t.get("alloc_util") is not None else None}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fidelity.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
