"""The twin of a real GPU-sharing run: the simulated scheduler on the same wall-clock plan (jobs
divided by the time scale, loadgen/calibration/twin.py), timed by a calibration profile, so its
admission is in the same wall seconds as the real run's. Writes <out>/summary.json (the scheduler's
summary) and prints its admission and slice figures.

    PYTHONPATH=$PWD python tools/gpushare/twin.py slurm --time-scale 300 --profile local \
        --out results/gpushare/slurm/twin-local
"""
import argparse
import json
from pathlib import Path

from loadgen.calibration.twin import twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile

p = argparse.ArgumentParser()
p.add_argument("scheduler", help="the scheduler whose twin runs, e.g. slurm or volcano")
p.add_argument("--scenario", help="default: results/gpushare/<scheduler>/scenario.yaml")
p.add_argument("--time-scale", type=float, required=True, help="the real run's --time-scale")
p.add_argument("--profile", default="local")
p.add_argument("--out", type=Path, required=True)
a = p.parse_args()
sc = load_with_overrides(a.scenario or f"results/gpushare/{a.scheduler}/scenario.yaml", profile=a.profile)
result = twin(sc, a.scheduler, a.time_scale, load_profile(a.profile))
a.out.mkdir(parents=True, exist_ok=True)
(a.out / "summary.json").write_text(json.dumps({"time_scale": a.time_scale, "profile": a.profile,
                                                "schedulers": {a.scheduler: result}}, indent=1, default=str) + "\n")
s = result.get("gpu_sharing") or {}
print(f"admission p50 {result['admission_s']['p50']} p99 {result['admission_s']['p99']}, "
      f"allocation {s.get('allocation_ratio')}, fragmentation {s.get('fragmentation_ratio')}")
