"""The openb trace slice on the real Ray backend and on its simulated twin: allocation at slice
granularity and admission p50/p99, side by side.

    python tools/ray_gpushare_twin.py --out results/gpushare/ray/<name> [--pods 560] [--nodes 4]
        [--time-scale 600] [--ray-nodes fakelet|raylet] [--profile local]

1. The slice: tests/data/traces/openb_pod_list_default-first1000.csv read as a fleet that shares
   GPUs by fraction does (gpu_milli < 1000 -> share milli:N, loadgen/input/traces.py), cut to its
   last --pods GPU pods (the first ~470 pods are spread over 118 days, the rest over two: the
   dense part is what a short run can replay), submit times shifted to start at 0; written as
   trace.jsonl beside scenario.yaml (one fraction pool of --nodes x 8 GPUs).
2. `gangstorm run --backend real --schedulers ray` of it (loadgen/calibration/twin.py real_run:
   a real GCS with fakelets or raylets; every bundle {"GPU": fraction}), then the twin: the
   simulated Ray on the same wall-clock plan (twin.wall_plan) with --profile.
3. From each run's per-job admitted and finished times (real: jobs.csv), the same arithmetic for both: allocation
   ratio = GPU-seconds held by admitted slices (a slice counts its fraction, a whole-GPU pod its
   GPUs) over the measurement window / (GPUs x window), and admission p50/p99 over the admitted
   pods (wall seconds); also the count admitted and never admitted, and the twin's own
   summary.gpu_sharing (time-averaged over its samples) for reference. On fakelets the real run
   also samples where the slices sit in the fakelets' books (timeseries.csv cp_slice_gpus_held,
   cp_gpu_fill_max): the allocation ratio read back at slice granularity.
Writes compare.json and compare.md in --out (with the command line and /proc/loadavg).
"""
from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loadgen.calibration.twin import real_run, wall_plan  # noqa: E402
from loadgen.drive.comparative import RunOptions, run_one  # noqa: E402
from loadgen.input.overrides import load_with_overrides  # noqa: E402
from loadgen.input.plan import plan_run  # noqa: E402
from loadgen.input.traces import export_jsonl, import_openb  # noqa: E402
from loadgen.model.gpushare import MILLI, parse_share  # noqa: E402

SLICE = REPO / "tests" / "data" / "traces" / "openb_pod_list_default-first1000.csv"


def write_slice(out: Path, pods: int, nodes: int, ray_nodes: str) -> Path:
    jobs, _ = import_openb(SLICE, gpus_per_node=8, cpus_per_node=96, shares=True)
    jobs = jobs[-pods:]
    t0 = jobs[0].submit_s
    from dataclasses import replace
    jobs = [replace(j, submit_s=round(j.submit_s - t0, 3)) for j in jobs]
    export_jsonl(jobs, out / "trace.jsonl", {"source": str(SLICE.relative_to(REPO)), "last_gpu_pods": pods})
    scenario = {
        "name": "ray-gpushare-openb", "seed": 1, "sample_every_s": 600, "warmup_h": 0, "drain_h": 2,
        "fleet": {"nodes": nodes, "gpus_per_node": 8,
                  "pools": {"frac": {"fraction": 1.0, "gpu_model": "t4", "sharing": "fraction"}}},
        "schedulers_enabled": ["ray"],
        "schedulers": {"ray": {"nodes": ray_nodes, "single_node_strategy": "PACK"}},
        "workload": {"trace": str(out / "trace.jsonl")},
    }
    path = out / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def gpus_of(job) -> float:
    share = parse_share(job.share)
    return job.members * (share.amount / MILLI if share.kind == "milli" else job.gpus_per_member)


def figures(jobs, admitted: dict[int, float], finished: dict[int, float], window: tuple[float, float],
            capacity: int) -> dict:
    a, b = window
    held = 0.0
    for j in jobs:
        t = admitted.get(j.id)
        if t is None or np.isnan(t):
            continue
        end = finished.get(j.id)
        end = b if end is None or np.isnan(end) else end
        held += gpus_of(j) * max(0.0, min(end, b) - max(t, a))
    lat = np.array([admitted[j.id] - j.submit_s for j in jobs
                    if admitted.get(j.id) is not None and not np.isnan(admitted[j.id])])
    return {"pods": len(jobs), "admitted": int(len(lat)), "never_admitted": len(jobs) - int(len(lat)),
            "allocation_ratio": round(held / (capacity * (b - a)), 4),
            "admission_s_p50": round(float(np.percentile(lat, 50)), 4) if len(lat) else None,
            "admission_s_p99": round(float(np.percentile(lat, 99)), 4) if len(lat) else None}


