"""The twin of a real GPU-sharing run: the simulated scheduler on the same wall-clock plan (jobs
divided by the time scale, loadgen/calibration/twin.py), timed by a calibration profile, so its
admission is in the same wall seconds as the real run's. Writes <out>/summary.json (the scheduler's
summary) and prints its admission and slice figures.

    PYTHONPATH=$PWD python tools/gpushare/twin.py slurm --time-scale 300 --profile local \
        --out results/gpushare/slurm/twin-local

--set KEY=VALUE overrides a scenario setting (repeatable), e.g. --set schedulers.volcano.vgpu_books=v1.14.1.
"""
import argparse
import json
from pathlib import Path

from loadgen.calibration.twin import twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile


def setting(kv: str) -> tuple[str, object]:
    key, text = kv.split("=", 1)
    try:
        return key, json.loads(text)        # numbers and booleans as such
    except ValueError:
        return key, text


p = argparse.ArgumentParser()
p.add_argument("scheduler", help="the scheduler whose twin runs, e.g. slurm or volcano")
p.add_argument("--scenario", help="default: results/gpushare/<scheduler>/scenario.yaml")
p.add_argument("--time-scale", type=float, required=True, help="the real run's --time-scale")
p.add_argument("--profile", default="local")
p.add_argument("--out", type=Path, required=True)
p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a scenario setting (dotted key)")
a = p.parse_args()

sets = {f"--set {kv}": setting(kv) for kv in a.set}
sc = load_with_overrides(a.scenario or f"results/gpushare/{a.scheduler}/scenario.yaml", profile=a.profile,
                         more=sets)
result = twin(sc, a.scheduler, a.time_scale, load_profile(a.profile))
a.out.mkdir(parents=True, exist_ok=True)
(a.out / "summary.json").write_text(json.dumps({"time_scale": a.time_scale, "profile": a.profile, "set": a.set,
                                                "schedulers": {a.scheduler: result}}, indent=1, default=str) + "\n")
s = result.get("gpu_sharing") or {}
print(f"admission p50 {result['admission_s']['p50']} p99 {result['admission_s']['p99']}, "
      f"allocation {s.get('allocation_ratio')}, fragmentation {s.get('fragmentation_ratio')}")
