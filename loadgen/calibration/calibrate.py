"""`gangstorm calibrate`: real runs -> measured and fitted parameters -> held-out validation -> a profile.

Every real run is kept under <out>/real/<case>/run<k>/ and reused when present, so an interrupted
calibration resumes and a re-fit needs no new real runs (--reuse).
"""
from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadgen.calibration import fidelity, measure
from loadgen.calibration.cases import Case, matrix
from loadgen.calibration.fit import case_loss, search
from loadgen.calibration.twin import real_run, twin
from loadgen.input.overrides import load_with_overrides
from loadgen.input.profile import Param, Profile, dump
from loadgen.input.profile import load as load_profile

Progress = Callable[[str], None]


@dataclass
class Options:
    schedulers: list[str]
    scenarios: list[str]
    scales: dict[str, list[int]]          # per scheduler: fitting scales
    held_out_scale: dict[str, int]
    held_out_scenario: str
    repeats: int = 3
    duration_h: float | None = None        # None: the scenario's own
    churn: dict[str, float | None] | None = None   # per scheduler; None: the scenario's own
    runs_only: bool = False
    time_scale: float = 20.0
    base_profile: str = "local"
    out_dir: Path = Path("results/calibration")
    write_profile: Path | None = None
    command: str = ""
    seed: int | None = None
    backend: str = "real"                 # what the twins are compared with (tests use a stand-in)
    keep: tuple[str, ...] = ()            # profile sections the runs must not re-measure (e.g. control_plane)
    validate_only: bool = False           # keep the fitted values: only re-measure and re-validate


def case_scenario(case: Case, name: str, opts: Options, profile: Profile | str | None):
    return load_with_overrides(case.scenario, profile=profile, nodes=case.nodes, seed=opts.seed,
                               duration_h=opts.duration_h, churn=(opts.churn or {}).get(name))


def real_results(name: str, cases: list[Case], opts: Options, progress: Progress) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for case in cases:
        runs = []
        for k in range(opts.repeats):
            d = opts.out_dir / name / "real" / case.label / f"run{k + 1}"
            summary = d / "summary.json"
            if summary.exists() and json.loads(summary.read_text()).get("complete"):
                progress(f"{name} {case.label} run {k + 1}: reused {summary}")
            else:
                progress(f"{name} {case.label} run {k + 1}/{opts.repeats}: real backend ...")
                if d.exists():      # an interrupted run: its cluster state must not leak into the redo
                    shutil.rmtree(d)
                real_run(case_scenario(case, name, opts, opts.base_profile), name, d, opts.time_scale, opts.backend)
            runs.append(json.loads(summary.read_text())["schedulers"][name])
        out[case.label] = runs
    return out


# units of parameters a profile may lack (their schema default applies until one is measured)
NEW_UNITS = {"create_sigma": "ln", "write_sigma": "ln", "cycle_sigma": "ln"}


def _old(profile: Profile, section: str, key: str) -> Param:
    """The profile's parameter, or a blank one for a key it left to its schema default."""
    found = profile.params.setdefault(section, {}).get(key)
    return found if found is not None else Param(0.0, NEW_UNITS.get(key, ""), "measured", "")


def with_values(profile: Profile, values: dict[tuple[str, str], float]) -> Profile:
    p = copy.deepcopy(profile)
    for (section, key), v in values.items():
        old = _old(p, section, key)
        p.params[section][key] = Param(v, old.unit, old.provenance, old.source, old.command)
    return p


def remeasured(profile: Profile, name: str, case: Case, result: dict) -> Profile:
    """The profile with the component costs one real run measured itself (its fitted values kept).

    A twin on it predicts that run's admission tail from the machine as it was during the run: the
    measured costs (apiserver latency, scheduler attempt time, sdiag cycles, GCS latency) move with
    the machine's load and speed, while what was fitted (observation and release lags, mechanisms)
    should not. Admission itself is not an input, so the comparison stays a prediction."""
    return with_values(profile, {k: v for k, (v, _) in measure.extract(name, [(case, result)]).items()})


