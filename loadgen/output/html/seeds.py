"""report.html of a run over several seeds (and of a ceiling search over several seeds).

Each figure is shown as its median over the seeds with the order-statistic interval, the per-seed
values as dots beside it, and the head-to-head tests (output/aggregate.py wrote them into
summary.json). Numbers carry data-metric paths into summary.json's `schedulers` as in page.py, e.g.
`kube.spread.admission_p99.median`, `kube.by_class.large.spread.admission_p99.high`; a ceiling's
start at the top of ceiling.json (`ceiling.kube.spread.ceiling_churn_multiplier.median`). Every
name that comes from a scenario or a trace (class names) is escaped here; figures draw it as text.
"""
from __future__ import annotations

from loadgen.model.numbers import readable as num  # html/fmt's num became numbers.readable (dedupe)
from loadgen.output.aggregate import ADMISSION, ALL, BUDGET_FIGURES, BY_NAME, CEILING, RESOURCE, Figure
from loadgen.output.html.data import CeilingData, RunData
from loadgen.output.html.fmt import cell, text
from loadgen.output.html.page import _doc, _fig, _footer, _g, _missing, _profile_section, shown_classes
from loadgen.output.markdown_seeds import SIMILAR, marks, too_few

HEAD = ADMISSION + RESOURCE


def _spread(r: dict, cls: str) -> dict:
    if cls == ALL:
        return r.get("spread") or {}
    return ((r.get("by_class") or {}).get(cls) or {}).get("spread") or {}


def iv_cell(entry: dict | None, path: str, mark: str = "") -> str:
    """median [low, high] in one cell, each number a data-metric span (path ends at the figure)."""
    if not entry or entry.get("median") is None:
        return '<td class="num">n/a</td>'
    def span(k):
        v = entry.get(k)
        return f'<span data-metric="{text(path)}.{k}" data-value="{text(_json(v))}">{text(num(v))}</span>'
    flag = (f' <span class="ns" title="not significantly different from the best in this column">{mark}</span>'
            if mark else "")
    return f'<td class="num">{span("median")}{flag}<br><span class="iv">[{span("low")}, {span("high")}]</span></td>'


def _times(counts: dict | None) -> str:
    """"a x3, b x1" from {a: 3, b: 1}."""
    return ", ".join(f"{k} x{x}" for k, x in (counts or {}).items())


def _json(v) -> str:
    import json
    return json.dumps(v)


def _seeds_meta(s: dict) -> str:
    seeds = s.get("seeds") or {}
    planned, done = seeds.get("planned") or [], seeds.get("completed") or []
    return (f"{len(planned)} seeds ({text(', '.join(map(str, planned)))}; {text(seeds.get('rule'))}), "
            f"{len(done)} completed")


def _partial(s: dict) -> str:
    if s.get("complete"):
        return ""
    seeds = s.get("seeds") or {}
    parts = []
    for key, label in (("running", "running"), ("interrupted", "interrupted"), ("failed", "failed")):
        v = seeds.get(key)
        if v:
            parts.append(f"{label}: {', '.join(map(str, v))}")
    return (f'<p class="banner" id="partial"><b>Partial result</b> ("complete": false): the figures are those of '
            f'the {len(seeds.get("completed") or [])} completed seeds of {len(seeds.get("planned") or [])}'
            + (f" ({text('; '.join(parts))})" if parts else "") + ".</p>")


