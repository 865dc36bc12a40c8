"""Volcano's cost curve against its twin: the twin's session costs measured from the curve, and the
twin's value next to every measured figure (the comparison step of issue 32).

    python -m loadgen.calibration.volcano_curve [--dir results/fidelity-scale/volcano] [--profile local]
        [--hold-out 5000] [--write-profile fakes/profiles/local.yaml] [--markdown]

The curve files (python -m fakes.volcano.costcurve, one per fleet size) hold vc-scheduler's own
histograms differenced per phase: sessions with no job (idle), sessions placing a light stream of
one-pod jobs on the empty fleet (light), and sessions with P one-pod jobs pending on a full fleet
(pending, two or more P). The twin's session (fakes/volcano/sim.py) is

    session = session_base_ms + session_per_node_us x nodes + session_per_task_us x pending tasks
              + allocate's walk (reject_per_node_us x nodes per task that fits nowhere;
                feasible_per_node_us x numNodesToFind per task placed on an empty fleet)

and each term comes from one phase, least squares with relative error over the fitted sizes:

- session_base_ms, session_per_node_us: the idle sessions' volcano_e2e_scheduling_latency_milliseconds
  against nodes;
- session_per_task_us, reject_per_node_us: what P pending tasks add to the idle session's e2e
  latency, P x (per task + nodes x per node), over every (size, P): what does not grow with nodes
  is per task, what grows is the walk (and whatever else an unplaceable task costs per node, such
  as gang's fit-error message at close);
- feasible_per_node_us: the light phase's allocate latency
  (volcano_action_scheduling_latency_milliseconds{action="allocate"}) summed over its sessions,
  less the idle sessions' allocate, per job placed, over numNodesToFind(nodes).

The sizes in --hold-out are left out of the fit, so their rows are predictions. The twin then runs
each phase's workload on the profile and its figures fill each curve file's "sim" block. Nothing
here starts a real component.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from loadgen.calibration.anchors import ROOT, Anchor, _job, simulate
from loadgen.calibration.slurm_curve import nnls
from loadgen.input.profile import Param, Profile, dump
from loadgen.input.profile import load as load_profile
from loadgen.model.job import Job

PARAMS = ("session_base_ms", "session_per_node_us", "session_per_task_us", "reject_per_node_us",
          "feasible_per_node_us")
# what the cost curve runs Volcano with (fakes/volcano/costcurve.py CONFIG)
CURVE = {"schedulers.volcano.api_qps": 1000.0, "schedulers.volcano.api_burst": 1000,
         "schedulers.volcano.controller_qps": 1000.0, "schedulers.volcano.controller_burst": 1000,
         "schedulers.volcano.schedule_period_s": 1.0}
FILL_AT, SETTLE_S, WINDOW_S = 600.0, 60.0, 60.0     # twin: fill at 0, pending jobs at FILL_AT


def to_find(nodes: int) -> int:
    """Volcano's util.CalculateNumOfFeasibleNodesToFind at its defaults (kube-scheduler's formula)."""
    if nodes <= 100:
        return nodes
    return max(nodes * max(50 - nodes // 125, 5) // 100, 100)


def load_curves(folder: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) | {"_path": str(p)} for p in folder.glob("curve-*n.json")),
                  key=lambda d: d["nodes"])


def load_running(folder: Path) -> list[dict]:
    """The running phase's files (python -m fakes.volcano.costcurve --running), one per fleet size."""
    return sorted((json.loads(p.read_text()) | {"_path": str(p)} for p in folder.glob("running-*n.json")),
                  key=lambda d: d["nodes"])


def running_points(r: dict) -> list[tuple[int, int, float]]:
    """(nodes, running tasks, e2e ms more than the same size's idle session) per count measured."""
    m = r["metrics"]
    idle = _ps(m.get("idle")).get("e2e_ms")
    if idle is None:
        return []
    return [(r["nodes"], q["running_tasks"], _ps(q)["e2e_ms"] - idle) for q in m.get("running") or []
            if q.get("running_tasks") and _ps(q).get("e2e_ms") is not None]


def fit_running(files: list[dict]) -> tuple[float | None, list[int]]:
    """session_per_running_task_us: what R running tasks add to an idle session, R x this; least
    squares with relative error over every (size, R)."""
    pts = [pt for r in files for pt in running_points(r) if pt[2] > 0]
    if not pts:
        return None, []
    x = np.array([[t] for _, t, _ in pts]) / np.array([y for _, _, y in pts])[:, None]
    (per_task,) = nnls(x, np.ones(len(pts)))
    return round(float(per_task) * 1000.0, 6), sorted({n for n, _, _ in pts})


