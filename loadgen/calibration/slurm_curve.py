"""Slurm's cost curve against its twin: the twin's slurmctld costs measured from the curve, and the
twin's value next to every measured figure.

    python -m loadgen.calibration.slurm_curve [--curves results/fidelity-scale/slurm] [--profile local]
        [--hold-out 5000] [--write-profile fakes/profiles/local.yaml] [--fill] [--markdown]

The curve files (fakes/slurm/costcurve.py: one per fleet size) hold sdiag's own figures per window:
each main and backfill cycle seen alone, with the queue it built and the jobs it started, and the
submit RPC's mean time. Three least-squares fits (non-negative, relative error) give the twin's
costs (fakes/slurm/sim.py MainCosts, BackfillCosts, submit_rpc_s):

- submit RPC = rpc_ms + rpc_per_node_us x nodes, from `submit_rpc` (jobs that cannot start, so
  the RPC is job_allocate's test-only select alone);
- main cycle = base + per pending job + per job started (+ per node) + per failing test (+ per node)
  + per job popped behind the blocked partition, from the `blocked-<D>` windows (one failing test,
  D pending) and the `start` window (jobs started);
- backfill pass = base + per job tested (+ per node) + per job started (+ per node), from the
  `blocked-<D>` windows (every test fails and leaves a reservation) and the burst benchmarks'
  passes (every test starts a job).

The sizes in --hold-out are left out of every fit, so their rows are predictions. --fill writes the
twin's values into each curve file's "sim" block; --write-profile sets the parameters with their
provenance (measured: the sdiag metric, the fit, the commands).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loadgen.input.profile import Param, Profile, dump
from loadgen.input.profile import load as load_profile
from loadgen.input.scenario import from_dict
from loadgen.model.registry import target_class

DEPTH = 100        # default_queue_depth: how many jobs a triggered main cycle pops


@dataclass
class Fit:
    names: list[str]
    coef: np.ndarray
    rows: int
    sizes: list[int]

    def value(self, name: str) -> float:
        return float(self.coef[self.names.index(name)])


def nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0 (a cost is never negative): coefficients that come
    out negative are fixed at 0, the most negative first, and the rest refitted."""
    free = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while free:
        sol, *_ = np.linalg.lstsq(x[:, free], y, rcond=None)
        if (sol >= 0).all():
            coef[free] = sol
            break
        free.pop(int(np.argmin(sol)))
    return coef


def _fit(names: list[str], rows: list[tuple[list[float], float, int]], hold_out: set[int]) -> Fit:
    """rows: (features, measured value, nodes); relative error, so short and long cycles weigh alike."""
    use = [(f, y, n) for f, y, n in rows if n not in hold_out and y > 0]
    x = np.array([f for f, _, _ in use], float) / np.array([y for _, y, _ in use])[:, None]
    coef = nnls(x, np.ones(len(use))) if use else np.zeros(len(names))
    return Fit(names, coef, len(use), sorted({n for _, _, n in use}))


def load_curves(folder: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) | {"_path": str(p)} for p in folder.glob("curve-*n.json")),
                  key=lambda d: d["nodes"])


def load_bursts(folder: Path, what: str = "start") -> list[dict]:
    return [json.loads(p.read_text()) | {"_path": str(p)} for p in sorted(folder.glob(f"bench-burst-{what}-*n.json"))]


def agent_lifetime_s(burst: dict) -> float | None:
    """How long one of slurmctld's agents lives, by Little's law over an execute burst's polls while
    jobs ran: mean sdiag Agent count / agents started per second (one batch launch per job started,
    one terminate message per job completed). None without such polls."""
    polls = [c for c in burst.get("counters") or [] if (c[2] or 0) > 0 and (c[3] or 0) < burst["jobs"]]
    if len(polls) < 2 or polls[-1][0] <= polls[0][0]:
        return None
    span = polls[-1][0] - polls[0][0]
    started = (polls[-1][2] - polls[0][2] + polls[-1][3] - polls[0][3]) / span
    alive = sum(c[4] or 0 for c in polls) / len(polls)
    return alive / started if started > 0 else None