def render_run(data: RunData) -> str:
    from loadgen.output.html import figures
    s = data.summary
    names = data.schedulers
    fl, wl, prof = s.get("fleet") or {}, s.get("workload") or {}, s.get("profile") or {}
    sig = s.get("significance") or {}
    n = len((s.get("seeds") or {}).get("completed") or [])
    body = [f"<header><h1>gangstorm run {text(s.get('run_id'))}</h1>",
            f'<p class="meta">Scenario <b>{text(s.get("scenario"))}</b>, {_seeds_meta(s)}; '
            f'{_g(fl.get("nodes"))} nodes x '
            f'{_g(fl.get("gpus_per_node"))} GPUs; median {_g(wl.get("jobs"))} jobs per seed over '
            f'{_g(s.get("duration_h"))} h '
            f'at {_g(wl.get("churn_multiplier"))}x churn (offered load {_g(wl.get("offered_load"))}); schedulers '
            f'{text(", ".join(names) or "none")}; profile {text(prof.get("name"))}; wall {_g(s.get("wall_s"))} s. '
            f'Each seed is a complete run in <code>seeds/&lt;seed&gt;/</code>.</p>', _partial(s), "</header>",
            '<nav><a href="#summary">summary</a><a href="#spread">spread</a><a href="#classes">by class</a>'
            '<a href="#budgets">budgets</a><a href="#significance">head to head</a><a href="#seeds">seeds</a>'
            '<a href="#profile">calibration profile</a></nav>']
    body.append('<section id="summary"><h2>Head to head over seeds</h2>')
    if not names:
        body.append(_missing("no seed has finished yet"))
    else:
        body.append(f"<p>Each figure: median over the {n} seeds [low, high], the order-statistic interval around the "
                    f"median ({text((s.get('spread') or {}).get('method'))}). {text(_mark_note(sig, n))}</p>")
        body.append(_figure_table(s, names, HEAD, ALL, "spread"))
        slo = s.get("slo") or {}
        body.append("<p>SLO: admission p99 &lt;= " + text(num(slo.get("admission_p99_s"))) + " s. " + text(", ".join(
            f"{nm}: met on {(r.get('slo_met_seeds') or {}).get('met', 0)} of "
            f"{(r.get('slo_met_seeds') or {}).get('of', n)} seeds"
            for nm, r in s["schedulers"].items())) + ".</p>")
    body.append("</section>")

    body.append('<section id="spread"><h2>Spread over seeds</h2>')
    panels = [(f.label, f.unit == "s", {nm: (r.get("spread") or {}).get(f.name) for nm, r in s["schedulers"].items()})
              for f in HEAD]
    svg = figures.seed_spread("spread-all", "headline figures over seeds", panels, names) if names else None
    body.append(_fig(svg, "Per scheduler: one dot per seed, the shaded bar the interval, the tick the median "
                          "(latencies on a log scale, below 1 ms drawn at 1 ms).") if svg
                else _missing("no values yet"))
    body.append("</section>")

    classes, figured, left_out = shown_classes(s, names)       # bounded, whatever the number of classes
    body.append('<section id="classes"><h2>Admission by class</h2>')
    if left_out or len(figured) < len(classes):
        body.append(_missing(f"{len(classes) + left_out:,} job classes: this page shows the {len(classes):,} with the "
                             f"most jobs in tables and draws the {len(figured)} largest; summary.json holds every "
                             "class"))
    for c in classes:
        body.append(f'<div data-class="{text(c)}"><h3>class {text(c)}</h3>'
                    + _figure_table(s, names, ADMISSION, c, f"by_class.{c}.spread") + "</div>")
    cpanels = [(f"{c}: {f.label}", True, {nm: _spread(r, c).get(f.name) for nm, r in s["schedulers"].items()})
               for c in classes if c in figured for f in ADMISSION]
    svg = figures.seed_spread("spread-classes", "admission by class over seeds", cpanels, names) if cpanels else None
    if svg:
        body.append(_fig(svg, "Admission quantiles per class: one dot per seed, the interval and the median."))
    body.append("</section>")

    body.append('<section id="budgets"><h2>Budgets after admission</h2>')
    have = [nm for nm in names if (s["schedulers"][nm].get("spread") or {}).get("time_to_training_p50")]
    if have:
        body.append(_figure_table(s, have, BUDGET_FIGURES, ALL, "spread"))
    else:
        body.append(_missing("summary.json has no budgets"))
    body.append("</section>")

    body.append('<section id="significance"><h2>Head to head: differences against the seed-to-seed spread</h2>')
    body.append(pairs_table(s))
    body.append("</section>")
    body.append(_seeds_section(s, names))
    body.append(_profile_section(data))
    body.append(_footer(data.dir, ["summary.json", "summary.md"]))
    return _doc(f"gangstorm report {s.get('run_id')}", body)


def _mark_note(sig: dict, n: int) -> str:
    if not sig:
        return ""
    if not sig.get("testable"):
        return too_few(n, sig)
    return (f"{SIMILAR}: not significantly different from the best value in its column ({sig.get('test')}, alpha "
            f"{sig.get('alpha')}); these seeds cannot tell them apart.")


