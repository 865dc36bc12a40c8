"""summary.md of a run over several seeds: each figure as median [low, high] over the seeds, and
which head-to-head differences exceed the seed-to-seed spread. Rendered from summary.json alone
(output.aggregate wrote its spread and significance); numbers printed as markdown.py prints them."""
from __future__ import annotations

from loadgen.measure import spread
from loadgen.model.numbers import fixed as _fmt  # markdown's _fmt became numbers.fixed (dedupe)
from loadgen.output.aggregate import ADMISSION, ALL, BUDGET_FIGURES, BY_NAME, RESOURCE, Figure
from loadgen.output.markdown import held_out_text, refusals

SIMILAR = "≈"
DIGITS = {"admission_p50": 2, "alloc_util": 3, "fragmentation": 4, "cost_per_million_gpu_hours": 0}
PERCENT = {"scheduling_tax"}
HEAD_COLUMNS = ADMISSION + RESOURCE


def md(name) -> str:
    """A name from a scenario or trace inside a table row: a | or a line break would end the cell."""
    return str(name).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _digits(name: str) -> int:
    return DIGITS.get(name, 1)


def value(name: str, v) -> str:
    """One number of a figure, as the single-seed table prints it (tax as a percentage)."""
    if v is None:
        return "n/a"
    if name in PERCENT:
        return f"{v * 100:.2f}%"
    return _fmt(float(v), _digits(name))


def signed(name: str, d: float) -> str:
    """A difference with its sign, none when it prints as zero."""
    t = value(name, abs(d))
    return t if not any(c in "123456789" for c in t) else ("+" if d > 0 else "-") + t


def cell(name: str, entry: dict | None, mark: str = "") -> str:
    """median [low, high] of an interval entry, with the not-significant mark."""
    if not entry or entry.get("median") is None:
        return "n/a"
    return (f"{value(name, entry['median'])} [{value(name, entry['low'])}, {value(name, entry['high'])}]"
            + (f" {mark}" if mark else ""))


def _spread_of(r: dict, cls: str) -> dict:
    if cls == ALL:
        return r.get("spread") or {}
    return ((r.get("by_class") or {}).get(cls) or {}).get("spread") or {}


def marks(summary: dict, cls: str, f: Figure) -> dict[str, str]:
    """Per scheduler, SIMILAR when its difference from the best median in the column is not
    significant; nothing when it is, for the best itself, or when the seeds are too few to test."""
    runs = summary["schedulers"]
    meds = {n: _spread_of(r, cls).get(f.name, {}).get("median") for n, r in runs.items()}
    meds = {n: m for n, m in meds.items() if m is not None}
    if len(meds) < 2:
        return {}
    order = list(runs)
    sign = 1 if f.lower_is_better else -1
    best = min(meds, key=lambda n: (sign * meds[n], order.index(n)))        # ties: the first listed
    out = {}
    for p in (summary.get("significance") or {}).get("pairs", []):
        if p["class"] != cls or p["figure"] != f.name or best not in (p["a"], p["b"]):
            continue
        other = p["b"] if p["a"] == best else p["a"]
        if p["significant"] is False:
            out[other] = SIMILAR
    return out


def coverage(n: int) -> float:
    iv = spread.median_interval(range(n))
    return iv.confidence if iv else 0.0


def render(summary: dict) -> str:
    wl, fl = summary.get("workload") or {}, summary["fleet"]
    seeds = summary.get("seeds") or {}
    done = seeds.get("completed") or []
    planned = seeds.get("planned") or []
    sig = summary.get("significance") or {}
    n = len(done)
    lines = [f"# gangstorm run {summary['run_id']}", "",
             f"Scenario `{summary['scenario']}`, {len(planned)} seeds ({_seed_list(planned)}: {seeds.get('rule')}), "
             f"{fl['nodes']:,} nodes x {fl['gpus_per_node']} GPUs (leaf {fl['leaf_size']}), "
             f"median {_fmt(wl.get('jobs'), 0)} jobs per seed over {summary['duration_h']} h at "
             f"{_fmt(wl.get('churn_multiplier'), 1)}x churn (offered load {_fmt(wl.get('offered_load'), 2)}). "
             + _state(summary) + f" Each seed's own results: {seeds.get('folders', 'seeds/<seed>/')}.", ""]
    if not summary["schedulers"]:
        return "\n".join(lines + ["No seed has finished yet.", ""])
    lines += [f"Each figure: median over the {n} completed seeds [low, high], the order-statistic interval around the "
              f"median (coverage {coverage(n) * 100:.1f}%" + (", the whole range: fewer than 6 seeds" if n < 6 else "")
              + "; docs/seeds.md).", ""]
    lines += _head_table(summary)
    lines += _test_line(sig, n)
    lines += refusal_lines(summary)
    lines += _class_table(summary)
    lines += _budget_table(summary)
    lines += significance_lines(summary)
    lines += _models(summary)
    slo = summary.get("slo") or {}
    if slo:
        lines += ["", f"SLO: admission p99 <= {slo.get('admission_p99_s')} s. " + ", ".join(
            f"{name}: met on {r.get('slo_met_seeds', {}).get('met', 0)} of "
            f"{r.get('slo_met_seeds', {}).get('of', n)} seeds"
            f" (median {'met' if r.get('slo_met') else 'MISSED'})" for name, r in summary["schedulers"].items())]
    lines += ["", "Placement, control plane, GPU activity and budgets per class: each seed's summary.md, or the "
              "medians in summary.json. Alloc util is time-averaged GPUs bound to jobs over the post-warm-up window; "
              "fragmentation the time-averaged share of all GPUs free but unusable by the smallest pending member; "
              "scheduling tax = (GPU-hours held by partial gangs + GPU-hours of runs cut short) / GPU-hours allocated; "
              "cost = price / (alloc util x active util) / (1 - scheduling tax) x 1e6.", ""]
    return "\n".join(lines)


