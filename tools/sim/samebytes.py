"""Same scenario and seed, same bytes: run a set of simulated cases in one tree, or compare two
trees' outputs (docs/performance.md, "Invariant").

    python tools/sim/samebytes.py run TREE OUT [--cases default|all|NAME,...]
    python tools/sim/samebytes.py compare OUT_A OUT_B

`run` runs each case as its own process in TREE (its own code first on the path) into OUT/<case>.
`compare` checks jobs.csv and timeseries.csv byte for byte, and summary.json once the run's own
wall-clock figures (`wall_s`, `run_id`) are dropped and the tree's path is taken out of the profile
paths; it prints one line per case and exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = "scenarios/baseline-3x.yaml"
CASES = {
    "default-s42-n2000": [DEFAULT, "--seed", "42", "--nodes", "2000"],
    "default-s1-n2000": [DEFAULT, "--seed", "1", "--nodes", "2000"],
    "default-s42-n10000": [DEFAULT, "--seed", "42"],
}
SMALL = ["--nodes", "200"]
# 32-node scenarios of the real schedulers: their own fleet, half an hour (a soak has no end of its own)
OWN_SIZE = {"ceiling-real": ["--duration-h", "0.5"], "soak-kube": ["--duration-h", "0.5"],
            "soak-kube-nodes": ["--duration-h", "0.5"]}
SKIP = {"openb-frag"}          # a `gangstorm frag` scenario: `run` refuses its 3,586 h trace whole
VOLATILE = {"wall_s", "run_id"}


def scenario_cases(tree: Path) -> dict[str, list[str]]:
    out = {}
    for path in sorted((tree / "scenarios").glob("*.yaml")):
        if path.stem in SKIP:
            continue
        out[f"{path.stem}-n200"] = [f"scenarios/{path.name}", *OWN_SIZE.get(path.stem, SMALL)]
    return out


def run(tree: Path, out: Path, which: str) -> int:
    cases = {**CASES, **scenario_cases(tree)}
    if which == "default":
        names = list(CASES)
    elif which == "all":
        names = list(cases)
    else:
        names = which.split(",")
    env = {**os.environ, "PYTHONPATH": str(tree)}     # GANGSTORM_TRACES passes through (openb-frag)
    failed = 0
    for name in names:
        dest = out / name
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", *cases[name], "--quiet",
                               "--out", str(dest)], cwd=tree, env=env, capture_output=True, text=True)
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        print(f"{name}: {status} ({time.monotonic() - t0:.0f} s)", flush=True)
        if proc.returncode:
            failed += 1
            (out / f"{name}.err").write_text(proc.stdout + proc.stderr)
    return 1 if failed else 0


def _normal(value, root: str):
    if isinstance(value, dict):
        return {k: _normal(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normal(v, root) for v in value]
    if isinstance(value, str) and root and value.startswith(root):
        return value[len(root):]
    return value


def _summary(path: Path):
    data = json.loads(path.read_text())
    root = str(Path(data.get("profile", {}).get("path", "")).parents[2]) if data.get("profile", {}).get("path") else ""
    return _normal(data, root)


def compare(a: Path, b: Path) -> int:
    differ = 0
    for case in sorted(p.name for p in a.iterdir() if p.is_dir()):
        other = b / case
        if not other.is_dir():
            print(f"{case}: missing in {b}")
            differ += 1
            continue
        bad = [name for name in ("jobs.csv", "timeseries.csv", "summary.json")
               if not (a / case / name).is_file() or not (other / name).is_file()]
        if bad:
            print(f"{case}: MISSING {', '.join(bad)}")
            differ += 1
            continue
        for name in ("jobs.csv", "timeseries.csv"):
            if (a / case / name).read_bytes() != (other / name).read_bytes():
                bad.append(name)
        if _summary(a / case / "summary.json") != _summary(other / "summary.json"):
            bad.append("summary.json")
        print(f"{case}: {'identical' if not bad else 'DIFFERENT ' + ', '.join(bad)}")
        differ += bool(bad)
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("tree", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--cases", default="all")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.tree.resolve(), args.out.resolve(), args.cases)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