def _figure_table(s: dict, names: list[str], figures_: tuple[Figure, ...], cls: str, prefix: str) -> str:
    """Rows: figures; columns: schedulers; cells: median [low, high] with the not-significant mark."""
    rows = ["<div class=\"scroll\"><table><thead><tr><th>figure</th>"
            + "".join(f'<th class="num">{text(nm)}</th>' for nm in names) + "</tr></thead><tbody>"]
    summary_marks = {f.name: marks(s, cls, f) for f in figures_}
    for f in figures_:
        cells = []
        for nm in names:
            entry = _spread(s["schedulers"][nm], cls).get(f.name)
            cells.append(iv_cell(entry, f"{nm}.{prefix}.{f.name}", summary_marks[f.name].get(nm, "")))
        rows.append(f"<tr><th>{text(f.label)}</th>" + "".join(cells) + "</tr>")
    counts = []
    for nm in names:
        r = s["schedulers"][nm]
        adm = r.get("admission_s") if cls == ALL else ((r.get("by_class") or {}).get(cls) or {}).get("admission_s")
        path = "admission_s.count" if cls == ALL else f"by_class.{cls}.admission_s.count"
        counts.append(cell((adm or {}).get("count"), f"{nm}.{path}"))
    if any(f.count for f in figures_):
        rows.append("<tr><th>n (median admitted)</th>" + "".join(counts) + "</tr>")
    return "".join(rows) + "</tbody></table></div>"


def pairs_table(s: dict) -> str:
    sig = s.get("significance") or {}
    pairs = sig.get("pairs") or []
    n = sig.get("seeds", 0)
    if not pairs:
        return _missing("no pair of schedulers to compare")
    if not sig.get("testable"):
        return f"<p>{text(too_few(n, sig))}</p>"
    cols = list(dict.fromkeys((p["a"], p["b"]) for p in pairs))
    rows: dict[tuple[str, str], dict] = {}
    for p in pairs:
        rows.setdefault((p["class"], p["figure"]), {})[(p["a"], p["b"])] = p
    out = [f"<p>Median of the per-seed differences B - A over the {text(n)} common seeds and the p-value of the "
           f"{text(sig.get('test'))}. <span class=\"ns\">n.s.</span>: not significant at alpha "
           f"{text(sig.get('alpha'))}, "
           f"within the seed-to-seed spread (not evidence that the two are equal); otherwise the better one is named. "
           f"{text(sig.get('meaning'))}.</p>",
           '<div class="scroll"><table><thead><tr><th>class</th><th>figure</th>'
           + "".join(f'<th class="num">{text(b)} - {text(a)}</th>' for a, b in cols) + "</tr></thead><tbody>"]
    for (cls, fig), by_pair in rows.items():
        f = BY_NAME.get(fig)
        cells = []
        for key in cols:
            p = by_pair.get(key)
            if p is None:
                cells.append('<td class="pair">n/a</td>')
                continue
            p_text = text(f"{p['p_value']:.3g}")
            verdict = (f'<span class="sig">{text(p["better"])} better</span>' if p["significant"] and p.get("better")
                       else '<span class="sig">differ</span>' if p["significant"] else '<span class="ns">n.s.</span>')
            cells.append(f'<td class="pair" data-pair="{text(p["a"])}|{text(p["b"])}|{text(cls)}|{text(fig)}" '
                         f'data-significant="{text(_json(p["significant"]))}">{text(num(p["median_diff"]))} '
                         f'(p {p_text}) {verdict}</td>')
        out.append(f"<tr><td>{text(cls)}</td><th>{text(f.label if f else fig)}</th>" + "".join(cells) + "</tr>")
    return "".join(out) + "</tbody></table></div>"