def _seed_list(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]} to {seeds[-1]}"
    return ", ".join(map(str, seeds))


def _state(summary: dict) -> str:
    seeds = summary.get("seeds") or {}
    if summary.get("complete"):
        return f"Complete; wall {summary.get('wall_s', 0):.1f} s."
    parts = [f"{len(seeds.get('completed') or [])} of {len(seeds.get('planned') or [])} seeds completed"]
    if seeds.get("running"):
        parts.append("running: " + ", ".join(map(str, seeds["running"])))
    if seeds.get("interrupted"):
        parts.append("interrupted: " + ", ".join(map(str, seeds["interrupted"])))
    if seeds.get("failed"):
        parts.append("failed: " + ", ".join(f"{s} ({m})" for s, m in seeds["failed"].items()))
    return "INCOMPLETE (partial result: " + "; ".join(parts) + "); the figures are those of the completed seeds."


def _head_table(summary: dict) -> list[str]:
    cols = HEAD_COLUMNS
    lines = ["| scheduler | backend | " + " | ".join(_short(f) for f in cols) + " | n (median) | SLO met |",
             "|---|---|" + "---:|" * (len(cols) + 2)]
    m = {f.name: marks(summary, ALL, f) for f in cols}
    for name, r in summary["schedulers"].items():
        sp = r.get("spread") or {}
        met = r.get("slo_met_seeds") or {}
        lines.append(f"| {name} | {r.get('backend')} | "
                     + " | ".join(cell(f.name, sp.get(f.name), m[f.name].get(name, ""))
                                                              for f in cols)
                     + f" | {_fmt((r.get('admission_s') or {}).get('count'), 0)} | {met.get('met', 0)} of "
                       f"{met.get('of', 0)} |")
    return lines


def _short(f: Figure) -> str:
    return {"admission_p50": "admission p50 s", "admission_p99": "p99 s",
            "admission_p999": "p99.9 s"}.get(f.name, f.label)


def _test_line(sig: dict, n: int) -> list[str]:
    if not sig:
        return []
    if sig.get("testable"):
        return ["", f"{SIMILAR} after a value: not significantly different from the best value in its column "
                    f"({sig['test']}, alpha {sig['alpha']:g}): the {n} seeds cannot tell them apart. Values without "
                    f"it differ from the best beyond the seed-to-seed spread."]
    return ["", too_few(n, sig)]


def too_few(n: int, sig: dict) -> str:
    need = sig.get("min_seeds", spread.min_seeds_for(spread.ALPHA))
    return (f"With {n} seed{'s' if n != 1 else ''} no head-to-head difference can be significant: the exact "
            "signed-rank "
            f"test needs at least {need} paired seeds to reach p < {sig.get('alpha', spread.ALPHA):g} "
            f"(its smallest p-value with {n} is {2 / 2 ** n:.3g}). The intervals show the spread; nothing is marked "
            f"either way. Run --seeds {need} or more to test the differences.")


def refusal_lines(summary: dict) -> list[str]:
    lost = refusals(summary)
    if not lost:
        return []
    return ["", "Jobs refused or failed (median per seed; not in the admission figures):", ""] + [
        f"- **{name}**: {head}" for name, head, _ in lost]


