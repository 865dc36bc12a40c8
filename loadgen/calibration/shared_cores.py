"""The machine's cores shared by kube-scheduler's loop and the rest of the control plane (fakes/sim/cores.py).

    python -m loadgen.calibration.shared_cores [--fit 500Nodes,2000Nodes] [--write-profile fakes/profiles/local.yaml]

Two readings, both of this machine class:

- scheduler_perf (fakes/kube/schedperf.py) keeps the machine full while its measured pods bind
  (1.94-1.95 of 2 cores in every workload), so each pod costs the cores / pods-per-second it
  reaches. That CPU per pod, against the twin's quiet serial cycle for the same workload, is a
  line: the benchmark's apiserver, etcd, client and garbage collector per pod (the intercept, its
  `pod_cpu_ms`), plus the cores a cycle uses (the slope, kube.cycle_cores). Fitted on the `--fit`
  workloads; the other workloads' throughputs are held out (`gangstorm profile anchors local`).
- The cost curve's create bursts on the KWOK stack (burst-<n>n-new.json) give that stack's own
  cost per pod outside the scheduler: kube-apiserver, etcd and the generator's cores while creating,
  over the binds per second (control_plane.pod_cpu_ms), and the stack's load with nothing to
  schedule (control_plane.idle_cores).

It writes results/fidelity-scale/kube/shared-cores.json (what the scheduler_perf anchors' twin
runs on) and, with --write-profile, the four parameters with their provenance.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from loadgen.calibration.anchors import ANCHORS, ROOT, SHARED_CORES, simulate
from loadgen.input.profile import Param, Profile, dump
from loadgen.input.profile import load as load_profile

KUBE_DIR = ROOT / "results/fidelity-scale/kube"
RESULT = Path(SHARED_CORES).name
FIT = ("500Nodes", "2000Nodes")
OTHERS = ("kube-apiserver", "etcd", "generator")      # what works on a pod besides the scheduler


def window_points(directory: Path, workloads: list[str]) -> dict[str, dict]:
    """Per workload: the median over its runs of the CPU a measured pod cost and the cores used."""
    out = {}
    for w in workloads:
        data = json.loads((directory / f"bench-{w}.json").read_text())
        wins = [r for r in data.get("runs_window", []) if r]
        if not wins:
            raise ValueError(f"{directory / f'bench-{w}.json'}: runs_window: no CPU readings while the measured "
                             "pods bound; rerun python -m fakes.kube.schedperf --workloads " + w)
        out[w] = {"cpu_ms_per_pod": statistics.median(r["cpu_ms_per_pod"] for r in wins),
                  "benchmark_cores": statistics.median(r["benchmark_cores"] for r in wins),
                  "runs": len(wins)}
    return out


def quiet_cycle_ms(workload: str, profile: Profile) -> float:
    """The twin's serial cycle for a scheduler_perf workload with nothing else on the machine."""
    anchor = next((a for a in ANCHORS if a.profile == "local" and a.measured_file.endswith(f"bench-{workload}.json")),
                  None)
    if anchor is None:
        raise ValueError(f"--fit: {workload!r} is not a scheduler_perf workload of the local anchors")
    quiet = dataclasses.replace(anchor, remeasured=None, scenario={**anchor.scenario, "control_plane.cores": 0.0})
    return simulate(quiet, profile)[1].control_plane()["scheduling_cycle_ms_mean"]


def fit_line(cycles: list[float], cpu: list[float]) -> tuple[float, float]:
    """Least squares cpu = intercept + slope x cycle: (slope = cycle_cores, intercept = pod_cpu_ms)."""
    if len(cycles) < 2 or max(cycles) - min(cycles) < 1e-9:
        raise ValueError("shared cores: the fit needs workloads whose twin cycles differ")
    slope, intercept = np.polyfit(np.asarray(cycles, float), np.asarray(cpu, float), 1)
    return float(slope), float(intercept)


def burst_files(directory: Path) -> list[Path]:
    """The cost curve's create bursts of the adapters' path, smallest fleet first."""
    return sorted(directory.glob("burst-*n-new.json"), key=lambda p: int(p.name.split("-")[1].removesuffix("n")))


def kwok_stack(directory: Path) -> dict:
    """The KWOK stack's CPU per pod outside the scheduler and its idle load, median over the bursts."""
    files, per_pod, idle = burst_files(directory), [], []
    for path in files:
        kw = json.loads(path.read_text())["metrics"]["kwok"]
        cores, rate = kw["burst"].get("cores_while_creating", {}), kw["burst"].get("bound_per_s")
        if rate and all(k in cores for k in OTHERS):
            per_pod.append(sum(cores[k] for k in OTHERS) / rate * 1000.0)
        if "idle_cores" in kw:
            idle.append(kw["idle_cores"]["machine"] - kw["idle_cores"].get("kube-scheduler", 0.0))
    if not per_pod:
        raise ValueError(f"{directory}/burst-*n-new.json: no burst with cores_while_creating; run python -m "
                         "fakes.kube.costcurve --sizes 500 --burst-only --client new")
    return {"pod_cpu_ms": round(statistics.median(per_pod), 3), "idle_cores": round(statistics.median(idle), 3),
            "per_burst_pod_cpu_ms": [round(x, 3) for x in per_pod], "per_burst_idle_cores": [round(x, 3) for x in idle],
            "files": [p.name for p in files]}