def running_table(files: list[dict], profile: Profile) -> str:
    """The running phase: real e2e against the twin's session with the same tasks running."""
    cfg = profile.params["volcano"]
    per = cfg["session_per_running_task_us"].value if "session_per_running_task_us" in cfg else 0.0
    lines = ["| nodes | figure (vc-scheduler metric) | real ms | twin ms | real / twin |", "|---:|---|---:|---:|---:|"]
    for r in files:
        n, m = r["nodes"], r["metrics"]
        idle = cfg["session_base_ms"].value + cfg["session_per_node_us"].value * n / 1000.0
        for q in [{"running_tasks": 0, "per_session": _ps(m.get("idle"))}] + list(m.get("running") or []):
            real, tasks = _ps(q).get("e2e_ms"), q["running_tasks"]
            sim = round(idle + per * tasks / 1000.0, 4)
            what = f"session, {tasks:,} one-pod jobs running, nothing to place (e2e)" if tasks else \
                "idle session (e2e scheduling latency)"
            lines.append(f"| {n:,} | {what} | {_ms(real)} | {_ms(sim)} | {ratio(real, sim)} |")
    return "\n".join(lines)


def _ps(phase: dict | None) -> dict:
    return (phase or {}).get("per_session") or {}


def _alloc_sum(ps: dict) -> float:
    return ps.get("action_allocate_ms", 0.0) * ps.get("action_allocate_n", 0)


# --- the measured points ----------------------------------------------------------------------------
def points(c: dict) -> dict:
    """The figures one curve file gives the fit and the table."""
    m, n = c["metrics"], c["nodes"]
    idle = _ps(m.get("idle"))
    out: dict = {"nodes": n}
    if idle.get("e2e_ms") is not None:
        out["idle_ms"] = idle["e2e_ms"]
    light = m.get("light")
    if light and _ps(light).get("action_allocate_n") and light.get("bound"):
        ps = _ps(light)
        extra = _alloc_sum(ps) - idle.get("action_allocate_ms", 0.0) * ps["action_allocate_n"]
        out["place_ms"] = round(extra / light["bound"], 4)          # allocate per job placed
    pend = [p for p in m.get("pending") or [] if _ps(p).get("e2e_ms") is not None]
    out["pending"] = [{"tasks": p["pending_tasks"], "e2e_ms": _ps(p)["e2e_ms"],
                       "allocate_ms": _ps(p).get("action_allocate_ms"), "sessions": _ps(p)["sessions"]}
                      for p in pend]
    return out


def fit(curves: list[dict], hold_out: set[int]) -> tuple[dict[str, float], dict[str, list[int]]]:
    """The five session parameters (ms or us, as the profile holds them) and the sizes each came from."""
    pts = [points(c) for c in curves if c["nodes"] not in hold_out]
    vals: dict[str, float] = {}
    used: dict[str, list[int]] = {}
    idle = [(p["nodes"], p["idle_ms"]) for p in pts if p.get("idle_ms")]
    if idle:
        x = np.array([[1.0, n] for n, _ in idle]) / np.array([y for _, y in idle])[:, None]
        base, per_node = nnls(x, np.ones(len(idle)))
        vals["session_base_ms"], vals["session_per_node_us"] = float(base), float(per_node) * 1000.0
        used["idle"] = [n for n, _ in idle]
    extra = [(p["nodes"], q["tasks"], q["e2e_ms"] - p["idle_ms"]) for p in pts if p.get("idle_ms") is not None
             for q in p["pending"] if q["tasks"] and q["e2e_ms"] > p["idle_ms"]]
    if extra:                                         # what P pending tasks add: P x (per task + nodes x reject)
        x = np.array([[t, t * n] for n, t, _ in extra]) / np.array([y for _, _, y in extra])[:, None]
        per_task, reject = nnls(x, np.ones(len(extra)))
        vals["session_per_task_us"], vals["reject_per_node_us"] = float(per_task) * 1000.0, float(reject) * 1000.0
        used["pending"] = sorted({n for n, _, _ in extra})
    place = [(p["nodes"], p["place_ms"]) for p in pts if p.get("place_ms") is not None]
    if place:
        vals["feasible_per_node_us"] = max(0.0, sum(y for _, y in place) / sum(to_find(n) for n, _ in place)
                                           * 1000.0)
        used["light"] = [n for n, _ in place]
    return {k: round(v, 6) for k, v in vals.items()}, used


