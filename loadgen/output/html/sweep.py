"""report.html of a sweep folder (loadgen/output/sweep.py): per scenario, profile and fleet size,
admission p99 against the churn multiplier per scheduler, each point the median over the group's
seeds with its interval as an error bar (where the grid has seeds), the SLO as a line; then the
groups' table. Numbers carry data-metric paths into summary.json's `groups` (`groups.3.figures.
admission_p99.median`), as the run page's do into `schedulers`.
"""
from __future__ import annotations

import json
from pathlib import Path

from loadgen.model.numbers import readable
from loadgen.output.html.fmt import cell, text
from loadgen.output.html.page import _doc, _fig, _footer, _missing
from loadgen.output.storage import atomic_write
from loadgen.output.sweep import SWEEP_FILE

REPORT = "report.html"
CURVES = (("admission_p99", "admission p99 (s)", True), ("alloc_util", "alloc util", False))
COLS = (("p50 s", "admission_p50"), ("p99 s", "admission_p99"), ("p99.9 s", "admission_p999"),
        ("alloc util", "alloc_util"), ("partial-gang GPU-h", "partial_gang_gpu_hours"))


def is_sweep(folder: str | Path) -> bool:
    return (Path(folder) / SWEEP_FILE).is_file()


def build(folder: str | Path, out: str | Path | None = None) -> Path:
    from loadgen.output.sweep import _json
    d = Path(folder)
    summary = _json(d / "summary.json")
    path = Path(out) if out is not None else d / REPORT
    atomic_write(path, render(summary, d))
    return path


def tables(summary: dict) -> dict[tuple, list[tuple[int, dict]]]:
    """(scenario, profile, nodes) -> [(index in groups, group)], in grid order."""
    out: dict[tuple, list[tuple[int, dict]]] = {}
    for i, g in enumerate(summary.get("groups") or []):
        out.setdefault((g["scenario"], g["profile"], g["nodes"]), []).append((i, g))
    return out


def curve(key: str, title: str, groups: list[tuple[int, dict]], figure: str, log: bool, slo_s) -> str | None:
    """The figure against churn per scheduler: median with an interval bar; None when nothing to draw."""
    from loadgen.output.html import figures as F
    series: dict[str, list[tuple[float, dict]]] = {}
    for _, g in groups:
        e = (g.get("figures") or {}).get(figure)
        if e and e.get("median") is not None:
            series.setdefault(g["scheduler"], []).append((g["churn"], e))
    if not series:
        return None
    order = list(series)
    floor = 1e-3 if log else None
    clamp = (lambda v: max(v, floor)) if floor else (lambda v: v)
    with F._ctx():
        fig = F._figure(7.5, 4.4)
        ax = fig.add_subplot()
        for name, pts in series.items():
            pts.sort(key=lambda p: p[0])
            c = F.color(name, order)
            xs = [x for x, _ in pts]
            ys = [clamp(e["median"]) for _, e in pts]
            ax.plot(xs, ys, "o-", color=c, label=F.plain(name), markersize=4)
            if any(e["n"] > 1 for _, e in pts):
                lo = [max(y - clamp(e["low"]), 0) for y, (_, e) in zip(ys, pts)]
                hi = [max(clamp(e["high"]) - y, 0) for y, (_, e) in zip(ys, pts)]
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor=c, elinewidth=1.2, capsize=3, alpha=0.8)
        if figure == "admission_p99" and isinstance(slo_s, (int, float)) and slo_s > 0:
            ax.axhline(slo_s, color="black", linestyle="--", linewidth=1.0, label=f"SLO: p99 <= {slo_s:g} s")
        churns = sorted({x for pts in series.values() for x, _ in pts})
        if len(churns) > 1 and churns[0] > 0 and churns[-1] / churns[0] >= 8:
            ax.set_xscale("log")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("churn multiplier")
        ax.set_ylabel(title + (" (log scale)" if log else ""))
        ax.set_title(F.plain(title + " against churn"))
        ax.legend(loc="best")
        return F.to_svg(fig, key, title + " against churn")


