"""The per-seed table, claim counts and paired tests of docs/default-scenario.md, from a `--seeds` run.

    python tools/seed_claims.py results/<run>

Takes the schedulers from the run's summary.json (or its first seed's) and reads each
results/<run>/seeds/<seed>/summary.json. Prints, per seed, the figures the README's head-to-head
ranks, one cell per figure with the schedulers' values in the run's order; then, for each claim
whose schedulers all ran, on how many seeds it holds (and on which it does not), each named
scheduler's median [interval] over the seeds, and the paired exact Wilcoxon test of every
difference the claim states, from loadgen.measure.spread (the test and interval summary.md uses,
docs/seeds.md).

A claim is an order of one figure, such as `kueue = slurm < ray < volcano < kube-gang = coscheduling`:
on a seed it holds when every scheduler of a group is strictly below every scheduler of the next
group. Over the seeds each of those pairs should differ significantly in that direction, and two
schedulers joined by `=` should not (a claim of no significant difference, which no single seed can
check); `,` says nothing about the two it joins. A bound (`volcano, ray, slurm = 0`) holds on a seed
when every named scheduler's value meets it, and has no paired test.
"""
from __future__ import annotations

import json
import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadgen.measure.spread import median_interval, min_seeds_for, paired_difference


def _get(*path: str) -> Callable[[dict], float | None]:
    def read(s: dict) -> float | None:
        for key in path:
            if not isinstance(s, dict) or s.get(key) is None:
                return None
            s = s[key]
        return float(s)
    return read


FIGURES: dict[str, Callable[[dict], float | None]] = {
    "admission p50 s": _get("admission_s", "p50"),
    "admission p99 s": _get("admission_s", "p99"),
    "admission p99.9 s": _get("admission_s", "p999"),
    "large-gang admission p99 s": _get("by_class", "large", "admission_s", "p99"),
    "partial-gang GPU-h": _get("partial_gang_gpu_hours"),
    "placement-to-ready p99 s": _get("budgets", "placement_to_ready", "all", "p99"),
    "time to training p50 s": _get("budgets", "time_to_training", "all", "p50"),
    "time to training p99 s": _get("budgets", "time_to_training", "all", "p99"),
    "alloc util": _get("alloc_util"),
    "$ per 1M GPU-h": _get("cost_per_million_gpu_hours"),
    "large gangs in one leaf": _get("placement", "large_in_one_leaf_share"),
}

# The per-seed table: figure, its column heading, and how a value is shown there.
COLUMNS = [
    ("admission p50 s", "admission p50 s", None),
    ("large-gang admission p99 s", "large-gang p99 s", None),
    ("partial-gang GPU-h", "partial-gang GPU-h", None),
    ("placement-to-ready p99 s", "placement-to-ready p99 s", None),
    ("time to training p99 s", "time to training p99 s", None),
    ("$ per 1M GPU-h", "$ per 1M GPU-h, thousands", lambda v: f"{v / 1000:,.0f}"),
    ("large gangs in one leaf", "large gangs in one leaf, %", lambda v: f"{100 * v:.1f}"),
]


def _num(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:,.0f}" if abs(x) >= 100 else (f"{x:.1f}" if abs(x) >= 1 else f"{x:.2f}")


@dataclass(frozen=True)
class Order:
    """`figure: a = b < c, d`: groups separated by '<', names in a group by '=' or ','."""
    figure: str
    chain: str

    def groups(self) -> list[list[list[str]]]:
        """Each group as its '='-joined parts: 'a = b, c' -> [['a', 'b'], ['c']]."""
        return [[[n.strip() for n in part.split("=")] for part in g.split(",")] for g in self.chain.split("<")]

    def names(self) -> list[str]:
        return [n for g in self.groups() for part in g for n in part]

    def holds(self, v: dict[str, float | None]) -> bool:
        flat = [[n for part in g for n in part] for g in self.groups()]
        return all(v[a] is not None and v[b] is not None and v[a] < v[b]
                   for lo, hi in zip(flat, flat[1:]) for a in lo for b in hi)

    def stated_pairs(self) -> list[tuple[str, str, str]]:
        """(a, '<', b): a significantly below b; (a, '=', b): not significantly different."""
        flat = [[n for part in g for n in part] for g in self.groups()]
        below = [(a, "<", b) for lo, hi in zip(flat, flat[1:]) for a in lo for b in hi]
        level = [(part[i], "=", part[j]) for g in self.groups() for part in g
                 for i in range(len(part)) for j in range(i + 1, len(part))]
        return level + below