# --- observations: (features, seconds, nodes) ------------------------------------------------------
def rpc_rows(curves: list[dict]) -> list[tuple[list[float], float, int]]:
    out = []
    for d in curves:
        r = d["metrics"].get("submit_rpc", {}).get("rpc", {}).get("REQUEST_SUBMIT_BATCH_JOB")
        if r and r.get("ave_time_us"):
            out.append(([1.0, d["nodes"]], r["ave_time_us"] / 1e6, d["nodes"]))
    return out


def main_cycles(d: dict) -> list[dict]:
    """Every main cycle of a curve file seen alone, with what it did: pending jobs, started,
    failed tests and jobs popped behind the blocked partition."""
    out = []
    for w in d["metrics"].get("blocked", []):
        for e in w["main_each"]:
            q = e["queue"]
            if q and not e.get("started"):
                out.append({"window": w["window"], "us": e["cycle_us"], "pending": q, "started": 0, "failed": 1,
                            "skipped": min(q, DEPTH) - 1})
    w = d["metrics"].get("start")
    for e in (w or {}).get("main_each", []):
        started = e.get("started")
        if started is None:                 # files from before the probe counted starts per cycle
            started = min(e["queue"], DEPTH)
        if started > 0:
            out.append({"window": "start", "us": e["cycle_us"], "pending": e["queue"], "started": started,
                        "failed": 0, "skipped": 0})
    return out


def main_rows(curves: list[dict]) -> list[tuple[list[float], float, int]]:
    out = []
    for d in curves:
        n = d["nodes"]
        for c in main_cycles(d):
            out.append(([1.0, c["pending"], c["started"], c["started"] * n, c["failed"] * n, c["skipped"]],
                        c["us"] / 1e6, n))
    return out


def bf_cycles(d: dict) -> list[dict]:
    out = []
    for w in d["metrics"].get("blocked", []):
        for e in w["bf_each"]:
            if e["depth_try"]:
                out.append({"window": w["window"], "us": e["cycle_us"], "tested": e["depth_try"],
                            "started": e.get("started") or 0})
    return out


def bf_rows(curves: list[dict], bursts: list[dict]) -> list[tuple[list[float], float, int]]:
    out = []
    for d in curves:
        n = d["nodes"]
        for c in bf_cycles(d):
            out.append(([1.0, c["tested"], c["tested"] * n, c["started"], c["started"] * n], c["us"] / 1e6, n))
    for b in bursts:
        n = b["nodes"]
        for e in b["window"]["bf_each"]:
            started = e.get("started")
            if started is None:
                started = e["depth_try"] if e["depth_try"] >= 100 else None    # a pass on free nodes starts all
            if started:
                t = e["depth_try"]
                out.append(([1.0, t, t * n, started, started * n], e["cycle_us"] / 1e6, n))
    return out


MAIN_KEYS = ["main_cycle_base_ms", "main_cycle_per_pending_us", "main_cycle_per_job_us",
             "main_cycle_per_job_node_ns", "main_cycle_per_fail_node_ns", "main_cycle_per_skip_us"]
BF_KEYS = ["bf_cycle_base_ms", "bf_cycle_per_job_us", "bf_cycle_per_job_node_ns", "bf_cycle_per_start_us",
           "bf_cycle_per_start_node_ns"]
RPC_KEYS = ["rpc_ms", "rpc_per_node_us"]
SCALE = {"_ms": 1e3, "_us": 1e6, "_ns": 1e9}     # seconds -> the parameter's unit


def _unit(key: str) -> float:
    return next(v for k, v in SCALE.items() if key.endswith(k))


def fit_all(curves: list[dict], bursts: list[dict], hold_out: set[int]) -> dict[str, Fit]:
    return {"rpc": _fit(RPC_KEYS, rpc_rows(curves), hold_out),
            "main": _fit(MAIN_KEYS, main_rows(curves), hold_out),
            "bf": _fit(BF_KEYS, bf_rows(curves, bursts), hold_out)}


def values(fits: dict[str, Fit]) -> dict[str, float]:
    """The fitted coefficients in the profile's units (main_cycle_per_fail_us stays 0: every
    blocked cycle holds exactly one failing test, so its fixed part is the cycle's base)."""
    out = {"main_cycle_per_fail_us": 0.0}
    for f in fits.values():
        for k in f.names:
            out[k] = f.value(k) * _unit(k)
    return out


