"""The fakelet fleet's calibration against real raylets: the same trace on both, admission compared.

    python -m fakes.ray.fakelets.calibrate [--nodes 32] [--scenario FILE] [--duration-h H] [--seed S]
        [--time-scale X] [--out DIR] [--repeat K] [--check]

runs SCENARIO (default scenarios/ray-fakelets-calibration.yaml) with one seed through the real CLI,
`gangstorm run ... --backend real --schedulers ray --nodes N --ray-nodes raylet|fakelet --out
DIR/<kind>-<k> --quiet`, alternating raylet, fakelet, raylet, ... for K repetitions (alternating so
a change in the machine's load lands on both kinds), then reads each run's jobs.csv and summary.json
and compares the two kinds, per class and overall:

- admission count (and never admitted), p50, p90, p99, p99.9 of each kind over its K runs pooled,
  with the sample count (p99.9 of a few hundred samples is about the maximum);
- fake/real ratio at each quantile, and the share admitted within 0.1 s and 1 s;
- the two-sample Kolmogorov-Smirnov statistic D (and its asymptotic p-value), numpy only;
- the same statistics between the repetitions of one kind (real vs real, fake vs fake): the
  run-to-run noise the fake/real figures are to be read against;
- per run: /proc/loadavg at its start and end, wall and boot seconds, the GCS's own
  scheduling_latency_ms p50/p99 and the groups it created, and for fakelets their event-loop lag.

Writes DIR/calibration.json and DIR/calibration.md and prints the markdown. Latencies are wall
seconds (a control plane's latency does not scale with --time-scale). With --check the exit code is
1 when the comparison falls outside BAND.

Every process a run starts is followed (the run's process tree, sampled while it runs); anything of
it still alive after the CLI returns is reported and killed by pid.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.model.numbers import NA, fixed
from loadgen.model.quantiles import QUANTILES, exact_quantile

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIO = REPO / "scenarios" / "ray-fakelets-calibration.yaml"
KINDS = ("raylet", "fakelet")
WITHIN_S = (0.1, 1.0)
RAY_PROCS = ("gcs_server", "raylet", "fakelets.serve", "fakes.ray.driver", "fakes.ray.serve")

# The band fake/real must fall in at 32 nodes, each kind pooled over 2 runs (measured 2026-12-04 on
# a shared 2-core VM, loadavg 1-114: results/ray-fakelets-calibration/32n-r2b/ and 32n-r2/):
# - the share of groups admitted within 1 s, overall and for small jobs: |fake - real| <= 0.06
#   (measured 0.005-0.053; the same kind's two runs differ by up to 0.022). Under 1 s is a group
#   the GCS placed on its first try; over it, a group that waited for the GCS's 1 s Tick or for
#   capacity: the GCS's own behaviour, which fakelets must reproduce.
# - p99 overall: fake/real in [0.67, 1.5] (measured 0.90-1.10 pooled, 0.74-1.15 single pairs):
#   gang queueing, set by the trace and the GCS, not by who answers the RPCs.
# Not banded, reported: p50 and p90 (milliseconds: the RPC path and this machine's CPU queue;
# fakelets are 0.14-0.63x of raylets pooled, 0.07-3.6x single pairs, and one kind's two runs
# differ up to 6x with the load), p99.9 (one or two gangs) and the KS statistic (0.14-0.38 fake vs
# real, but 0.39-0.51 between two runs of the same kind: it measures the load, not the fleet).
BAND = {"all": {"ratio": {"p99": (0.67, 1.5)}, "within_1s_diff": 0.06},
        "small": {"within_1s_diff": 0.06}}


# -- running ------------------------------------------------------------------------------------
def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _ps() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, start time, command line) of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out[int(d.name)] = (int(fields[1]), fields[19], cmd)
    return out


def _descendants(root: int, ps: dict[int, tuple[int, str, str]]) -> dict[int, tuple[str, str]]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in ps.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found[c] = (ps[c][1], ps[c][2])
                todo.append(c)
    return found


def leftovers(seen: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Processes followed during a run (same pid and start time) that are still alive."""
    now = _ps()
    return {pid: cmd for pid, (start, cmd) in seen.items() if pid in now and now[pid][1] == start}


def ray_processes_now() -> list[str]:
    """What `ps -eo pid,args | grep -E 'gcs_server|raylet|fakelets.serve|fakes.ray.driver'` shows."""
    return [f"{pid} {cmd[:160]}" for pid, (_, _, cmd) in sorted(_ps().items())
            if any(p in cmd for p in RAY_PROCS[:4])]


