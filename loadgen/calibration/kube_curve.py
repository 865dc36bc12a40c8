"""The kube twin next to kube-scheduler's measured cost curve (the comparison step of issue 32).

    python -m loadgen.calibration.kube_curve [--dir results/fidelity-scale/kube] [--profile local]
        [--write-profile fakes/profiles/local.yaml]

For each results/fidelity-scale/kube/curve-<nodes>n.json (written by python -m fakes.kube.costcurve),
the simulated kube-scheduler runs the same workloads on the same fleet and fills the file's "sim":

- light: the light phase's pods (one GPU each, created one by one at its rate): the twin's mean
  serial cycle and nodes examined / scored per cycle, against the real scheduler's algorithm +
  Reserve + Permit and its evaluatedNodes / feasibleNodes;
- burst: the burst's pods created at the rate the real client reached: binds per second;
- scheduler_perf: SchedulingBasic at that node count (the local anchor's workload): pods per second,
  measured as scheduler_perf measures it.

Each figure gets a ratio real / sim. With --write-profile the kube cycle costs of that profile are
first set from the light phases (cycle_costs: measured, with the metric and the command). Nothing
here starts a real component.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loadgen.calibration.anchors import ANCHORS, ROOT, Anchor, _job, figure, simulate
from loadgen.input.profile import Profile
from loadgen.input.profile import load as load_profile
from loadgen.measure.recorder import Recorder


def _paced(pods: int, rate: float) -> list:
    return [_job(i, i / rate, dur=1e6) for i in range(pods)]


def _bind_rate(rec: Recorder) -> float:
    return float(len(rec.admit) / (max(rec.admit) - min(rec.submit)))


def _anchor(name: str, nodes: int, qps: float, jobs, measured) -> Anchor:
    # the workload carries the real client's create times: the twin's client adds no pace of its own
    return Anchor("kube", name, None, "", "fakes/kube/costcurve.py", "held_out",
                  {"fleet.nodes": nodes, "schedulers.kube.api_qps": qps, "schedulers.kube.api_burst": int(qps),
                   "schedulers.kube.client_create_ms": 0.0},
                  jobs, measured, end_s=3600.0)


def ratio(real: float | None, sim: float | None) -> float | None:
    return round(real / sim, 3) if real and sim else None


def twin(curve: dict, profile: Profile) -> dict:
    """The twin's figures for one curve file's workloads."""
    nodes, kw = curve["nodes"], curve["metrics"]["kwok"]
    qps = float(kw.get("scheduler_client_qps", 5000.0))
    light = kw["light"]
    _, target = simulate(_anchor("light", nodes, qps, lambda: _paced(light["pods"], light["rate_per_s"]),
                                 lambda rec: 0.0), profile)
    cp = target.control_plane()
    real_nodes = light.get("nodes_per_cycle", {})
    out = {"profile": profile.name, "light": {
        "serial_cycle_ms": cp["scheduling_cycle_ms_mean"], "nodes_examined_mean": cp["nodes_examined_mean"],
        "nodes_scored_mean": cp["nodes_scored_mean"],
        "ratio_serial_cycle": ratio(light.get("serial_cycle_ms"), cp["scheduling_cycle_ms_mean"]),
        "ratio_nodes_examined": ratio(real_nodes.get("evaluated_mean"), cp["nodes_examined_mean"])}}
    burst = kw.get("burst")
    if burst:
        sim = _anchor("burst", nodes, qps, lambda: _paced(burst["pods"], burst["created_per_s"]), _bind_rate)
        rec, target = simulate(sim, profile)
        out["burst"] = {"bound_per_s": round(_bind_rate(rec), 1),
                        "serial_cycle_ms": target.control_plane()["scheduling_cycle_ms_mean"],
                        "ratio_bound_per_s": ratio(burst["bound_per_s"], _bind_rate(rec))}
    perf = curve["metrics"].get("scheduler_perf")
    if perf and "figure" in perf:
        anchor = next((a for a in ANCHORS if a.profile == profile.name and a.measured_file.endswith(
            f"bench-{perf['benchmark'].rsplit('/', 1)[-1]}.json")), None)
        if anchor is not None:
            rec, target = simulate(anchor, profile)
            sim_fig = anchor.measured(rec)
            real_fig = figure(anchor)[0]
            out["scheduler_perf"] = {"anchor": anchor.name, "role": anchor.role, "pods_per_s": round(sim_fig, 1),
                                     "serial_cycle_ms": target.control_plane()["scheduling_cycle_ms_mean"],
                                     "ratio_pods_per_s": ratio(real_fig, sim_fig),
                                     "ratio_serial_cycle": ratio(perf.get("serial_cycle_ms"),
                                                                 target.control_plane()["scheduling_cycle_ms_mean"])}
    return out


# scheduler_perf's workload at each curve size (fakes/kube/costcurve.py PERF_WORKLOAD)
PERF_WORKLOAD = {500: "500Nodes", 2000: "2000Nodes", 5000: "5000Nodes_10000Pods", 10000: "10000Nodes_10000Pods"}


def fill(directory: Path, profile: Profile) -> list[dict]:
    """Fill every curve file's "sim"; a curve's scheduler_perf figures are the latest
    bench-<workload>.json of its size (python -m fakes.kube.schedperf re-runs them alone)."""
    rows = []
    for path in sorted(directory.glob("curve-*n.json"), key=lambda p: int(p.stem.split("-")[1][:-1])):
        curve = json.loads(path.read_text())
        bench = directory / f"bench-{PERF_WORKLOAD.get(curve['nodes'], '')}.json"
        if bench.exists():
            curve["metrics"]["scheduler_perf"] = json.loads(bench.read_text())
        curve["sim"] = twin(curve, profile)
        path.write_text(json.dumps(curve, indent=2) + "\n")
        rows.append(curve)
    return rows


def table(rows: list[dict]) -> str:
    """nodes | real metric | sim | ratio, one line per figure (what docs/fidelity.md shows)."""
    lines = ["| nodes | figure | real | sim | ratio real/sim |", "|---:|---|---:|---:|---:|"]
    for c in rows:
        n, kw, sim = c["nodes"], c["metrics"]["kwok"], c["sim"]
        light = kw["light"]
        lines.append(f"| {n:,} | KWOK light: serial cycle ms (algorithm + Reserve + Permit) | "
                     f"{light.get('serial_cycle_ms')} | {sim['light']['serial_cycle_ms']} | "
                     f"{sim['light']['ratio_serial_cycle']} |")
        lines.append(f"| {n:,} | KWOK light: nodes evaluated per cycle | "
                     f"{light.get('nodes_per_cycle', {}).get('evaluated_mean')} | "
                     f"{sim['light']['nodes_examined_mean']} | {sim['light']['ratio_nodes_examined']} |")
        if "burst" in sim:
            lines.append(f"| {n:,} | KWOK burst of {kw['burst']['pods']:,} pods: binds/s | "
                         f"{kw['burst']['bound_per_s']} | "
                         f"{sim['burst']['bound_per_s']} | {sim['burst']['ratio_bound_per_s']} |")
        if "scheduler_perf" in sim:
            perf, s = c["metrics"]["scheduler_perf"], sim["scheduler_perf"]
            lines.append(f"| {n:,} | scheduler_perf {perf['benchmark'].rsplit('/', 1)[-1]} ({s['role']}): serial "
                         "cycle ms | "
                         f"{perf.get('serial_cycle_ms')} | {s['serial_cycle_ms']} | {s['ratio_serial_cycle']} |")
            lines.append(f"| {n:,} | scheduler_perf {perf['benchmark'].rsplit('/', 1)[-1]} ({s['role']}): pods/s | "
                         f"{perf['figure']} | {s['pods_per_s']} | {s['ratio_pods_per_s']} |")
    return "\n".join(lines)


def cycle_costs(curves: list[dict]) -> dict[str, tuple[float, str]]:
    """The twin's serial-cycle parameters from the curves' light phases: Filter's mean over the
    nodes it examined, Score's over the nodes it scored (evaluatedNodes = feasibleNodes there: an
    empty fleet), each a ratio of sums over the sizes; the fixed part is the rest of the serial cycle
    (algorithm + Reserve + Permit - Filter - Score), averaged over the sizes."""
    pts = []
    for c in curves:
        light = c["metrics"]["kwok"]["light"]
        m, nodes = light["scheduler_ms"], light.get("nodes_per_cycle", {})
        if light.get("serial_cycle_ms") and nodes.get("evaluated_mean"):
            pts.append((c["nodes"], light["serial_cycle_ms"], m["ep_Filter"], m["ep_Score"],
                        nodes["evaluated_mean"], nodes["feasible_mean"]))
    if not pts:
        return {}
    filt = sum(p[2] for p in pts) / sum(p[4] for p in pts) * 1000.0
    score = sum(p[3] for p in pts) / sum(p[5] for p in pts) * 1000.0
    base = sum(p[1] - p[2] - p[3] for p in pts) / len(pts)
    sizes = ", ".join(f"{p[0]:,}" for p in sorted(pts))
    src = (f"kube-scheduler v1.36.1 on this machine's KWOK stack at {sizes} nodes, light load "
           f"(fakes/kube/costcurve.py, results/fidelity-scale/kube/curve-*n.json): ")
    return {
        "cycle_base_ms": (round(base, 4), src + "scheduler_scheduling_algorithm_duration_seconds + Reserve + Permit "
                          "- Filter - Score (scheduler_framework_extension_point_duration_seconds), mean over the "
                          "sizes"),
        "cycle_per_node_us": (round(filt, 4), src + "scheduler_framework_extension_point_duration_seconds{Filter} "
                              "/ evaluatedNodes, summed over the sizes"),
        "score_per_node_us": (round(score, 4), src + "scheduler_framework_extension_point_duration_seconds{Score} "
                              "/ feasibleNodes (every feasible node is scored), summed over the sizes"),
    }


def client_pace(curves: list[dict], source: str = "results/fidelity-scale/kube/curve-*n.json"
                ) -> dict[str, tuple[float, str]]:
    """The pace of gangstorm's client as the real adapter creates pods: 1 / the creates per second
    it sustained in the bursts, mean over sizes. `curves` are the cost curve's files or its
    `--burst-only` files (burst-<nodes>n-<client>.json), whichever describe the adapters' create path."""
    rates = sorted((c["nodes"], c["metrics"]["kwok"]["burst"]["created_per_s"]) for c in curves
                   if c["metrics"]["kwok"].get("burst", {}).get("created_per_s"))
    if not rates:
        return {}
    ms = sum(1000.0 / r for _, r in rates) / len(rates)
    client = curves[0].get("client", "old")
    path = {"new": "pre-encoded JSON on the client's pool (fakes/kube/poster.py)",
            "old": "the Python kubernetes client"}.get(client, client)
    return {"client_create_ms": (round(ms, 4), (
        f"gangstorm's create path on this machine, {path}: 1 / pods created per second by "
        f"{curves[0]['metrics']['kwok']['burst']['threads']} client threads in the cost curve's create bursts at "
        f"{', '.join(f'{n:,}' for n, _ in rates)} nodes ({', '.join(f'{r:g}/s' for _, r in rates)}; "
        f"fakes/kube/costcurve.py, {source}), mean"))}