# --- the twin on the same workloads --------------------------------------------------------------------
def _anchor(name: str, nodes: int, jobs, end_s: float, **extra) -> Anchor:
    return Anchor("volcano", name, None, "", "fakes/volcano/costcurve.py", "held_out",
                  {"fleet.nodes": nodes, **CURVE, **extra}, jobs, lambda rec: 0.0, end_s=end_s)


def _one_pod(i: int, t: float, tenant: str = "curve", gpus: int = 1) -> Job:
    return replace(_job(i, t, gpus=gpus), tenant=tenant, queue=tenant)


def twin(c: dict, profile: Profile) -> dict:
    """The twin's figures for one curve file's phases."""
    n, m = c["nodes"], c["metrics"]
    out: dict = {"profile": profile.name}
    cfg = profile.params["volcano"]
    out["idle"] = {"session_ms": round(cfg["session_base_ms"].value + cfg["session_per_node_us"].value * n / 1000.0,
                                       4)}
    light = m.get("light")
    if light:
        jobs = light["jobs"]
        _, t = simulate(_anchor("light", n, lambda: [_one_pod(i, i / light["rate_per_s"]) for i in range(jobs)],
                                jobs / light["rate_per_s"] + 120.0), profile)
        placed = t.control_plane().get("walks_placed", 0)
        walk = sum(w for _, _, w in t.session_log)
        out["light"] = {"place_ms": round(walk / placed, 4) if placed else None}
    out["pending"] = []
    for p in m.get("pending") or []:
        tasks = p["pending_tasks"]
        fill = [_one_pod(i, 0.0, "fill", 8) for i in range(n)]
        pend = [_one_pod(n + i, FILL_AT) for i in range(tasks)]
        jobs = fill + pend
        # the real fill pods are pinned, not Volcano's: no job of its cache, so no running-task cost
        _, t = simulate(_anchor("pending", n, lambda jobs=jobs: list(jobs), FILL_AT + SETTLE_S + WINDOW_S,
                                **{"schedulers.volcano.session_per_running_task_us": 0.0}), profile)
        window = [(ms, w) for s, ms, w in t.session_log if s >= FILL_AT + SETTLE_S]
        out["pending"].append({"tasks": tasks, "sessions": len(window),
                               "e2e_ms": round(float(np.mean([ms for ms, _ in window])), 4) if window else None,
                               "walk_ms": round(float(np.mean([w for _, w in window])), 4) if window else None})
    return out


def ratio(real: float | None, sim: float | None) -> float | None:
    return round(real / sim, 3) if real and sim else None


def fill(curves: list[dict], profile: Profile) -> list[dict]:
    for c in curves:
        c["sim"] = twin(c, profile)
        path = Path(c.pop("_path"))
        path.write_text(json.dumps(c, indent=2) + "\n")
        c["_path"] = str(path)
    return curves


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def table(curves: list[dict], hold_out: set[int]) -> str:
    """nodes | figure | real | sim | ratio, one line per figure (what docs/fidelity.md shows)."""
    lines = ["| nodes | figure (vc-scheduler metric) | real ms | twin ms | real / twin |", "|---:|---|---:|---:|---:|"]
    for c in curves:
        n, p, sim = c["nodes"], points(c), c.get("sim") or {}
        tag = f"{n:,}" + (" (held out)" if n in hold_out else "")
        if p.get("idle_ms") is not None:
            s = (sim.get("idle") or {}).get("session_ms")
            lines.append(f"| {tag} | idle session (e2e scheduling latency) | {_ms(p['idle_ms'])} | {_ms(s)} | "
                         f"{ratio(p['idle_ms'], s)} |")
        if p.get("place_ms") is not None:
            s = (sim.get("light") or {}).get("place_ms")
            lines.append(f"| {tag} | allocate per job placed, light stream ({to_find(n)} nodes to find) | "
                         f"{_ms(p['place_ms'])} | {_ms(s)} | {ratio(p['place_ms'], s)} |")
        for q, s in zip(p["pending"], sim.get("pending") or []):
            lines.append(f"| {tag} | session, {q['tasks']:,} pending tasks on a full fleet (e2e) | "
                         f"{_ms(q['e2e_ms'])} | {_ms(s['e2e_ms'])} | {ratio(q['e2e_ms'], s['e2e_ms'])} |")
            if q.get("allocate_ms") is not None:
                lines.append(f"| {tag} | ... of which allocate (twin: the walk) | {_ms(q['allocate_ms'])} | "
                             f"{_ms(s['walk_ms'])} | {ratio(q['allocate_ms'], s['walk_ms'])} |")
    return "\n".join(lines)