def gangstorm_bin() -> str:
    here = Path(sys.executable).parent / "gangstorm"
    return str(here) if here.exists() else "gangstorm"


def run_one(kind: str, scenario: Path, nodes: int, out: Path, seed: int | None = None,
            duration_h: float | None = None, time_scale: float | None = None,
            timeout_s: float = 1800.0, log=print) -> dict[str, Any]:
    """One `gangstorm run` on raylets or fakelets; the figures of read_run plus how it ran."""
    cmd = [gangstorm_bin(), "run", str(scenario), "--backend", "real", "--schedulers", "ray",
           "--nodes", str(nodes), "--ray-nodes", kind, "--out", str(out), "--quiet"]
    for flag, value in (("--seed", seed), ("--duration-h", duration_h), ("--time-scale", time_scale)):
        if value is not None:
            cmd += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    out.parent.mkdir(parents=True, exist_ok=True)
    started = loadavg()
    log(f"[{time.strftime('%H:%M:%S')}] {kind} -> {out} (loadavg {started})")
    t0 = time.monotonic()
    seen: dict[int, tuple[str, str]] = {}
    with open(out.parent / f"{out.name}.log", "w") as stream:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=stream, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                seen.update(_descendants(proc.pid, _ps()))
                if time.monotonic() - t0 > timeout_s:
                    _interrupt(proc)
                    break
                time.sleep(1.0)
        except BaseException:
            _interrupt(proc)
            raise
        finally:
            rc = proc.wait()
            left = _reap(seen)
    wall = time.monotonic() - t0
    run: dict[str, Any] = {"kind": kind, "dir": str(out), "cmd": cmd, "rc": rc, "wall_s": round(wall, 1),
                           "loadavg_start": started, "loadavg_end": loadavg(), "left_behind": left}
    if rc != 0 or not (out / "summary.json").exists():
        run["error"] = f"gangstorm run exited {rc}; see {out.parent / (out.name + '.log')}"
        return run
    run.update(read_run(out))
    return run


def _interrupt(proc: subprocess.Popen) -> None:
    """Ctrl-C the run (it stops what it started and keeps what it recorded); kill it after 60 s."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def _reap(seen: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Kill (by pid) whatever the run started that is still alive; return what that was."""
    left = {}
    for attempt in range(10):
        left_now = leftovers(seen)
        if not left_now:
            break
        left.update(left_now)
        if attempt == 0:
            time.sleep(2.0)          # a stop in progress: give it a moment
            continue
        for pid in left_now:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)
    return {str(p): c[:200] for p, c in left.items()}