def burst_check(directory: Path, profile: Profile) -> list[dict]:
    """The KWOK stack's create bursts (new client) against their twin, with and without the shared
    cores: the serial cycle the real scheduler measured under the burst (its quiet cost at light
    load is the cost curve's) and the twin's. Nothing here is fitted to these bursts except the
    stack's CPU per pod, which the profile takes from them."""
    from loadgen.calibration.kube_curve import _anchor, _bind_rate, _paced
    rows = []
    for path in burst_files(directory):
        data = json.loads(path.read_text())
        b, nodes = data["metrics"]["kwok"]["burst"], data["nodes"]
        row = {"nodes": nodes, "pods": b["pods"], "created_per_s": b["created_per_s"],
               "real_cycle_ms": b["serial_cycle_ms"], "real_bound_per_s": b["bound_per_s"]}
        for label, over in (("twin", {}), ("twin_quiet", {"control_plane.cores": 0.0})):
            anchor = _anchor("burst", nodes, 5000.0, lambda b=b: _paced(b["pods"], b["created_per_s"]), _bind_rate)
            anchor = dataclasses.replace(anchor, scenario={**anchor.scenario, **over})
            rec, target = simulate(anchor, profile)
            row[f"{label}_cycle_ms"] = target.control_plane()["scheduling_cycle_ms_mean"]
            row[f"{label}_bound_per_s"] = round(_bind_rate(rec), 1)
        row["ratio_cycle"] = round(row["real_cycle_ms"] / row["twin_cycle_ms"], 3)
        row["ratio_cycle_quiet"] = round(row["real_cycle_ms"] / row["twin_quiet_cycle_ms"], 3)
        row["others_idle_cores"] = round(data["metrics"]["kwok"]["idle_cores"]["machine"], 3)
        rows.append(row)
    return rows


def calibrate(directory: Path, profile: Profile, fit: list[str], cores: int) -> dict:
    points = window_points(directory, fit)
    cycles = [quiet_cycle_ms(w, profile) for w in fit]
    slope, intercept = fit_line(cycles, [points[w]["cpu_ms_per_pod"] for w in fit])
    for w, c in zip(fit, cycles, strict=True):
        points[w]["twin_quiet_cycle_ms"] = c
    return {"cores": cores, "cycle_cores": round(slope, 4), "inprocess_pod_cpu_ms": round(intercept, 4),
            "fit": points, "kwok": kwok_stack(directory), "profile": profile.name}


def write_profile(path: Path, result: dict, command: str) -> None:
    prof = load_profile(str(path))
    fit = ", ".join(f"{w} {p['cpu_ms_per_pod']:.2f} ms a pod against a quiet cycle of {p['twin_quiet_cycle_ms']:.3f}"
                    for w, p in result["fit"].items())
    bench = ("kubernetes v1.36.1 scheduler_perf SchedulingBasic on this machine (python -m fakes.kube.schedperf; "
             "results/fidelity-scale/kube/bench-*.json runs_window): CPU the benchmark spent per pod while its "
             "measured pods bound, the machine full")
    kw = result["kwok"]
    stack = ("this machine's KWOK stack, the cost curve's create bursts (results/fidelity-scale/kube/"
             f"{', '.join(kw['files'])})")
    prof.params.setdefault("kube", {})["cycle_cores"] = Param(
        result["cycle_cores"], "cores", "fitted",
        f"{bench}, fitted as a line against the twin's quiet serial cycle ({fit}): its slope", command)
    cp = prof.params.setdefault("control_plane", {})
    cp["cores"] = Param(float(result["cores"]), "cores", "measured",
                        "this machine's online CPUs (os.cpu_count) at calibration", command)
    cp["idle_cores"] = Param(kw["idle_cores"], "cores", "measured",
                             f"{stack}: the machine's busy cores with the stack up and nothing to schedule, less "
                             f"kube-scheduler's; median of {kw['per_burst_idle_cores']}", command)
    cp["pod_cpu_ms"] = Param(kw["pod_cpu_ms"], "ms", "measured",
                             f"{stack}: cores of {', '.join(OTHERS)} while creating / pods bound per second; "
                             f"median of {kw['per_burst_pod_cpu_ms']} (KWOK's own share not recorded)", command)
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=KUBE_DIR)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--fit", default=",".join(FIT), help="scheduler_perf workloads the line is fitted on")
    ap.add_argument("--write-profile", type=Path, help="set kube.cycle_cores and control_plane.cores, idle_cores, "
                                                       "pod_cpu_ms in this profile file")
    args = ap.parse_args(argv)
    command = "python -m loadgen.calibration.shared_cores " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        result = calibrate(args.dir, load_profile(args.profile), [w for w in args.fit.split(",") if w],
                           os.cpu_count() or 1)
    except (OSError, ValueError, KeyError) as exc:
        print(f"shared_cores: {exc}", file=sys.stderr)
        return 2
    result["command"] = command
    (args.dir / RESULT).write_text(json.dumps(result, indent=2) + "\n")
    if args.write_profile:
        write_profile(args.write_profile, result, command)
        result["bursts"] = burst_check(args.dir, load_profile(str(args.write_profile)))
        (args.dir / RESULT).write_text(json.dumps(result, indent=2) + "\n")
        for r in result["bursts"]:
            print(f"KWOK burst {r['nodes']:>6,} nodes: serial cycle real {r['real_cycle_ms']:.2f} ms, twin "
                  f"{r['twin_cycle_ms']:.2f} (ratio {r['ratio_cycle']}), twin on a quiet machine "
                  f"{r['twin_quiet_cycle_ms']:.2f} (ratio {r['ratio_cycle_quiet']})")
    print(f"kube.cycle_cores = {result['cycle_cores']}; scheduler_perf's own CPU per pod = "
          f"{result['inprocess_pod_cpu_ms']} ms; KWOK stack: control_plane.pod_cpu_ms = "
          f"{result['kwok']['pod_cpu_ms']}, "
          f"idle_cores = {result['kwok']['idle_cores']}; cores = {result['cores']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
