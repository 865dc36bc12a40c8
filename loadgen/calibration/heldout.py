"""A held-out case at scale: one real run and its twin, compared on admission p50 and p99.

    python -m loadgen.calibration.heldout burst OUT.jsonl [--jobs 400] [--seconds 1] [--hold-s 30] [--seed 7]
    python -m loadgen.calibration.heldout run SCENARIO --scheduler ray --nodes 2000 [--time-scale 1]
        [--profile local] [--repeat 1] --out results/fidelity-scale/ray/heldout-2000n

`burst` writes a JSONL trace: --jobs gangs of the bimodal calibration mix (1-member jobs of 1, 2, 4
or 8 GPUs and 2 x 8; 4, 8 and 16 x 8-GPU gangs, 15%) submitted evenly within --seconds and held
--hold-s, so that on a large fleet every gang fits and admission is the scheduler's own queue: the
k-th gang waits for the ones before it.

`run` is `gangstorm run --backend real` of the scenario (loadgen/calibration/twin.py real_run; a
complete run already in --out is reused) and its twin, the simulated scheduler on the same
wall-clock plan with --profile (for Ray on fakelets, --fakelet-costs swaps in the fakelet fleet's
own answer costs, measured by the cost curve), then the fidelity row (real/sim admission p50, p99, allocation
utilization; loadgen/calibration/fidelity.py). Nothing of this run is fitted: it is held out.
Writes heldout.json: {"scheduler", "nodes", "command", "started", "load_avg", "metrics" (the real
run's admission and control-plane figures), "sim" (the twin's), "row"}.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.calibration.fidelity import real_stats, row
from loadgen.calibration.twin import real_run, twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import load as load_profile
from loadgen.input.traces import export_jsonl
from loadgen.model.job import Job

# (members, gpus per member, weight): scenarios/calibrate-steady.yaml's mix, with 16-node gangs
SMALL = [(1, 1, 0.35), (1, 2, 0.15), (1, 4, 0.15), (1, 8, 0.20), (2, 8, 0.15)]
LARGE = [(4, 8, 0.6), (8, 8, 0.3), (16, 8, 0.1)]
LARGE_SHARE = 0.15


def burst(jobs: int, seconds: float, hold_s: float, seed: int) -> list[Job]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(jobs):
        large = rng.random() < LARGE_SHARE
        shapes = LARGE if large else SMALL
        k = rng.choice(len(shapes), p=np.array([w for *_, w in shapes]) / sum(w for *_, w in shapes))
        members, gpus, _ = shapes[k]
        out.append(Job(id=i, tenant=f"t{i % 4}", queue=f"q-t{i % 4}", cls="large" if large else "small",
                       members=members, gpus_per_member=gpus, duration_s=hold_s, submit_s=round(i * seconds / jobs, 6),
                       min_available=members, cpus_per_member=gpus * 12))
    return out


def compare(scenario: str, scheduler: str, nodes: int, time_scale: float, profile: str, out: Path,
            repeat: int = 1, fakelet_costs: Path | None = None) -> dict[str, Any]:
    sc = load_with_overrides(scenario, profile=profile, nodes=nodes)
    results = []
    for k in range(repeat):
        d = out / f"real-{k + 1}"
        summary = d / "summary.json"
        if not (summary.exists() and json.loads(summary.read_text()).get("complete")):
            real_run(sc, scheduler, d, time_scale)
        results.append(json.loads(summary.read_text())["schedulers"][scheduler])
    prof = load_profile(profile)
    if fakelet_costs is not None:            # Ray on fakelets: the fleet's own answer costs, the GCS's the profile's
        from loadgen.calibration.raycurve import fakelet_profile
        prof = fakelet_profile(prof, fakelet_costs)
    sim = twin(sc, scheduler, time_scale, prof)
    r = row(f"{Path(scenario).stem}-{nodes}n", "held_out", real_stats(results), sim)
    keep = ("admission_s", "alloc_util", "jobs")
    return {"metrics": {"runs": [{k: res.get(k) for k in keep} | {"control_plane": _cp(res)} for res in results]},
            "sim": {k: sim.get(k) for k in keep} | {"control_plane": _cp(sim)}, "row": r,
            "twin_profile": {f"{s}.{k}": p.value for s in (scheduler,) for k, p in prof.params.get(s, {}).items()}}


def _cp(result: dict) -> dict:
    cp = result.get("control_plane", {})
    return {k: v for k, v in cp.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m loadgen.calibration.heldout", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("burst", help="write a burst trace")
    b.add_argument("output", type=Path)
    b.add_argument("--jobs", type=int, default=400)
    b.add_argument("--seconds", type=float, default=1.0)
    b.add_argument("--hold-s", type=float, default=30.0)
    b.add_argument("--seed", type=int, default=7)
    r = sub.add_parser("run", help="a real run and its twin")
    r.add_argument("scenario")
    r.add_argument("--scheduler", default="ray")
    r.add_argument("--nodes", type=int, required=True)
    r.add_argument("--time-scale", type=float, default=1.0)
    r.add_argument("--profile", default="local")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--fakelet-costs", type=Path, default=None,
                   help="Ray on fakelets: the twin takes the fakelet fleet's own per-group and per-bundle costs "
                        "from the cost-curve folder (loadgen/calibration/raycurve.py fakelet_costs)")
    a = p.parse_args(argv)
    command = "python -m loadgen.calibration.heldout " + " ".join(shlex.quote(x) for x in argv)
    if a.cmd == "burst":
        jobs = burst(a.jobs, a.seconds, a.hold_s, a.seed)
        export_jsonl(jobs, a.output, {"generated_by": command, "jobs": a.jobs, "seconds": a.seconds,
                                      "hold_s": a.hold_s, "seed": a.seed})
        print(f"wrote {len(jobs)} jobs ({sum(j.gpus for j in jobs)} GPUs) to {a.output}")
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"scheduler": a.scheduler, "nodes": a.nodes, "command": command,
                           "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                           "load_avg": {"before": [round(x, 2) for x in os.getloadavg()]},
                           "scenario": a.scenario, "time_scale": a.time_scale, "profile": a.profile}
    doc.update(compare(a.scenario, a.scheduler, a.nodes, a.time_scale, a.profile, a.out, a.repeat, a.fakelet_costs))
    doc["load_avg"]["after"] = [round(x, 2) for x in os.getloadavg()]
    (a.out / "heldout.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    rw = doc["row"]
    print(f"{rw['case']}: real p50 {rw['real']['p50']:.4g} s / sim {rw['sim']['p50']:.4g} (ratio {rw['p50_ratio']}), "
          f"real p99 {rw['real']['p99']:.4g} s / sim {rw['sim']['p99']:.4g} (ratio {rw['p99_ratio']}), "
          f"util diff {rw['util_diff_pp']} pp, within goal: {rw['within_goal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