@dataclass(frozen=True)
class Bound:
    """`figure: a, b <= 0.03` (or =, >=): every named scheduler's value, rounded to the limit's
    decimals as the README states it, meets the limit on the seed."""
    figure: str
    who: str
    op: str
    limit: str

    @property
    def chain(self) -> str:
        return f"{self.who} {self.op} {self.limit}"

    def names(self) -> list[str]:
        return [n.strip() for n in self.who.split(",")]

    def holds(self, v: dict[str, float | None]) -> bool:
        test = {"=": operator.eq, "<=": operator.le, ">=": operator.ge}[self.op]
        places = len(self.limit.partition(".")[2])
        return all(v[n] is not None and test(round(v[n], places), float(self.limit)) for n in self.names())

    def stated_pairs(self) -> list[tuple[str, str, str]]:
        return []


# The README's head-to-head for make run's six (issue 28), each sentence that ranks or bounds a
# figure. Where a README line is a median ("p50 0.05 s"), its order against the others is the claim.
SIX = [
    Order("admission p50 s", "ray < kube-gang, coscheduling < slurm < volcano < kueue"),
    Order("admission p50 s", "coscheduling < kube-gang"),
    Order("large-gang admission p99 s", "slurm = kueue, volcano < kube-gang = coscheduling < ray"),
    Order("partial-gang GPU-h", "kube-gang < coscheduling < kueue"),
    Bound("partial-gang GPU-h", "volcano, ray, slurm", "=", "0"),
    Bound("partial-gang GPU-h", "kube-gang", "<=", "0.03"),
    Bound("partial-gang GPU-h", "coscheduling", "<=", "0.13"),
    Order("placement-to-ready p99 s", "kueue, ray, slurm, volcano < kube-gang = coscheduling"),
    Order("placement-to-ready p99 s", "kueue, ray, slurm < volcano"),
    Order("time to training p50 s", "kube-gang < coscheduling"),
    Order("time to training p99 s", "kueue = slurm < ray < volcano < kube-gang = coscheduling"),
    Order("alloc util", "kube-gang < coscheduling"),
    Order("$ per 1M GPU-h", "kueue < slurm < ray < coscheduling < kube-gang < volcano"),
    Order("large gangs in one leaf", "kube-gang, coscheduling, volcano < ray < kueue, slurm"),
]

# The four of issue 27 (kube, volcano, ray, slurm), as the first tables of docs/default-scenario.md
# state them. Issue 32's re-measured Ray twin moved ray's p50 below kube's.
FOUR = [
    Order("admission p50 s", "kube < ray < slurm < volcano"),
    Order("admission p99 s", "ray < kube, volcano, slurm"),
    Order("admission p99.9 s", "ray, volcano, slurm < kube"),
    Order("partial-gang GPU-h", "volcano, ray, slurm < kube"),
    Bound("partial-gang GPU-h", "volcano, ray, slurm", "=", "0"),
    Order("placement-to-ready p99 s", "volcano, ray, slurm < kube"),
    Order("time to training p99 s", "slurm < ray < volcano < kube"),
    Order("$ per 1M GPU-h", "slurm < ray < kube < volcano"),
]



def claims_for(names: list[str]) -> list[Order | Bound]:
    """The claims whose schedulers all ran, those of the set most of whose schedulers ran first;
    a claim two sets make is listed once."""
    ran = set(names)

    def share(claims: list) -> float:
        theirs = {n for c in claims for n in c.names()}
        return len(theirs & ran) / len(theirs)
    ordered = sorted([SIX, FOUR], key=share, reverse=True)
    return list(dict.fromkeys(c for claims in ordered for c in claims if set(c.names()) <= ran))