def write_profile(path: Path, vals: dict[str, float], used: dict[str, list[int]], hold_out: set[int],
                  command: str, curves: list[dict], running: list[dict] = ()) -> None:
    fitted = {n for phase, sizes in used.items() if phase != "running" for n in sizes}
    curve_cmd = "; ".join(dict.fromkeys(c["command"] for c in curves if c["nodes"] in fitted))
    measured_held = sorted(hold_out & {c["nodes"] for c in curves})
    held = f"; {', '.join(f'{n:,}' for n in measured_held)} nodes held out" if measured_held else ""

    def sizes(key: str) -> str:
        return ", ".join(f"{n:,}" for n in used.get(key, []))

    src = {
        "session_base_ms": ("idle", "volcano_e2e_scheduling_latency_milliseconds of sessions with no job, against "
                                    "nodes: the intercept"),
        "session_per_node_us": ("idle", "volcano_e2e_scheduling_latency_milliseconds of sessions with no job, "
                                        "against nodes: the slope"),
        "session_per_task_us": ("pending", "volcano_e2e_scheduling_latency_milliseconds of sessions with P one-pod "
                                           "jobs that fit nowhere on a full fleet, less the idle sessions', as "
                                           "P x (this + nodes x reject_per_node_us)"),
        "reject_per_node_us": ("pending", "volcano_e2e_scheduling_latency_milliseconds of sessions with P one-pod "
                                          "jobs that fit nowhere on a full fleet, less the idle sessions', as "
                                          "P x (session_per_task_us + nodes x this): allocate's walk of every node "
                                          "and what else an unplaceable task costs per node (gang's fit-error "
                                          "message at close)"),
        "session_per_running_task_us": ("running", "volcano_e2e_scheduling_latency_milliseconds of sessions "
                                                   "with R one-pod jobs placed and running and nothing to place, "
                                                   "less the idle sessions', as R x this"),
        "feasible_per_node_us": ("light", "volcano_action_scheduling_latency_milliseconds{action=allocate} of a "
                                          "light stream of one-pod jobs on an empty fleet, less the idle sessions', "
                                          "per job placed, over numNodesToFind(nodes)"),
    }
    running_cmd = "; ".join(dict.fromkeys(r["command"] for r in running))
    prof = load_profile(str(path))
    for key, value in vals.items():
        phase, text = src[key]
        old = prof.params["volcano"].get(key)
        files = "running-*n.json" if phase == "running" else "curve-*n.json"
        prof.params["volcano"][key] = Param(
            value, old.unit if old else "us", "measured",
            f"vc-scheduler {'v1.14.1'} on this machine's KWOK stack (fakes/volcano/costcurve.py, "
            f"results/fidelity-scale/volcano/{files}), {text}; least squares (relative error, non-negative) "
            f"over {sizes(phase)} nodes{'' if phase == 'running' else held}",
            f"{running_cmd if phase == 'running' else curve_cmd}; {command}")
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "results/fidelity-scale/volcano")
    ap.add_argument("--profile", default="local")
    ap.add_argument("--hold-out", default="", help="sizes left out of the fit (comma-separated)")
    ap.add_argument("--write-profile", type=Path, help="set this profile file's Volcano session costs from the "
                                                       "curves first (the twin then runs on it)")
    args = ap.parse_args(argv)
    hold_out = {int(x) for x in args.hold_out.split(",") if x}
    curves = load_curves(args.dir)
    if not curves:
        print(f"no curve-*n.json in {args.dir}: run python -m fakes.volcano.costcurve first", file=sys.stderr)
        return 2
    running = load_running(args.dir)
    if args.write_profile:
        vals, used = fit(curves, hold_out)
        per_running, used_running = fit_running(running)
        if per_running is not None:
            vals["session_per_running_task_us"], used["running"] = per_running, used_running
        write_profile(args.write_profile, vals, used, hold_out, "python -m loadgen.calibration.volcano_curve "
                      + " ".join(sys.argv[1:] if argv is None else argv), curves, running)
        for k, v in vals.items():
            print(f"volcano.{k} = {v}  (from {', '.join(map(str, used))})")
        args.profile = str(args.write_profile)
    print(table(fill(curves, load_profile(args.profile)), hold_out))
    if running:
        print()
        print(running_table(running, load_profile(args.profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