def _class_table(summary: dict) -> list[str]:
    classes = sorted({c for r in summary["schedulers"].values() for c in (r.get("by_class") or {})})
    if not classes:
        return []
    lines = ["", "Admission by class (median [interval] seconds; n = median admitted jobs of the class per seed):", "",
             "| class | scheduler | p50 s | p99 s | p99.9 s | n |", "|---|---|---:|---:|---:|---:|"]
    for c in classes:
        m = {f.name: marks(summary, c, f) for f in ADMISSION}
        for name, r in summary["schedulers"].items():
            sp = _spread_of(r, c)
            count = ((((r.get("by_class") or {}).get(c) or {}).get("admission_s")) or {}).get("count")
            lines.append(f"| {md(c)} | {name} | " + " | ".join(cell("class", sp.get(f.name), m[f.name].get(name, ""))
                                                          for f in ADMISSION) + f" | {_fmt(count, 0)} |")
    return lines


def _budget_table(summary: dict) -> list[str]:
    runs = {n: r for n, r in summary["schedulers"].items() if r.get("spread", {}).get("time_to_training_p50")}
    if not runs:
        return []
    lines = ["", "Budgets from submission to training, all jobs (median [interval] seconds):", "",
             "| budget | scheduler | p50 s | p99 s | p99.9 s |", "|---|---|---:|---:|---:|"]
    zero = []
    for i in range(0, len(BUDGET_FIGURES), 3):
        trio = BUDGET_FIGURES[i:i + 3]
        label = trio[0].label.rsplit(" ", 2)[0]
        if all(v == 0 for r in runs.values() for f in trio
               for v in (r["spread"].get(f.name, {}).get("values") or {}).values()):
            zero.append(label)
            continue
        m = {f.name: marks(summary, ALL, f) for f in trio}
        for name, r in runs.items():
            lines.append(f"| {label} | {name} | "
                         + " | ".join(cell("budget", r["spread"].get(f.name), m[f.name].get(name, ""))
                                                             for f in trio) + " |")
    if zero:
        lines += ["", f"{' and '.join(zero).capitalize()}: 0 s on every seed for every scheduler."]
    return lines


def significance_lines(summary: dict) -> list[str]:
    """The pairwise table: per headline figure (all jobs, then admission per class) and pair, the
    median of the per-seed differences B - A, its p-value, and n.s. where it is within the spread."""
    sig = summary.get("significance") or {}
    pairs = sig.get("pairs") or []
    if not pairs or not sig.get("testable"):
        return []
    cols = list(dict.fromkeys((p["a"], p["b"]) for p in pairs))
    rows: dict[tuple[str, str], dict] = {}
    for p in pairs:
        if p["class"] != ALL and not p["figure"].startswith("admission_"):
            continue
        rows.setdefault((p["class"], p["figure"]), {})[(p["a"], p["b"])] = p
    lines = ["", f"Head to head: median of the per-seed differences B - A over the {sig['seeds']} common seeds, "
                 f"with the p-value of the {sig['test']}; n.s. = not significant at alpha {sig['alpha']:g} (within "
                 f"the seed-to-seed spread, not evidence of equality).", "",
             "| figure | " + " | ".join(f"{b} - {a}" for a, b in cols) + " |", "|---|" + "---:|" * len(cols)]
    same = []
    for (cls, fig), by_pair in rows.items():
        label = BY_NAME[fig].label if cls == ALL else f"{md(cls)}: {BY_NAME[fig].label}"
        if all(p["median_diff"] == 0 and p["p_value"] == 1 for p in by_pair.values()):
            same.append(label)
            continue
        cells = []
        for key in cols:
            p = by_pair.get(key)
            if p is None or p["median_diff"] is None:
                cells.append("n/a")
                continue
            text = signed(fig, p["median_diff"])
            cells.append(f"{text} (p {p['p_value']:.3g})" + ("" if p["significant"] else " n.s."))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if same:
        lines += ["", "Identical on every seed for every scheduler (not tested): " + ", ".join(same) + "."]
    return lines


def _models(summary: dict) -> list[str]:
    models = {n: r["model"] for n, r in summary["schedulers"].items() if isinstance(r.get("model"), dict)}
    if not models:
        return []
    prof = summary.get("profile") or {}
    lines = ["", f"Simulated schedulers timed by calibration profile `{prof.get('name')}` ({prof.get('path')}):", ""]
    for n, m in models.items():
        try:
            text = ("calibrated, " + held_out_text(m["held_out_error"])) if m.get("calibrated") else \
                "UNCALIBRATED: " + str(m.get("note", "")).split(": ", 1)[-1]
        except (KeyError, TypeError, IndexError):
            text = "see each seed's summary.md"
        lines.append(f"- **{n}**: {text}")
    return lines
