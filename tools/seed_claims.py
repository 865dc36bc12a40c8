"""The per-seed table and claim counts of docs/default-scenario.md, from a `--seeds` run folder.

    python tools/seed_claims.py results/<run>

Reads each results/<run>/seeds/<seed>/summary.json and prints, per seed, admission p50/p99/p99.9 of
the four schedulers, kube's partial-gang GPU-hours and the cost; then, for each claim the README's
head-to-head makes, on how many seeds it holds and on which it does not.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = ["kube", "volcano", "ray", "slurm"]


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else (f"{x:.1f}" if x >= 1 else f"{x:.2f}")


def _order(d: dict, key) -> list[str]:
    return sorted(NAMES, key=lambda s: key(d[s]))


def _adm(q):
    return lambda s: s["admission_s"][q]


def _budget(b, q):
    return lambda s: s["budgets"][b]["all"][q]


def _cost(s):
    return s["cost_per_million_gpu_hours"]


CLAIMS = {
    "admission p50: kube < ray < slurm < volcano":
        lambda d: _order(d, _adm("p50")) == ["kube", "ray", "slurm", "volcano"],
    "admission p99: ray lowest": lambda d: _order(d, _adm("p99"))[0] == "ray",
    "admission p99.9: kube highest": lambda d: _order(d, _adm("p999"))[-1] == "kube",
    "partial-gang GPU-h: kube only": lambda d: d["kube"]["partial_gang_gpu_hours"] > 0
    and all(d[s]["partial_gang_gpu_hours"] == 0 for s in NAMES[1:]),
    "placement-to-ready p99: kube highest": lambda d: _order(d, _budget("placement_to_ready", "p99"))[-1] == "kube",
    "time to training p99: slurm < ray < volcano < kube":
        lambda d: _order(d, _budget("time_to_training", "p99")) == ["slurm", "ray", "volcano", "kube"],
    "cost: slurm < ray < kube < volcano": lambda d: _order(d, _cost) == ["slurm", "ray", "kube", "volcano"],
}


def main(run: Path) -> None:
    seeds = sorted((p for p in (run / "seeds").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    print("| seed | admission p50 s: k / v / r / s | p99 s | p99.9 s | kube partial-gang GPU-h "
          "| $ per 1M GPU-h, thousands: k / v / r / s |")
    print("|---:|---|---|---|---:|---|")
    missed: dict[str, list[str]] = {c: [] for c in CLAIMS}
    for p in seeds:
        d = json.loads((p / "summary.json").read_text())["schedulers"]
        def q(k: str, d=d) -> str:
            return " / ".join(_num(d[s]["admission_s"][k]) for s in NAMES)
        cost = " / ".join(f"{_cost(d[s]) / 1000:,.0f}" for s in NAMES)
        print(f"| {p.name} | {q('p50')} | {q('p99')} | {q('p999')} | {d['kube']['partial_gang_gpu_hours']:,.1f} "
              f"| {cost} |")
        for claim, holds in CLAIMS.items():
            if not holds(d):
                missed[claim].append(p.name)
    print()
    for claim, miss in missed.items():
        print(f"- {claim}: {len(seeds) - len(miss)} of {len(seeds)} seeds"
              + (f" (not seed {', '.join(miss)})" if miss else ""))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
