"""The gang-specific costs of kube-gang and coscheduling, read off the real schedulers' own metrics in
the fitting runs of tools/gangs/fidelity.py (results/fidelity/<scheduler>/fit/run*/summary.json).

    python -m loadgen.calibration.gangcosts [--dir results/fidelity] [--write-profile fakes/profiles/local.yaml]
        [--no-fit] [--time-scale 20]

Measured, for the twins (fakes/kubegang/sim.py), means over the runs:
- bind_ms: the scheduler's Bind extension point (scheduler_framework_extension_point_duration_seconds
  {extension_point="Bind"}, sum / count). Under coscheduling's retry loop it is mostly the wait in the
  scheduler's client rate limiter, which the loop's event writes saturate.
- gang_objects_ms: the apiserver's POST latency for the objects the client creates before a job's
  pods (apiserver_request_duration_seconds: podgroups; kube-gang also workloads), summed.
- client_create_ms: the gap between a gang's pod creates returning, as the real adapter's client
  records it (control_plane.client_pace_ms), when every fitting run has it.

Fitted, as for every other scheduler (loadgen/calibration/fit.py, the same search and loss as
`gangstorm calibrate`), with the measured costs in place: observe_ms and release_ms, to the real runs'
admission p50/p99 and allocation utilization on the fitting case only; tools/gangs/heldout.yaml is
left for validation.

Beside them, what the twins do not take as parameters but the docs quote (costs.json): the pod-group
cycle (scheduler_podgroup_* in v1.36.1), Permit waits by result (scheduler_permit_wait_duration_seconds),
unschedulable attempts per second and their mean cost, the client's rate-limiter wait, and the share of
each run in which a task waited for a CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import mean

from loadgen.calibration.calibrate import with_values
from loadgen.calibration.fidelity import real_stats
from loadgen.calibration.fit import Free, case_loss, search
from loadgen.calibration.twin import twin
from loadgen.input.profile import Param, Profile, dump
from loadgen.input.profile import load as load_profile
from loadgen.input.scenario import load as load_scenario

SCHEDULERS = ("kube-gang", "coscheduling")
VERSION = {"kube-gang": "kube-scheduler v1.36.1 (gates GenericWorkload, GangScheduling)",
           "coscheduling": "sp-scheduler v0.34.7 (kube-scheduler v1.34.1)"}
GANG_OBJECTS = {"kube-gang": ("create_workload", "create_podgroup"), "coscheduling": ("create_podgroup",)}


def _runs(directory: Path, name: str) -> list[dict]:
    paths = sorted((directory / name / "fit").glob("run*/summary.json"))
    return [json.loads(p.read_text())["schedulers"][name] for p in paths]


def _avg(values) -> float | None:
    vals = [v for v in values if v is not None]
    return round(mean(vals), 4) if vals else None


def figures(result: dict) -> dict:
    """One real run's gang figures, from its scheduler and apiserver metrics."""
    cp = result["control_plane"]
    sc, api = cp["scheduler"], cp["apiserver"]["request_ms_mean"]
    attempts = sc["attempts_scheduled"] + sc["attempts_unschedulable"] + sc["attempts_error"]
    out = {"bind_ms": sc["extension_point_ms_mean"].get("Bind"),
           "serial_cycle_ms": sc["serial_cycle_ms_mean"],
           "apiserver_ms": {k: api.get(k) for k in ("create_pod", "bind_pod", "create_podgroup", "create_workload",
                                                     "patch_podgroup_status")},
           "attempts_unschedulable": sc["attempts_unschedulable"],
           "unschedulable_per_s": round(sc["attempts_unschedulable"] / result["wall_s"], 1),
           "attempt_ms_mean_all": round(sc["attempt_s_total"] / attempts * 1000, 4) if attempts else None,
           "client_requests_per_s": round(sc["client_requests"] / result["wall_s"], 1),
           "client_requests_by_method": sc.get("client_requests_by_method"),
           "client_limiter_wait_s": sc["client_rate_limiter_wait_s"],
           "limiter_wait_ms_per_request": round(sc["client_rate_limiter_wait_s"] / max(sc["client_requests"], 1)
                                                * 1000, 3),
           "cpu_wait_share": cp.get("host_cpu", {}).get("cpu_wait_share"),
           "host_busy_share": cp.get("host_cpu", {}).get("busy_share"), "wall_s": result["wall_s"]}
    out.update({k: v for k, v in sc.items() if k.startswith(("podgroup_", "permit_wait_"))})
    return out