def _seeds_section(s: dict, names: list[str]) -> str:
    seeds = s.get("seeds") or {}
    done = seeds.get("completed") or []
    out = ['<section id="seeds"><h2>Seeds</h2><p>Each seed is a complete run: its own summary.json, summary.md, '
           'jobs.csv and timeseries.csv (<code>gangstorm report seeds/&lt;seed&gt;</code> draws its page).</p>',
           "<table><thead><tr><th>seed</th>" + "".join(f'<th class="num">{text(nm)} p99 s</th>' for nm in names)
           + "".join(f'<th class="num">{text(nm)} alloc util</th>' for nm in names)
           + "<th>files</th></tr></thead><tbody>"]
    for seed in done:
        row = [f"<tr><th>{text(seed)}</th>"]
        for fig in ("admission_p99", "alloc_util"):
            for nm in names:
                v = (((s["schedulers"][nm].get("spread") or {}).get(fig) or {}).get("values") or {}).get(str(seed))
                row.append(cell(v, f"{nm}.spread.{fig}.values.{seed}"))
        row.append(f'<td><a href="seeds/{text(seed)}/summary.md">summary.md</a> '
                   f'<a href="seeds/{text(seed)}/summary.json">summary.json</a></td></tr>')
        out.append("".join(row))
    out.append("</tbody></table>")
    for key in ("running", "interrupted"):
        if seeds.get(key):
            out.append(f"<p>{text(key.capitalize())}: {text(', '.join(map(str, seeds[key])))}.</p>")
    if seeds.get("failed"):
        out.append("<p>Failed: " + text("; ".join(f"{k}: {v}" for k, v in seeds["failed"].items())) + ".</p>")
    return "".join(out) + "</section>"


# --- a ceiling over seeds ---------------------------------------------------------------------
def render_ceiling(data: CeilingData) -> str:
    from loadgen.output.html import figures
    c = data.ceiling
    slo = c.get("slo") or {}
    ceil = {n: v for n, v in (c.get("ceiling") or {}).items() if isinstance(v, dict)}
    names = list(ceil)
    n = len((c.get("seeds") or {}).get("completed") or [])
    body = ["<header><h1>gangstorm ceiling " + text(c.get("scenario")) + "</h1>",
            f'<p class="meta">Scenario <b>{text(c.get("scenario"))}</b>, {_seeds_meta(c)}; backend '
            f'{text(c.get("backend", "sim"))}; {text(num(c.get("nodes")))} nodes; {text(num(c.get("jobs_per_point")))} '
            f'jobs per point; SLO: admission p99 &lt;= {text(num(slo.get("admission_p99_s")))} s and at most 1% never '
            f'admitted. Each seed is a complete search in <code>seeds/&lt;seed&gt;/</code>.</p>', _partial(c),
            "</header>", '<section id="ceiling"><h2>Ceiling per scheduler over seeds</h2>']
    if not ceil:
        body.append(_missing("no seed's search has finished yet"))
    else:
        sig = c.get("significance") or {}
        body.append(f"<p>Median over the {n} seeds [low, high] ({text((c.get('spread') or {}).get('method'))}). "
                    f"{text(_mark_note(sig, n))}</p>")
        m = marks({"schedulers": ceil, "significance": sig}, ALL, CEILING)
        body.append("<table><thead><tr><th>scheduler</th><th class=\"num\">ceiling (churn x)</th>"
                    "<th class=\"num\">jobs/s at it</th><th>saturated at the break (seeds)</th><th>search cap (seeds)"
                    "</th></tr></thead><tbody>")
        for nm, v in ceil.items():
            sp = v.get("spread") or {}
            body.append(f"<tr><th>{text(nm)}</th>"
                        + iv_cell(sp.get(CEILING.name), f"ceiling.{nm}.spread.{CEILING.name}", m.get(nm, ""))
                        + iv_cell(sp.get("jobs_per_s"), f"ceiling.{nm}.spread.jobs_per_s")
                        + f"<td>{text(_times(v.get('saturated_seeds')))}</td>"
                        + f"<td>{text(_times(v.get('cap_seeds')) or '')}</td></tr>")
        body.append("</tbody></table>")
        svg = figures.seed_spread("ceiling-seeds", "ceiling over seeds",
                                  [("ceiling (churn x)", False, {nm: (v.get("spread") or {}).get(CEILING.name)
                                                                 for nm, v in ceil.items()})], names)
        body.append(_fig(svg, "One dot per seed, the shaded bar the interval, the tick the median."))
        body.append(pairs_table({"significance": sig}))
    body.append("</section>")
    body.append(_footer(data.dir, ["ceiling.json"]))
    return _doc(f"gangstorm ceiling {c.get('scenario')}", body)
