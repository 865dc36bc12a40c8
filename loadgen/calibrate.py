"""Calibration: the same trace on a real backend and on its simulated stand-in.

The real run is time-scaled (wall clock); the simulated run replays the identical scaled jobs
on virtual time with the same scenario parameters (the real backend's config is generated from
those same keys), so the ratios say how far the model is from the real scheduler.
"""
from __future__ import annotations

from pathlib import Path

from loadgen.comparative import RunOptions, run
from loadgen.plan import workload_for
from loadgen.timescale import scaled_job
from loadgen.traces import export_jsonl
from loadgen.scenario import Scenario

RATIO_KEYS = (("admission_s", "p50"), ("admission_s", "p99"), ("alloc_util", None))


def _get(s: dict, key, sub):
    v = s.get(key)
    return v.get(sub) if sub else v


def calibrate(scenario: Scenario, name: str, out_dir: Path, time_scale: float) -> dict:
    real = run(scenario, RunOptions(schedulers=[name], backend="real", out_dir=out_dir / "real",
                                    time_scale=time_scale))["schedulers"][name]
    # The simulated twin on the same wall-clock-scaled jobs: divide every time by the scale.
    twin = scenario.with_overrides(**{
        "duration_h": scenario.data["duration_h"] / time_scale, "drain_h": scenario.data["drain_h"] / time_scale,
        "warmup_h": scenario.data["warmup_h"] / time_scale,
        "sample_every_s": max(scenario.data["sample_every_s"] / time_scale, 0.5)})
    jobs, _ = workload_for(scenario)
    scaled = [scaled_job(j, time_scale) for j in jobs]
    trace = out_dir / "scaled-trace.jsonl"
    out_dir.mkdir(parents=True, exist_ok=True)
    export_jsonl(scaled, trace, {"time_scale": time_scale})
    sim = run(twin, RunOptions(schedulers=[name], backend="sim", out_dir=out_dir / "sim",
                               trace=str(trace)))["schedulers"][name]
    ratios = {}
    for key, sub in RATIO_KEYS:
        r, s = _get(real, key, sub), _get(sim, key, sub)
        ratios[f"{key}.{sub}" if sub else key] = None if not r or not s else round(r / s, 4)
    return {"scheduler": name, "nodes": scenario.section("fleet")["nodes"], "time_scale": time_scale,
            "real": {k: real[k] for k in ("admission_s", "alloc_util", "jobs")},
            "sim": {k: sim[k] for k in ("admission_s", "alloc_util", "jobs")},
            "ratios_real_over_sim": ratios}