def pace_files(directory: Path) -> tuple[list[dict], str]:
    """The bursts of the create path the adapters use (fakes/kube/poster.py): the `--burst-only
    --client new` files when there are any, else the curve files' bursts (the old client's)."""
    shown = directory.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    new = sorted(directory.glob("burst-*n-new.json"))
    if new:
        return [json.loads(p.read_text()) for p in new], f"{shown.as_posix()}/burst-*n-new.json"
    return ([json.loads(p.read_text()) for p in sorted(directory.glob("curve-*n.json"))],
            f"{shown.as_posix()}/curve-*n.json")


def write_profile(path: Path, costs: dict[str, tuple[float, str]], command: str) -> None:
    """Set the kube cycle parameters of a profile file, with their provenance."""
    from loadgen.input.profile import Param, dump
    prof = load_profile(str(path))
    for key, (value, src) in costs.items():
        old = prof.params["kube"].get(key)
        prof.params["kube"][key] = Param(value, old.unit if old else ("ms" if key.endswith("_ms") else "us"),
                                         "measured", src, command)
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "results/fidelity-scale/kube")
    ap.add_argument("--profile", default="local")
    ap.add_argument("--write-profile", type=Path, help="set this profile file's kube cycle costs from the curves "
                                                       "first (the twin then runs on it)")
    args = ap.parse_args(argv)
    if args.write_profile:
        curves = [json.loads(p.read_text()) for p in sorted(args.dir.glob("curve-*n.json"))]
        costs = {**cycle_costs(curves), **client_pace(*pace_files(args.dir))}
        write_profile(args.write_profile, costs, "python -m loadgen.calibration.kube_curve "
                      + " ".join(sys.argv[1:] if argv is None else argv))
        for k, (v, _) in costs.items():
            print(f"kube.{k} = {v}")
        args.profile = str(args.write_profile)
    print(table(fill(args.dir, load_profile(args.profile))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