def calibrate_one(name: str, opts: Options, progress: Progress) -> dict:
    cases = matrix(opts.scenarios, opts.scales[name], opts.held_out_scale[name], opts.held_out_scenario)
    real = real_results(name, cases, opts, progress)
    if opts.runs_only:
        return {"scheduler": name, "cases": [c.__dict__ | {"label": c.label} for c in cases], "runs_only": True}
    stats = {c.label: fidelity.real_stats(real[c.label]) for c in cases}
    base = load_profile(opts.base_profile)
    measured = {k: v for k, v in measure.extract(name, [(c, r) for c in cases if c.role == "fit"
                                                         for r in real[c.label]]).items() if k[0] not in opts.keep}
    start_profile = with_values(base, {k: v for k, (v, _) in measured.items()})
    free = [] if opts.validate_only else measure.FREE[name]
    scenarios = {c.label: case_scenario(c, name, opts, None) for c in cases}

    def objective(values):
        prof = with_values(start_profile, values)
        return sum(case_loss(stats[c.label], twin(scenarios[c.label], name, opts.time_scale, prof))
                   for c in cases if c.role == "fit")

    start = {(f.section, f.key): start_profile.params[f.section][f.key].value for f in free}
    progress(f"{name}: fitting {', '.join(f.key for f in free)} on {sum(c.role == 'fit' for c in cases)} cases")
    best, loss, evals = search(objective, start, free, max_evals=30 * len(free) + 20)
    fitted = with_values(start_profile, best)
    rows = [fidelity.row(c.label, c.role, stats[c.label], twin(scenarios[c.label], name, opts.time_scale, fitted))
            for c in cases]
    return {"scheduler": name, "cases": [c.__dict__ | {"label": c.label} for c in cases], "real": stats,
            "measured": {f"{s}.{k}": {"value": v, "source": src} for (s, k), (v, src) in measured.items()},
            "fitted": {f"{s}.{k}": v for (s, k), v in best.items()}, "fit_loss": round(loss, 6),
            "fit_evaluations": evals, "rows": rows, "held_out": fidelity.held_out_summary(rows),
            "profile": fitted}


def profile_from(results: list[dict], base: Profile, opts: Options, name: str) -> Profile:
    """The base profile with each calibrated scheduler's measured and fitted values and validation."""
    out = copy.deepcopy(base)
    out.name = name
    for r in results:
        fit_cases = ", ".join(c["label"] for c in r["cases"] if c["role"] == "fit")
        for dotted, m in r["measured"].items():
            section, key = dotted.split(".", 1)
            old = _old(out, section, key)
            out.params[section][key] = Param(m["value"], old.unit, "measured", m["source"], opts.command)
        for dotted, v in r["fitted"].items():
            section, key = dotted.split(".", 1)
            old = out.params[section][key]
            out.params[section][key] = Param(round(v, 6), old.unit, "fitted",
                                             f"fitted to admission p50/p99 and alloc util of {opts.repeats} real "
                                             f"runs of each of {fit_cases}", opts.command)
        out.validation[r["scheduler"]] = {"held_out": r["held_out"],
                                          "fit_cases": [c["label"] for c in r["cases"] if c["role"] == "fit"],
                                          "rows": r["rows"]}
    return out


def calibrate(opts: Options, progress: Progress = print) -> dict:
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    results = [calibrate_one(name, opts, progress) for name in opts.schedulers]
    if opts.runs_only:
        return {"profile": None, "table": "real runs kept under " + str(opts.out_dir), "results": results}
    path = opts.write_profile or opts.out_dir / "profile.yaml"
    # Calibrating some schedulers into an existing profile keeps the others' values and validation.
    base = load_profile(str(path)) if path.exists() else load_profile(opts.base_profile)
    profile = profile_from(results, base, opts, base.name if path.exists() else path.stem)
    path.write_text(dump(profile))
    md = "\n\n".join(fidelity.table(r["scheduler"], r["rows"]) for r in results)
    (opts.out_dir / "fidelity.md").write_text(md + "\n")
    doc = {"command": opts.command, "profile_written": str(path),
           "schedulers": {r["scheduler"]: {k: v for k, v in r.items() if k != "profile"} for r in results}}
    (opts.out_dir / "calibration.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return {"profile": str(path), "table": md, "results": results}