def real_times(run_dir: Path) -> tuple[dict[int, float], dict[int, float]]:
    adm, fin = {}, {}
    with open(run_dir / "jobs.csv") as f:
        for r in csv.DictReader(f):
            i = int(r["job_id"])
            adm[i] = float(r["admitted_s"]) if r["admitted_s"] else float("nan")
            fin[i] = float(r["finished_s"]) if r["finished_s"] else float("nan")
    return adm, fin


def read_back_ratio(run_dir: Path, window: tuple[float, float], capacity: int) -> float | None:
    """The mean over the window's samples of the GPU the fakelets' books hold in committed bundles
    (timeseries.csv cp_slice_gpus_held, fakes/ray/share.py slice_figures) / capacity."""
    vals = []
    with open(run_dir / "timeseries.csv") as f:
        for r in csv.DictReader(f):
            if r.get("cp_slice_gpus_held") and window[0] <= float(r["t"]) <= window[1]:
                vals.append(float(r["cp_slice_gpus_held"]))
    return round(sum(vals) / len(vals) / capacity, 4) if vals else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pods", type=int, default=560)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--time-scale", type=float, default=600.0)
    p.add_argument("--ray-nodes", choices=("fakelet", "raylet"), default="fakelet")
    p.add_argument("--profile", default="local")
    args = p.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    path = write_slice(out, args.pods, args.nodes, args.ray_nodes)
    scenario = load_with_overrides(str(path), profile=args.profile)
    plan = plan_run(scenario)
    wplan = wall_plan(scenario, args.time_scale)
    capacity = args.nodes * 8

    t0 = time.monotonic()
    real_summary = real_run(scenario, "ray", out / "real", args.time_scale)
    real_wall = time.monotonic() - t0
    adm, fin = real_times(out / "real")
    window = wplan.window
    real = figures(wplan.jobs, adm, fin, window, capacity)
    real["allocation_ratio_read_back"] = read_back_ratio(out / "real", window, capacity)

    from loadgen.input.scenario import from_dict
    sc = from_dict(scenario.raw, scenario.path, scenario.profile,
                   overrides={"sample_every_s": max(scenario.data["sample_every_s"] / args.time_scale, 0.5)})
    sim_summary, rec = run_one(sc, "ray", RunOptions(schedulers=["ray"], backend="sim", jobs_csv=False), wplan, None)
    sim = figures(wplan.jobs, {j.id: float(rec.admit[rec.index[j.id]]) for j in wplan.jobs},
                  {j.id: float(rec.finish[rec.index[j.id]]) for j in wplan.jobs}, window, capacity)
    result = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "slice": {"source": str(SLICE.relative_to(REPO)), "gpu_pods": len(plan.jobs),
                  "fractional": sum(1 for j in plan.jobs if j.share), "span_s": plan.horizon_s},
        "fleet": {"nodes": args.nodes, "gpus": capacity, "pool": "fraction (t4)"},
        "time_scale": args.time_scale, "ray_nodes": args.ray_nodes, "profile": args.profile,
        "window_wall_s": [round(window[0], 3), round(window[1], 3)],
        "load_avg": {"start": load0, "end": Path("/proc/loadavg").read_text().split()[:3]},
        "real_wall_s": round(real_wall, 1),
        "real": real, "sim": sim,
        "ratio_real_over_sim": {k: (round(real[k] / sim[k], 3) if real[k] and sim[k] else None)
                                for k in ("allocation_ratio", "admission_s_p50", "admission_s_p99")},
        "sim_summary_gpu_sharing": sim_summary.get("gpu_sharing"),
        "real_summary_admission_s": real_summary.get("schedulers", {}).get("ray", {}).get("admission_s")
        if isinstance(real_summary.get("schedulers"), dict) else None,
    }
    (out / "compare.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = [("pods", "pods"), ("admitted", "admitted"), ("never admitted", "never_admitted"),
            ("allocation ratio (slice GPU-s / GPU-s)", "allocation_ratio"),
            ("allocation ratio read back from the fakelets' books (sample mean)", "allocation_ratio_read_back"),
            ("admission p50 (wall s)", "admission_s_p50"), ("admission p99 (wall s)", "admission_s_p99")]
    md = [f"# openb slice on Ray: real ({args.ray_nodes}s on the real GCS) vs the simulated twin", "",
          f"`{result['command']}`", "",
          f"{len(plan.jobs)} GPU pods ({result['slice']['fractional']} fractional) of `{result['slice']['source']}`, "
          f"{args.nodes} nodes x 8 GPUs (one fraction pool), time scale {args.time_scale:g}, twin profile "
          f"{args.profile}; load average {' '.join(load0)} at start.", "",
          "| | real | sim | real / sim |", "|---|---|---|---|"]
    for label, key in rows:
        ratio = result["ratio_real_over_sim"].get(key)
        md.append(f"| {label} | {real.get(key)} | {sim.get(key, '')} | {'' if ratio is None else ratio} |")
    (out / "compare.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
