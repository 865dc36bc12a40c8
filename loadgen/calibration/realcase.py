"""One fidelity case outside `gangstorm calibrate`: repeated real runs of one scenario and the twin on
their wall-clock plan, side by side (tools/kueue/fidelity.py, tools/gangs/fidelity.py).

Each real run is kept as <out>/runN/summary.json with the share of its wall time in which some task
waited for a CPU (Linux PSI) written into its control_plane.host_cpu, so a table says how loaded the
machine was; a run whose summary is already there is reused, so a twin can be re-compared (after a
model change) without starting the real backend again. The comparison is loadgen/calibration/
fidelity.py's row (real mean and spread, real/sim ratios, the goal band) plus the partial-gang
GPU-hours, which the gang schedulers exist to keep at zero.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import mean

from loadgen.calibration.fidelity import ratio, real_stats, row
from loadgen.calibration.twin import real_run, twin
from loadgen.input.profile import Profile
from loadgen.input.scenario import Scenario
from loadgen.measure.hostcpu import CpuWait


def figures(s: dict) -> dict:
    """The few numbers a fidelity case compares, from one scheduler's result."""
    adm = s["admission_s"]
    return {"jobs": s["jobs"]["admitted"], "pending_at_end": s["jobs"].get("pending_at_end"),
            "admission_p50_s": adm.get("p50"), "admission_p99_s": adm.get("p99"),
            "alloc_util": s.get("alloc_util"), "partial_gang_gpu_hours": s.get("partial_gang_gpu_hours")}


def real_runs(scenario: Scenario, name: str, out: Path, time_scale: float, runs: int,
              reuse: bool = True, start: bool = True) -> list[dict]:
    """`runs` real runs of the scenario (out/run1 ...), each one's scheduler result; a finished run
    already on disk is read back instead of run again (reuse=False runs it anyway; start=False only
    reads what is on disk and starts no backend)."""
    results = []
    for k in range(1, runs + 1):
        path = out / f"run{k}" / "summary.json"
        if reuse and path.exists():
            summary = json.loads(path.read_text())
            if summary.get("complete", True) and name in summary.get("schedulers", {}):
                results.append(summary["schedulers"][name])
                continue
        if not start:
            continue
        if path.parent.exists():        # a run to do again (reuse=False) or one that never finished
            shutil.rmtree(path.parent)
        with CpuWait() as wait:
            summary = real_run(scenario, name, path.parent, time_scale)
        res = summary["schedulers"][name]
        res.setdefault("control_plane", {}).setdefault("host_cpu", {})["cpu_wait_share"] = round(wait.share, 4)
        path.write_text(json.dumps(summary, indent=1) + "\n")
        results.append(res)
    return results


def cpu_wait(results: list[dict]) -> list[float]:
    return [r.get("control_plane", {}).get("host_cpu", {}).get("cpu_wait_share") for r in results]


def compare(label: str, role: str, reals: list[dict], sim: dict) -> dict:
    """fidelity.row of the real runs against the twin, with what else a gang case reads: the
    partial-gang GPU-hours and jobs left pending (real mean and spread, twin), and each real run's
    CPU wait."""
    out = row(label, role, real_stats(reals), sim)
    partial = [r.get("partial_gang_gpu_hours") or 0.0 for r in reals]
    pending = [r["jobs"].get("pending_at_end", 0) for r in reals]
    out["partial_gang_gpu_hours"] = {"real": round(mean(partial), 5), "real_spread": [min(partial), max(partial)],
                                     "sim": sim.get("partial_gang_gpu_hours")}
    out["pending_at_end"] = {"real": pending, "sim": sim["jobs"].get("pending_at_end", 0)}
    out["cpu_wait_share"] = cpu_wait(reals)
    out["by_class"] = by_class(reals, sim)
    return out


def by_class(reals: list[dict], sim: dict) -> dict:
    """Admission p50 and p99 per job class, real (mean over the runs) against the twin. In a mix of
    one-pod jobs admitted in milliseconds and gangs admitted in seconds the overall median can fall
    between the two, where a few ranks move it severalfold; per class it cannot."""
    out = {}
    for cls, s in sorted(sim.get("by_class", {}).items()):
        real = [r["by_class"][cls]["admission_s"] for r in reals if cls in r.get("by_class", {})]
        if not real:
            continue
        entry = {"jobs": min(a["count"] for a in real)}
        for q in ("p50", "p99"):
            vals = [a[q] for a in real if a.get(q) is not None]
            entry[f"real_{q}"] = mean(vals) if vals else None
            entry[f"sim_{q}"] = s["admission_s"].get(q)
            entry[f"{q}_ratio"] = ratio(entry[f"real_{q}"], entry[f"sim_{q}"])
        out[cls] = entry
    return out


def case(scenario: Scenario, name: str, role: str, out: Path, time_scale: float, runs: int,
         profile: Profile | None = None, reuse: bool = True, start: bool = True) -> dict | None:
    """One case: its real runs (or those on disk) and the twin, compared; None if it has no real run."""
    reals = real_runs(scenario, name, out, time_scale, runs, reuse, start)
    if not reals:
        return None
    sim = twin(scenario, name, time_scale, profile)
    return {**compare(scenario.name, role, reals, sim), "scenario": scenario.path, "time_scale": time_scale,
            "real_runs": [figures(r) for r in reals], "twin": figures(sim),
            "twin_control_plane": {k: v for k, v in sim.get("control_plane", {}).items()
                                   if isinstance(v, (int, float))}}
