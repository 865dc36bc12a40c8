"""gangstorm calibrate --schedulers X: fit the simulated scheduler to the real one and validate it.

STARTS THE REAL BACKENDS on this machine (slurmctld + slurmd, raylets, kube-apiserver + etcd +
kube-scheduler or Volcano on KWOK), several times: every fitting case (two or more scenarios x two
or more scales) and the held-out cases (a larger scale, a chaos scenario), each --repeats times.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from loadgen.cli.common import UsageError, add_overrides, check_output_file, parse_schedulers, positive_int

# Sizes at which each real backend runs unsaturated on a 2-core, 24 GB machine (docs/fidelity.md);
# Ray's fleets are smaller (a raylet takes ~150 MiB and seconds to boot), so its jobs churn faster
# to give as many samples per run.
SCALES = {"kube": [32, 64], "volcano": [32, 64], "slurm": [32, 64], "ray": [8, 16]}
HELD_OUT_SCALE = {"kube": 128, "volcano": 128, "slurm": 128, "ray": 24}
CHURN = {"ray": 16.0}
SCENARIOS = ["scenarios/calibrate-steady.yaml", "scenarios/calibrate-queue.yaml"]
HELD_OUT_SCENARIO = "scenarios/calibrate-evictions.yaml"


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="fit the simulated schedulers to the real ones (starts real backends)",
                       description=__doc__)
    p.add_argument("--schedulers", required=True, help="comma-separated subset of kube,volcano,ray,slurm")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"fitting scenarios, at least two (default {','.join(SCENARIOS)})")
    p.add_argument("--scales", help="fitting fleet sizes, at least two (default per scheduler: "
                   + "; ".join(f"{k} {','.join(map(str, v))}" for k, v in SCALES.items()) + ")")
    p.add_argument("--held-out-scale", type=positive_int, help="held-out fleet size (default per scheduler: "
                   + ", ".join(f"{k} {v}" for k, v in HELD_OUT_SCALE.items()) + ")")
    p.add_argument("--held-out-scenario", default=HELD_OUT_SCENARIO,
                   help=f"held-out chaos scenario (default {HELD_OUT_SCENARIO})")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="real runs per case (default 3, the minimum for a spread)")
    add_overrides(p, "seed", "churn", "duration_h", "time_scale", time_scale=20.0)   # small fleets: 20 virtual s/s
    p.add_argument("--profile", default="local", help="profile to start from (default local)")
    p.add_argument("--write-profile", help="profile file to write or update (default <out>/profile.yaml)")
    p.add_argument("--out", help="where real runs, fidelity.md and calibration.json go (default results/calibration)")
    p.add_argument("--runs-only", action="store_true", help="only the real runs (kept for a later fit with the "
                   "same --out): bank machine time while the models change")
    p.add_argument("--validate-only", action="store_true", help="keep the profile's fitted values and only "
                   "re-validate them (with the runs' measured costs) on the kept runs: after a model change that "
                   "added measured mechanisms, whether the earlier fit still holds; with --anchors, the profile's "
                   "anchors run again and its validation rewritten, nothing copied or refitted")
    p.add_argument("--keep", help="comma-separated profile sections the runs must not re-measure: "
                   "control_plane keeps the apiserver and etcd costs another scheduler's runs measured (the "
                   "Kubernetes-family schedulers share them)")
    p.add_argument("--anchors", action="store_true",
                   help="fit to published figures instead of real runs (builds the reference profile; "
                        "starts no backend): see `gangstorm profile anchors`")
    p.set_defaults(func=main)


def _ints(text: str, flag: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if len(vals) < 2 or min(vals) < 1:
        raise UsageError(f"{flag}: expected at least two positive fleet sizes, got {text!r}")
    return vals


def refuse_uncalibrated(names: list[str]) -> None:
    """Schedulers with no calibration cases yet (kube-gang, coscheduling: docs/kube-gang.md)."""
    missing = [n for n in names if n not in SCALES]
    if missing:
        raise UsageError(f"--schedulers: no calibration cases for {', '.join(missing)} yet "
                         f"(calibrate knows {', '.join(SCALES)})")


def anchors_main(args) -> int:
    from loadgen.calibration.anchors import calibrate_to_anchors, revalidate
    from loadgen.input.profile import load as load_profile
    from loadgen.model.registry import SCHEDULERS
    names = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    if not names or set(names) - set(SCHEDULERS):
        raise UsageError(f"--schedulers: expected a comma-separated list of {', '.join(SCHEDULERS)}, got "
                         f"{args.schedulers!r}")
    refuse_uncalibrated(names)
    path = Path(args.write_profile or Path(args.out or "results/calibration") / "reference.yaml")
    base = load_profile(args.profile)
    command = "gangstorm calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    if args.validate_only:            # the profile as it is, its anchors run again: nothing copied or refitted
        report = revalidate(base, names)
        _write_anchor_profile(path, base, report, names)
        return 0
    prof, report = calibrate_to_anchors(
        names, base, path.stem, f"production-class hardware: throughput fitted to published figures, the rest "
        f"from profile {base.name} ({base.description})", command)
    if path.exists():
        # into an existing profile: only the named schedulers' sections and validation are replaced
        kept = load_profile(str(path))
        for name in names:
            kept.params[name] = prof.params[name]
            kept.validation[name] = prof.validation[name]
        prof = kept
    _write_anchor_profile(path, prof, report, names)
    return 0


def _write_anchor_profile(path: Path, prof, report: dict, names: list[str]) -> None:
    from loadgen.calibration.anchors import ROOT
    from loadgen.calibration.uncalibrated import add_reasons
    from loadgen.input.profile import dump
    from loadgen.input.profile import load as load_profile
    reasons = add_reasons(prof, load_profile("local"), ROOT, names)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(prof))
    for entry in report.values():
        for r in entry["anchors"]:
            print(f"{r['anchor']:<40} {r['role']:<9} published {r['figure']:>9.1f}  sim {r['sim']:>9.1f}  "
                  f"ratio {r['ratio']}" + (f"  OUTSIDE because {r['outside_because']}" if r.get("outside_because")
                                           else ""))
    for name, entry in reasons.items():
        print(f"{name}: uncalibrated: {entry['uncalibrated_because']}")
    print(f"profile: {path}")


def main(args) -> int:
    from loadgen.calibration.calibrate import Options, calibrate
    from loadgen.input.scenario import load
    from loadgen.output.storage import check_out_dir
    check_out_dir("results/calibration" if args.out is None else args.out, reuse=True)   # keeps real runs to reuse
    if args.write_profile:
        check_output_file(args.write_profile, "--write-profile")
    if args.anchors:
        return anchors_main(args)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if len(scenarios) < 2:
        raise UsageError(f"--scenarios: expected at least two scenario files, got {args.scenarios!r}")
    for path in scenarios + [args.held_out_scenario]:
        load(path)                                   # one-line error for a missing or bad file
    names = parse_schedulers(args.schedulers, load(scenarios[0]))
    refuse_uncalibrated(names)
    scales = {n: _ints(args.scales, "--scales") if args.scales else SCALES[n] for n in names}
    held = {n: args.held_out_scale or HELD_OUT_SCALE[n] for n in names}
    for n in names:
        if held[n] in scales[n]:
            raise UsageError(f"--held-out-scale: expected a size not among the fitting scales, got {held[n]}")
    opts = Options(schedulers=names, scenarios=scenarios, scales=scales, held_out_scale=held,
                   held_out_scenario=args.held_out_scenario, repeats=args.repeats,
                   duration_h=args.duration_h, time_scale=args.time_scale, base_profile=args.profile,
                   churn={n: args.churn or CHURN.get(n) for n in names}, runs_only=args.runs_only,
                   out_dir=Path(args.out or "results/calibration"), seed=args.seed,
                   write_profile=Path(args.write_profile) if args.write_profile else None,
                   keep=tuple(x for x in (args.keep or "").split(",") if x), validate_only=args.validate_only,
                   command="gangstorm calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:]))
    out = calibrate(opts, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(out["table"])
    if out["profile"]:
        print(f"profile: {out['profile']}\nresults: {opts.out_dir}/fidelity.md, calibration.json")
    return 0