# --- the twin's value of each measured figure ---------------------------------------------------------
def twin_config(profile: Profile, over: dict[str, float] | None = None) -> dict:
    sc = from_dict({}, "<slurm curve>", profile)
    cfg = sc.scheduler_config("slurm")
    cfg.update(over or {})
    return cfg


def compare(curves: list[dict], cfg: dict, hold_out: set[int], stat=np.mean) -> list[dict]:
    """Rows: nodes, figure, real (sdiag), sim (the twin's cost model on the same cycles), ratio.
    `stat` summarises a window's cycles on both sides (the mean; a low quantile judges a machine
    whose other load stretched some cycles, as contention only ever lengthens one)."""
    twin = target_class("slurm", "sim")
    rows = []

    def add(d, figure, real, sim, n_cycles):
        if real and sim:
            rows.append({"nodes": d["nodes"], "figure": figure, "real_ms": round(real * 1e3, 3),
                         "sim_ms": round(sim * 1e3, 3), "ratio": round(real / sim, 3), "cycles": n_cycles,
                         "held_out": d["nodes"] in hold_out})
    for d in curves:
        n = d["nodes"]
        r = d["metrics"].get("submit_rpc", {}).get("rpc", {}).get("REQUEST_SUBMIT_BATCH_JOB")
        if r:
            add(d, "submit RPC (sdiag REQUEST_SUBMIT_BATCH_JOB mean)", r["ave_time_us"] / 1e6,
                twin.submit_rpc_s(cfg, n), r["count"])
        mc, bc = twin.main_costs(cfg, n), twin.bf_costs(cfg, n)
        by_window: dict[str, list[dict]] = {}
        for c in main_cycles(d):
            by_window.setdefault(c["window"], []).append(c)
        for win, cs in by_window.items():
            real = stat([c["us"] for c in cs]) / 1e6
            sim = stat([mc.cycle(c["pending"], c["started"], c["failed"], c["skipped"]) for c in cs])
            what = "jobs starting" if win == "start" else f"{win.split('-')[1]} pending, blocked"
            add(d, f"main cycle, {what}", real, sim, len(cs))
        by_window = {}
        for c in bf_cycles(d):
            by_window.setdefault(c["window"], []).append(c)
        for win, cs in by_window.items():
            real = stat([c["us"] for c in cs]) / 1e6
            sim = stat([bc.cycle(c["tested"], c["started"]) for c in cs])
            add(d, f"backfill pass, {win.split('-')[1]} pending, blocked", real, sim, len(cs))
    return rows


def fill(curves: list[dict], cfg: dict, rows: list[dict], profile_name: str) -> None:
    """Each curve file gets the twin's figures next to its own ("sim")."""
    for d in curves:
        mine = [{k: r[k] for k in ("figure", "real_ms", "sim_ms", "ratio", "cycles")}
                for r in rows if r["nodes"] == d["nodes"]]
        doc = {k: v for k, v in d.items() if k != "_path"}
        doc["sim"] = {"profile": profile_name, "model": "fakes/slurm/sim.py MainCosts, BackfillCosts, submit_rpc_s",
                      "figures": mine}
        Path(d["_path"]).write_text(json.dumps(doc, indent=1) + "\n")