def _signed(x: float) -> str:
    return f"{x:+,.0f}" if abs(x) >= 100 else f"{x:+.3g}"


def _seeds_word(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _pair_line(a: str, rel: str, b: str, values: dict[str, dict[int, float | None]]) -> tuple[bool, str]:
    d = paired_difference(values[a], values[b])
    shown = f"p {d.p_value:.3g}, {b} - {a} {_signed(d.median_diff)}" if d.median_diff is not None else "no common seeds"
    if rel == "=":
        ok = not d.significant
        verdict = "n.s., as stated" if ok else "significant, NOT as stated"
    else:
        ok = d.significant and (d.median_diff or 0) > 0
        verdict = ("as stated" if ok else "REVERSED" if d.significant and (d.median_diff or 0) < 0
                   else "n.s., NOT as stated")
    return ok, f"  - {a} {rel} {b}: {shown} ({verdict})"


def _interval(xs: dict[int, float | None]) -> str:
    iv = median_interval(xs.values())
    return "none" if iv is None else f"{_num(iv.median)} [{_num(iv.low)}, {_num(iv.high)}]"


def read_run(run: Path) -> tuple[list[str], dict[int, dict]]:
    """The run's schedulers (in its summary.json's order) and each seed's per-scheduler results.
    A run kept in the repo may hold only the seeds' summary.json files (results/default-scenario):
    the schedulers are then those of its first seed, which every seed shares."""
    seeds = sorted(int(p.name) for p in (run / "seeds").iterdir() if p.name.isdigit())
    per_seed = {s: json.loads((run / "seeds" / str(s) / "summary.json").read_text())["schedulers"] for s in seeds}
    top = run / "summary.json"
    names = list(json.loads(top.read_text())["schedulers"] if top.exists() else per_seed[seeds[0]])
    return names, per_seed


def main(run: Path) -> None:
    names, per_seed = read_run(run)
    value = {fig: {n: {s: read(per_seed[s].get(n)) for s in per_seed} for n in names} for fig, read in FIGURES.items()}

    print("Each cell: " + " / ".join(names) + ".")
    print()
    print("| seed | " + " | ".join(head for _, head, _ in COLUMNS) + " |")
    print("|---:|" + "---|" * len(COLUMNS))
    for s in per_seed:
        cells = [" / ".join("–" if (x := value[fig][n][s]) is None else (show or _num)(x) for n in names)
                 for fig, _, show in COLUMNS]
        print(f"| {s} | " + " | ".join(cells) + " |")

    testable = len(per_seed) >= min_seeds_for()
    print()
    if not testable:
        print(f"Paired tests: untestable with {len(per_seed)} seeds (the test needs {min_seeds_for()}).")
    for claim in claims_for(names):
        v = value[claim.figure]
        missed = [s for s in per_seed if not claim.holds({n: v[n][s] for n in claim.names()})]
        lines = [_pair_line(a, rel, b, v) for a, rel, b in claim.stated_pairs()] if testable else []
        tests = f"; paired tests as stated: {sum(ok for ok, _ in lines)} of {len(lines)}" if lines else ""
        print(f"- {claim.figure}: {claim.chain}: holds on {len(per_seed) - len(missed)} of {len(per_seed)} seeds"
              + (f" (not {_seeds_word(missed)})" if missed else "") + tests)
        print("  - median [interval]: " + "; ".join(f"{n} {_interval(v[n])}" for n in claim.names()))
        if isinstance(claim, Bound):
            top = {n: max((s for s in per_seed if v[n][s] is not None), key=lambda s, n=n: v[n][s], default=None)
                   for n in claim.names()}
            print("  - highest: " + "; ".join(f"{n} {v[n][s]:.3g} (seed {s})" for n, s in top.items() if s is not None))
        for _, line in lines:
            print(line)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
