"""Fidelity of the simulated kube-gang and coscheduling: a fitting case and a held-out case per
scheduler, each as repeated real runs (kube-scheduler v1.36.1 with gang gates, or scheduler-plugins'
sp-scheduler v0.34.7, on KWOK) against the twin on their wall-clock plan
(loadgen/calibration/realcase.py): admission p50/p99 ratio, allocation-utilization difference and
partial-gang GPU-hours, against the goal band of docs/fidelity.md.

Usage: PYTHONPATH=. python tools/gangs/fidelity.py [--schedulers kube-gang,coscheduling]
       [--cases fit,heldout] [--runs 3] [--time-scale 20] [--profile local] [--out results/fidelity]
       [--rerun | --no-run] [--write-profile fakes/profiles/local.yaml]
       (each real run under `flock /work/cpu.lock` on a shared machine: `make fidelity-gangs`)

Writes <out>/<scheduler>/<case>/runN/summary.json (the real runs, reused unless --rerun) and
<out>/<scheduler>/fidelity.json (the rows) and fidelity.md (the tables: the goal band, partial
gangs, per job class). --write-profile puts each scheduler's rows and held-out summary into that
profile's validation block, as `gangstorm calibrate` does for the other schedulers, so every
simulated result quotes them (calibrated, and whether the held-out case is within the goal band or
OUTSIDE it).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadgen.calibration.fidelity import held_out_summary, table
from loadgen.calibration.realcase import case
from loadgen.input.profile import ROW, dump
from loadgen.input.profile import load as load_profile
from loadgen.input.scenario import load

HERE = Path(__file__).resolve().parent
CASES = {"fit": ("fit", HERE / "fit.yaml"), "heldout": ("held_out", HERE / "heldout.yaml")}


def gang_table(name: str, rows: list[dict]) -> str:
    """What the goal-band table leaves out: partial-gang GPU-hours, jobs left pending, the CPU wait."""
    lines = [f"| {name} case | partial-gang GPU-h real (spread) | sim | pending at end real / sim "
             "| CPU wait per real run (PSI) |", "|---|---|---:|---|---|"]
    for r in rows:
        pg, pe = r["partial_gang_gpu_hours"], r["pending_at_end"]
        lines.append(f"| {r['case']} | {pg['real']:.5f} ({pg['real_spread'][0]:.5f}-{pg['real_spread'][1]:.5f}) "
                     f"| {pg['sim']:.5f} | {', '.join(map(str, pe['real']))} / {pe['sim']} "
                     f"| {', '.join(f'{w:.2f}' for w in r['cpu_wait_share'] if w is not None)} |")
    return "\n".join(lines)


def class_table(name: str, rows: list[dict]) -> str:
    """Admission per job class, real against the twin: where one-pod jobs and gangs mix, the overall
    median can fall between them and move severalfold with a few ranks."""
    lines = [f"| {name} case | class | jobs | real p50 s | sim p50 | ratio | real p99 s | sim p99 | ratio |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]

    def f(v):
        return "n/a" if v is None else f"{v:.3g}"
    for r in rows:
        for cls, c in r.get("by_class", {}).items():
            lines.append(f"| {r['case']} | {cls} | {c['jobs']} | {f(c['real_p50'])} | {f(c['sim_p50'])} | "
                         f"{f(c['p50_ratio'])} | {f(c['real_p99'])} | {f(c['sim_p99'])} | {f(c['p99_ratio'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedulers", default="kube-gang,coscheduling")
    ap.add_argument("--cases", default="fit,heldout")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--out", type=Path, default=Path("results/fidelity"))
    ap.add_argument("--rerun", action="store_true", help="run the real backend even where a run is on disk")
    ap.add_argument("--no-run", action="store_true", help="compare only the real runs on disk; start no backend")
    ap.add_argument("--write-profile", type=Path, default=None)
    args = ap.parse_args()
    profile = load_profile(args.profile)
    validation = {}
    for name in args.schedulers.split(","):
        rows = []
        for key in args.cases.split(","):
            role, path = CASES[key]
            sc = load(str(path), profile=profile)
            r = case(sc, name, role, args.out / name / key, args.time_scale, args.runs, profile,
                     reuse=not args.rerun, start=not args.no_run)
            if r is not None:
                rows.append(r)
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        doc = {"scheduler": name, "profile": profile.name, "time_scale": args.time_scale, "rows": rows}
        (out / "fidelity.json").write_text(json.dumps(doc, indent=1) + "\n")
        text = table(name, rows) + "\n\n" + gang_table(name, rows) + "\n\n" + class_table(name, rows)
        (out / "fidelity.md").write_text(text + "\n")
        print(text)
        if any(r["role"] == "held_out" for r in rows):
            validation[name] = {"held_out": held_out_summary(rows),
                                "fit_cases": [r["case"] for r in rows if r["role"] == "fit"],
                                "rows": [{k: r[k] for k in ROW} for r in rows]}
    if args.write_profile and validation:
        target = load_profile(str(args.write_profile))
        target.validation.update(validation)
        args.write_profile.write_text(dump(target))


if __name__ == "__main__":
    main()