def table(rows: list[dict]) -> str:
    lines = ["| nodes | figure | real ms | sim ms | ratio | cycles |", "|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        held = " (held out)" if r["held_out"] else ""
        lines.append(f"| {r['nodes']:,}{held} | {r['figure']} | {r['real_ms']:.3g} | {r['sim_ms']:.3g} | "
                     f"{r['ratio']:.2f} | {r['cycles']} |")
    return "\n".join(lines)


def write_profile(path: Path, base: Profile, vals: dict[str, float], fits: dict[str, Fit], hold_out: set[int],
                  command: str, agents: dict[int, float | None] | None = None, agents_from: int = 500) -> None:
    src = {"rpc": "sdiag REQUEST_SUBMIT_BATCH_JOB mean time against nodes (jobs that cannot start, submitted "
                  "one at a time)",
           "main": "sdiag main schedule Last cycle, each cycle seen alone, against pending jobs, jobs started "
                   "(x nodes), the failing test (x nodes) and jobs popped past it",
           "bf": "sdiag backfill Last cycle, each pass seen alone, against jobs tested (x nodes) and jobs "
                 "started (x nodes)"}
    prof = load_profile(str(path)) if path.exists() else base
    for group, f in fits.items():
        held = f"; sizes {sorted(hold_out)} held out" if hold_out else ""
        text = f"{src[group]}, least squares over {f.rows} cycles at {f.sizes} nodes{held}"
        for k in f.names + (["main_cycle_per_fail_us"] if group == "main" else []):
            old = prof.params["slurm"][k]
            note = text + ("; 0: one failing test per blocked cycle, its fixed part is the base"
                           if k == "main_cycle_per_fail_us" else "")
            prof.params["slurm"][k] = Param(round(vals[k], 6), old.unit, "measured", note, command)
    if "agent_ms" in vals:
        others = ", ".join(f"{n:,} nodes {s:.2f} s" for n, s in sorted((agents or {}).items())
                           if s and n != agents_from)
        old = prof.params["slurm"]["agent_ms"]
        prof.params["slurm"]["agent_ms"] = Param(
            round(vals["agent_ms"], 1), old.unit, "measured",
            f"Little's law on the execute burst at {agents_from:,} nodes (results/fidelity-scale/slurm/"
            f"bench-burst-execute-{agents_from}n.json): mean sdiag Agent count while jobs ran / agents started per "
            f"second (a batch launch per job started, a terminate per job completed)"
            + (f"; the other bursts give {others}" if others else ""),
            f"python -m fakes.slurm.burst --nodes {agents_from} --jobs 1000 --sleep 0 --out "
            "results/fidelity-scale/slurm; "
            + command)
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    """Fit the twin's slurmctld costs to the cost curve; print real vs twin per size and window."""
    ap = argparse.ArgumentParser(prog="python -m loadgen.calibration.slurm_curve", description=main.__doc__)
    ap.add_argument("--curves", type=Path, default=Path("results/fidelity-scale/slurm"))
    ap.add_argument("--profile", default="local", help="profile whose other values the twin keeps")
    ap.add_argument("--hold-out", default="5000", help="sizes left out of the fits (comma-separated; '' for none)")
    ap.add_argument("--write-profile", type=Path, help="write the measured parameters into this profile")
    ap.add_argument("--agents-from", type=int, default=500,
                    help="the execute burst (bench-burst-execute-<nodes>n.json) agent_ms is measured on")
    ap.add_argument("--fill", action="store_true", help="write the twin's figures into each curve file")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    hold = {int(x) for x in args.hold_out.split(",") if x.strip()}
    curves, bursts = load_curves(args.curves), load_bursts(args.curves)
    if not curves:
        print(f"{args.curves}: no curve-<nodes>n.json (run python -m fakes.slurm.costcurve)", file=sys.stderr)
        return 2
    fits = fit_all(curves, bursts, hold)
    vals = values(fits)
    agents = {b["nodes"]: agent_lifetime_s(b) for b in load_bursts(args.curves, "execute")}
    if agents.get(args.agents_from):
        vals["agent_ms"] = agents[args.agents_from] * 1e3
    base = load_profile(args.profile)
    cfg = twin_config(base, vals)
    rows = compare(curves, cfg, hold)
    command = ("python -m fakes.slurm.costcurve --sizes " + ",".join(str(d["nodes"]) for d in curves)
               + "; python -m loadgen.calibration.slurm_curve" + (f" --hold-out {args.hold_out}" if hold else "")
               + (f" --write-profile {args.write_profile}" if args.write_profile else ""))
    if args.write_profile:
        write_profile(args.write_profile, base, vals, fits, hold, command, agents, args.agents_from)
    if args.fill:
        fill(curves, cfg, rows, args.write_profile.stem if args.write_profile else base.name)
    if args.json:
        print(json.dumps({"values": vals, "rows": rows}, indent=1))
        return 0
    print("measured costs:", ", ".join(f"{k}={v:.4g}" for k, v in vals.items()))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