# -- reading ------------------------------------------------------------------------------------
def read_run(out: Path) -> dict[str, Any]:
    """Admission latencies per class (jobs.csv) and the control plane's figures (summary.json)."""
    summary = json.loads((out / "summary.json").read_text())
    ray = summary["schedulers"]["ray"]
    cp = ray.get("control_plane", {})
    lat: dict[str, list[float]] = {}
    never: dict[str, int] = {}
    jobs: dict[str, int] = {}
    with open(out / "jobs.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["scheduler"] != "ray":
                continue
            for cls in (row["cls"], "all"):
                jobs[cls] = jobs.get(cls, 0) + 1
                if row["admission_s"] == "":
                    never[cls] = never.get(cls, 0) + 1
                else:
                    lat.setdefault(cls, []).append(float(row["admission_s"]))
    fake = cp.get("fakelets") or {}
    return {"complete": summary.get("complete"), "jobs": jobs, "never_admitted": never, "admission_s": lat,
            "time_scale": ray.get("time_scale"),
            "control_plane": {k: cp.get(k) for k in (
                "nodes_kind", "raylets", "raylets_alive", "groups_created", "infeasible_groups",
                "gcs_scheduling_ms_p50", "gcs_scheduling_ms_p99", "gcs_creation_ms_p50",
                "gcs_creation_ms_p99", "scheduling_attempts_max", "fleet_boot_s", "errors")},
            "host_cpu_busy": (cp.get("host_cpu") or {}).get("busy_share"),
            "fakelets": {k: fake.get(k) for k in ("loop_lag_max_s", "false_deaths", "unimplemented",
                                                  "views_sent", "boot_s")} if fake else None}


# -- statistics ---------------------------------------------------------------------------------
def quantiles(x: Iterable[float]) -> dict[str, float | None]:
    a = np.asarray(list(x), dtype=float)
    out: dict[str, float | None] = {"count": int(a.size)}
    for name, q in QUANTILES.items():
        out[name] = round(exact_quantile(a, q), 6) if a.size else None
    for s in WITHIN_S:
        out[f"within_{s:g}s"] = round(float((a <= s).mean()), 4) if a.size else None
    return out


def ks_2samp(a: Iterable[float], b: Iterable[float]) -> dict[str, float | None]:
    """Two-sample Kolmogorov-Smirnov: D = max |F_a - F_b| and its asymptotic p-value."""
    x, y = np.sort(np.asarray(list(a), dtype=float)), np.sort(np.asarray(list(b), dtype=float))
    if not x.size or not y.size:
        return {"d": None, "p": None}
    grid = np.concatenate([x, y])
    d = float(np.max(np.abs(np.searchsorted(x, grid, side="right") / x.size
                            - np.searchsorted(y, grid, side="right") / y.size)))
    ne = x.size * y.size / (x.size + y.size)
    lam = (np.sqrt(ne) + 0.12 + 0.11 / np.sqrt(ne)) * d
    k = np.arange(1, 101)
    p = float(np.clip(2 * np.sum((-1.0) ** (k - 1) * np.exp(-2 * k**2 * lam**2)), 0.0, 1.0)) if lam > 0 else 1.0
    return {"d": round(d, 4), "p": round(p, 4)}


def _ratio(fake: float | None, real: float | None) -> float | None:
    if fake is None or real is None or real <= 0:
        return None
    return round(fake / real, 3)


def compare_samples(real: list[float], fake: list[float]) -> dict[str, Any]:
    qr, qf = quantiles(real), quantiles(fake)
    return {"real": qr, "fake": qf,
            "ratio": {q: _ratio(qf[q], qr[q]) for q in QUANTILES},
            **{f"within_{s:g}s_diff": (None if qf[f"within_{s:g}s"] is None or qr[f"within_{s:g}s"] is None
                                        else round(qf[f"within_{s:g}s"] - qr[f"within_{s:g}s"], 4))
               for s in WITHIN_S},
            "ks": ks_2samp(real, fake)}


def _pooled(runs: list[dict[str, Any]], kind: str, cls: str) -> list[float]:
    return [x for r in runs if r["kind"] == kind and "admission_s" in r for x in r["admission_s"].get(cls, [])]


def compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per class and overall: each kind pooled over its runs, fake vs real, and the repeat noise."""
    classes = sorted({c for r in runs for c in r.get("admission_s", {})} - {"all"}) + ["all"]
    out: dict[str, Any] = {}
    for cls in classes:
        entry = compare_samples(_pooled(runs, "raylet", cls), _pooled(runs, "fakelet", cls))
        for kind in KINDS:
            done = [r for r in runs if r["kind"] == kind and "admission_s" in r]
            entry[kind + "_never_admitted"] = sum(r["never_admitted"].get(cls, 0) for r in done)
            if len(done) >= 2:     # the same kind's first two runs: the noise floor of the comparison
                a, b = done[0]["admission_s"].get(cls, []), done[1]["admission_s"].get(cls, [])
                rep = compare_samples(a, b)
                entry[f"{kind}_repeat"] = {"ratio": rep["ratio"], "ks": rep["ks"],
                                           "within_1s_diff": rep["within_1s_diff"]}
        entry["pairs"] = pair_ranges(runs, cls)
        out[cls] = entry
    return out


def pair_ranges(runs: list[dict[str, Any]], cls: str) -> dict[str, Any]:
    """Every (raylet run, fakelet run) pair compared alone: the [min, max] of each figure. What a
    single pair (a CI test) can show, as opposed to the pooled comparison."""
    real = [r["admission_s"].get(cls, []) for r in runs if r["kind"] == "raylet" and "admission_s" in r]
    fake = [r["admission_s"].get(cls, []) for r in runs if r["kind"] == "fakelet" and "admission_s" in r]
    got: dict[str, list[float]] = {}
    for a in real:
        for b in fake:
            c = compare_samples(a, b)
            for key, value in [*((q, c["ratio"][q]) for q in QUANTILES), ("within_1s_diff", c["within_1s_diff"]),
                               ("ks_d", c["ks"]["d"])]:
                if value is not None:
                    got.setdefault(key, []).append(value)
    return {"n": len(real) * len(fake), **{k: [min(v), max(v)] for k, v in got.items()}}


def check_band(cmp: dict[str, Any], band: dict[str, Any]) -> list[str]:
    """Where the comparison falls outside the band: [] when it is inside."""
    bad = []
    for cls, b in band.items():
        c = cmp.get(cls)
        if c is None:
            bad.append(f"{cls}: no samples")
            continue
        for q, (lo, hi) in b.get("ratio", {}).items():
            r = c["ratio"].get(q)
            if r is None or not lo <= r <= hi:
                bad.append(f"{cls} {q} fake/real {r} outside [{lo}, {hi}] "
                           f"(real {c['real'][q]}, fake {c['fake'][q]})")
        if "within_1s_diff" in b and (c["within_1s_diff"] is None or abs(c["within_1s_diff"]) > b["within_1s_diff"]):
            bad.append(f"{cls} share within 1 s differs by {c['within_1s_diff']} (> {b['within_1s_diff']}; "
                       f"real {c['real']['within_1s']}, fake {c['fake']['within_1s']})")
        if "ks_max" in b and (c["ks"]["d"] is None or c["ks"]["d"] > b["ks_max"]):
            bad.append(f"{cls} KS D {c['ks']['d']} > {b['ks_max']}")
    return bad


# -- the whole calibration ----------------------------------------------------------------------
def calibrate(nodes: int, scenario: Path, out: Path, repeat: int = 2, seed: int | None = None,
              duration_h: float | None = None, time_scale: float | None = None, band: dict | None = None,
              log=print) -> dict[str, Any]:
    runs = []
    for k in range(repeat):
        for kind in KINDS:
            runs.append(run_one(kind, scenario, nodes, out / f"{kind}-{k}", seed, duration_h, time_scale, log=log))
            r = runs[-1]
            log(f"  {kind}-{k}: rc {r['rc']}, {r['wall_s']} s wall, loadavg {r['loadavg_start']} -> "
                f"{r['loadavg_end']}" + (f", LEFT BEHIND (killed): {r['left_behind']}" if r["left_behind"] else "")
                + (f", ERROR {r['error']}" if "error" in r else ""))
    cmp = compare(runs)
    band = BAND if band is None else band
    report = {"nodes": nodes, "scenario": str(scenario), "seed": seed, "duration_h": duration_h,
              "time_scale": time_scale, "repeat": repeat, "cores": os.cpu_count(),
              "runs": [{k: v for k, v in r.items() if k != "admission_s"} for r in runs],
              "comparison": cmp, "band": {c: {k: (list(v) if isinstance(v, tuple) else v) for k, v in b.items()}
                                          for c, b in band.items()},
              "outside_band": check_band(cmp, band) if all("error" not in r for r in runs) else ["runs failed"],
              "ray_processes_after": ray_processes_now()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(report, indent=1))
    (out / "calibration.md").write_text(markdown(report))
    return report


def reanalyse(out: Path, band: dict | None = None) -> dict[str, Any]:
    """The report again from DIR's run folders (and the run records in DIR/calibration.json)."""
    old = json.loads((out / "calibration.json").read_text())
    runs = []
    for r in old["runs"]:
        r = dict(r)
        if "error" not in r:
            r.update(read_run(Path(r["dir"])))
        runs.append(r)
    band = BAND if band is None else band
    cmp = compare(runs)
    report = {**old, "runs": [{k: v for k, v in r.items() if k != "admission_s"} for r in runs], "comparison": cmp,
              "band": {c: {k: (list(v) if isinstance(v, tuple) else v) for k, v in b.items()} for c, b in band.items()},
              "outside_band": check_band(cmp, band) if all("error" not in r for r in runs) else ["runs failed"]}
    (out / "calibration.json").write_text(json.dumps(report, indent=1))
    (out / "calibration.md").write_text(markdown(report))
    return report


def _fmt(v: Any, digits: int = 3) -> str:
    return fixed(v, digits, grouping=False)


def _span(pairs: dict[str, Any], key: str) -> str:
    return NA if key not in pairs else f"{_fmt(pairs[key][0], 2)}-{_fmt(pairs[key][1], 2)}"


def markdown(report: dict[str, Any]) -> str:
    lines = [f"## Fakelets vs raylets: {report['nodes']} nodes, {report['repeat']} run(s) of each, "
             f"{Path(report['scenario']).name}", "",
             "Admission latency (wall s), each kind pooled over its runs; `rep` = the kind's run 0 vs run 1.", "",
             "| class | stat | raylet | fakelet | fake/real | real rep ratio | fake rep ratio |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for cls, c in report["comparison"].items():
        rr, fr = c.get("raylet_repeat", {}), c.get("fakelet_repeat", {})
        lines.append(f"| {cls} | admitted (never) | {c['real']['count']} ({c['raylet_never_admitted']}) | "
                     f"{c['fake']['count']} ({c['fakelet_never_admitted']}) | | | |")
        for q in QUANTILES:
            lines.append(f"| {cls} | {q} | {_fmt(c['real'][q])} | {_fmt(c['fake'][q])} | {_fmt(c['ratio'][q], 2)} | "
                         f"{_fmt(rr.get('ratio', {}).get(q), 2)} | {_fmt(fr.get('ratio', {}).get(q), 2)} |")
        for s in WITHIN_S:
            lines.append(f"| {cls} | share <= {s:g} s | {_fmt(c['real'][f'within_{s:g}s'])} | "
                         f"{_fmt(c['fake'][f'within_{s:g}s'])} | diff {_fmt(c[f'within_{s:g}s_diff'])} | "
                         + (f"diff {_fmt(rr.get('within_1s_diff'))} | diff {_fmt(fr.get('within_1s_diff'))} |"
                            if s == 1.0 else " | |"))
        lines.append(f"| {cls} | KS D (p) | | | {_fmt(c['ks']['d'])} ({_fmt(c['ks']['p'])}) | "
                     f"{_fmt(rr.get('ks', {}).get('d'))} | {_fmt(fr.get('ks', {}).get('d'))} |")
        pr = c.get("pairs", {})
        if pr.get("n", 0) > 1:
            p50, p90, p99, diff, ks_d = (_span(pr, k) for k in ("p50", "p90", "p99", "within_1s_diff", "ks_d"))
            lines.append(f"| {cls} | single pairs ({pr['n']}): p50 / p90 / p99 ratio, 1 s diff, KS D | | | "
                         f"{p50} / {p90} / {p99}, {diff}, {ks_d} | | |")
    lines += ["", "| run | loadavg start -> end | wall s | boot s | admitted / jobs | GCS sched ms p50 / p99 | "
              "groups created | host CPU busy | fakelet loop lag max s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["runs"]:
        cp = r.get("control_plane", {})
        jobs, never = r.get("jobs", {}).get("all"), r.get("never_admitted", {}).get("all", 0)
        lines.append(f"| {Path(r['dir']).name} | {r['loadavg_start']} -> {r['loadavg_end']} | {r['wall_s']} | "
                     f"{_fmt(cp.get('fleet_boot_s'), 1)} | {NA if jobs is None else jobs - never} / {_fmt(jobs)} | "
                     f"{_fmt(cp.get('gcs_scheduling_ms_p50'), 1)} / {_fmt(cp.get('gcs_scheduling_ms_p99'), 1)} | "
                     f"{_fmt(cp.get('groups_created'))} | {_fmt(r.get('host_cpu_busy'), 2)} | "
                     f"{_fmt((r.get('fakelets') or {}).get('loop_lag_max_s'))} |"
                     + (f" ERROR: {r['error']}" if "error" in r else ""))
    lines += ["", "Band: " + json.dumps(report["band"]),
              "Outside the band: " + ("; ".join(report["outside_band"]) or "nothing"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fakes.ray.fakelets.calibrate", description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=32)
    p.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    p.add_argument("--duration-h", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--time-scale", type=float)
    p.add_argument("--out", type=Path, help="default results/ray-fakelets-calibration/<N>n-<time>")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--check", action="store_true", help="exit 1 when fake/real falls outside the band")
    p.add_argument("--reanalyse", type=Path, metavar="DIR", help="no run: rebuild DIR/calibration.json from its runs")
    a = p.parse_args(argv)
    if a.reanalyse:
        report = reanalyse(a.reanalyse.resolve())
        print(markdown(report))
        return 1 if a.check and report["outside_band"] else 0
    out = a.out or REPO / "results" / "ray-fakelets-calibration" / f"{a.nodes}n-{time.strftime('%Y%m%d-%H%M%S')}"
    report = calibrate(a.nodes, a.scenario.resolve(), out.resolve(), a.repeat, a.seed, a.duration_h, a.time_scale,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
    print(markdown(report))
    print(f"wrote {out}/calibration.json", file=sys.stderr)
    if report["ray_processes_after"]:
        print("ray processes running after the calibration (not necessarily this run's):\n  "
              + "\n  ".join(report["ray_processes_after"]), file=sys.stderr)
    return 1 if a.check and report["outside_band"] else 0


if __name__ == "__main__":
    sys.exit(main())