def render(summary: dict, d: Path) -> str:
    c = summary.get("cells") or {}
    ex = summary.get("executor") or {}
    body = [f"<header><h1>gangstorm sweep {text(summary.get('sweep'))}</h1>",
            f'<p class="meta">Spec <b>{text(summary.get("spec"))}</b>; '
            f'{cell(c.get("planned"), "cells.planned", "b", "")} '
            f'cells, {cell(c.get("done"), "cells.done", "b", "")} done; executor {text(ex.get("kind"))} '
            f'({text(ex.get("detail"))}); this invocation {text(readable(summary.get("wall_s")))} s wall; '
            f'backend {text(summary.get("backend"))}.</p>'
            + (f'<p class="meta">{text(summary.get("description"))}</p>' if summary.get("description") else "")
            + "</header>"]
    if not summary.get("complete"):
        body.append('<p class="banner" id="partial"><b>Partial sweep</b> ("complete": false): '
                    + text(", ".join(f"{c.get(s)} {s}" for s in ("failed", "interrupted", "running", "pending")
                                     if c.get(s)))
                    + '. Rerun the same command with the same --out to resume; the figures below are over the done '
                      'cells only.</p>')
    groups = tables(summary)
    if not groups:
        body.append(_missing("summary.json holds no groups"))
    for t, ((scenario, profile, nodes), items) in enumerate(groups.items()):
        slo = next((g.get("slo") for _, g in items if g.get("slo")), None) or {}
        body.append(f"<section><h2>{text(scenario)}, profile {text(profile)}, {text(readable(nodes))} nodes</h2>")
        body.append('<div class="grid">')
        for figure, title, log in CURVES:
            svg = curve(f"sweep-{t}-{figure}", title, items, figure, log, slo.get("admission_p99_s"))
            seeds = max((len(g["seeds"]) for _, g in items), default=0)
            note = (f"Each point: the median over the group's seeds (up to {seeds}); bars: its interval "
                    "(the range below 6 seeds)." if seeds > 1 else "One seed per point.")
            body.append(_fig(svg, note) if svg else _missing(f"no {title} to draw (no cell done)"))
        body.append("</div>")
        body.append("<table><thead><tr><th>scheduler</th><th class=\"num\">churn x</th><th class=\"num\">seeds</th>"
                    + "".join(f'<th class="num">{h}</th>' for h, _ in COLS)
                    + '<th class="num">SLO met</th></tr></thead><tbody>')
        for i, g in sorted(items, key=lambda ig: (ig[1]["scheduler"], ig[1]["churn"])):
            row = [f"<tr><th>{text(g['scheduler'])}</th>", cell(g["churn"], f"groups.{i}.churn"),
                   f'<td class="num">{len(g["seeds"])}/{g["planned"]}</td>']
            for _, name in COLS:
                e = (g.get("figures") or {}).get(name)
                if not e:
                    row.append('<td class="num">n/a</td>')
                    continue
                path = f"groups.{i}.figures.{name}"
                iv = "" if e["n"] <= 1 else (f'<br><span class="iv">[{_span(e, "low", path)}, {_span(e, "high", path)}]'
                                             "</span>")
                row.append(f'<td class="num">{_span(e, "median", path)}{iv}</td>')
            row.append(f'<td class="num">{g["slo_met"]}/{len(g["seeds"])}</td></tr>')
            body.append("".join(row))
        body.append("</tbody></table></section>")
    body.append('<p class="meta">Each cell is a run folder under <code>cells/</code>; <code>index.jsonl</code> lists '
                "them with their status and digest; <code>gangstorm report cells/&lt;name&gt;</code> draws one.</p>")
    body.append(_footer(d, ["summary.json", "index.jsonl", SWEEP_FILE]))
    return _doc(f"gangstorm sweep {summary.get('sweep')}", body)


def _span(e: dict, k: str, path: str) -> str:
    v = e.get(k)
    return f'<span data-metric="{text(path)}.{k}" data-value="{text(json.dumps(v))}">{text(readable(v))}</span>'