def costs(name: str, runs: list[dict]) -> dict[str, tuple[float, str]]:
    """parameter -> (value, source) for the profile, from the fitting runs' figures."""
    figs = [figures(r) for r in runs]
    where = (f"{VERSION[name]} on 4 KWOK nodes of this 2-core machine, {len(runs)} runs of tools/gangs/fit.yaml "
             f"(results/fidelity/{name}/fit/run*/summary.json)")
    bind = _avg(f["bind_ms"] for f in figs)
    objects = GANG_OBJECTS[name]
    per = {k: _avg(f["apiserver_ms"].get(k) for f in figs) for k in objects}
    missing = [k for k, v in per.items() if v is None]
    if bind is None or missing:
        raise SystemExit(f"{name}: the fitting runs lack {'Bind' if bind is None else ', '.join(missing)}")
    found = {
        "bind_ms": (bind, "scheduler_framework_extension_point_duration_seconds{Bind} sum / count, mean over the "
                          f"runs (per run: {', '.join(str(f['bind_ms']) for f in figs)} ms), which includes the wait "
                          "in the scheduler's client rate limiter (qps 50; rest_client_rate_limiter_duration_seconds "
                          f"per request, mean: {_avg(f['limiter_wait_ms_per_request'] for f in figs)} ms); " + where),
        "gang_objects_ms": (round(sum(per.values()), 4),
                            "apiserver_request_duration_seconds POST "
                            + " + ".join(f"{k.split('_', 1)[1]}s {v} ms" for k, v in per.items())
                            + ", mean over the runs: the client creates them before the job's pods; " + where),
    }
    paces = [r.get("control_plane", {}).get("client_pace_ms") for r in runs]
    if paces and all(p is not None for p in paces):     # runs before the adapter recorded it keep the profile's
        found["client_create_ms"] = (_avg(paces), "the real adapter's client: median gap between a gang's pod "
                                     f"creates returning, mean over the runs (per run: {', '.join(map(str, paces))} "
                                     "ms); " + where)
    return found


FIT_SCENARIO = "tools/gangs/fit.yaml"
# the ranges kube's observation and release lags are fitted in (loadgen/calibration/measure.py FREE)
FREE = [("observe_ms", 0.1, 5000.0), ("release_ms", 0.1, 20000.0)]


def with_measured(profile: Profile, found: dict[str, dict[str, tuple[float, str]]], command: str) -> Profile:
    out = with_values(profile, {})
    for name, params in found.items():
        for key, (value, src) in params.items():
            out.params[name][key] = Param(value, "ms", "measured", src, command)
    return out


def fit(name: str, runs: list[dict], profile: Profile, time_scale: float,
        scenario: str = FIT_SCENARIO) -> tuple[dict[str, float], float, int]:
    """observe_ms and release_ms of the twin, fitted to the real fitting runs (mean of the repeats)."""
    stats = real_stats(runs)
    sc = load_scenario(scenario, profile=profile)
    free = [Free(name, key, lo, hi) for key, lo, hi in FREE]

    def objective(values):
        return case_loss(stats, twin(sc, name, time_scale, with_values(profile, values)))

    start = {(f.section, f.key): profile.params[name][f.key].value for f in free}
    best, loss, evals = search(objective, start, free, max_evals=30 * len(free) + 20)
    return {k: round(v, 6) for (_, k), v in best.items()}, loss, evals


def write_profile(path: Path, found: dict[str, dict[str, tuple[float, str]]], fitted: dict[str, dict[str, float]],
                  command: str) -> None:
    prof = with_measured(load_profile(str(path)), found, command)
    for name, values in fitted.items():
        for key, v in values.items():
            prof.params[name][key] = Param(v, "ms", "fitted",
                                           f"fitted to admission p50/p99 and alloc util of the real runs of "
                                           f"{FIT_SCENARIO} (results/fidelity/{name}/fit), with the measured "
                                           f"{', '.join(found[name])} in place", command)
    path.write_text(dump(prof))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.calibration.gangcosts", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("results/fidelity"))
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--write-profile", type=Path, default=None)
    ap.add_argument("--profile", default="local", help="the profile the fit starts from (its other values kept)")
    ap.add_argument("--no-fit", action="store_true", help="measure only")
    ap.add_argument("--time-scale", type=float, default=20.0, help="the real runs' (tools/gangs/fidelity.py)")
    args = ap.parse_args(argv)
    command = "python -m loadgen.calibration.gangcosts" + (f" --write-profile {args.write_profile}"
                                                           if args.write_profile else "")
    base = load_profile(str(args.write_profile) if args.write_profile else args.profile)
    found, fitted = {}, {}
    for name in args.schedulers.split(","):
        runs = _runs(args.dir, name)
        if not runs:
            raise SystemExit(f"{name}: no fitting runs under {args.dir / name / 'fit'} (tools/gangs/fidelity.py)")
        found[name] = costs(name, runs)
        doc = {"scheduler": name, "runs": [figures(r) for r in runs],
               "measured": {k: {"value": v, "source": s} for k, (v, s) in found[name].items()}}
        if not args.no_fit:
            fitted[name], loss, evals = fit(name, runs, with_measured(base, {name: found[name]}, command),
                                            args.time_scale)
            doc["fitted"] = {**fitted[name], "loss": round(loss, 6), "evaluations": evals}
        (args.dir / name / "costs.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=1))
    if args.write_profile:
        write_profile(args.write_profile, found, fitted, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
