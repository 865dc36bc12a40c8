"""report.html assembled: inline CSS, tables straight from summary.json, figures as inline SVG.

Every number cell of a run report carries data-metric, a dotted path into summary.json's
`schedulers` (e.g. `kube.admission_s.p99`, `slurm.by_class.large.admission_s.count`), and
data-value, the value as JSON; its text is that value as loadgen.model.numbers.readable prints it.
A ceiling report's paths start at the top of ceiling.json (`ceiling.kube.ceiling_churn_multiplier`,
`points.kube.0.p99_s`).
No script, no external resource: the file opens from disk anywhere.
"""
from __future__ import annotations

import time
from typing import Any

from loadgen.model.numbers import readable
from loadgen.model.registry import SCHEDULERS
from loadgen.output.html.data import CeilingData, RunData, chaos_events, cp_columns
from loadgen.output.html.fmt import cell, text
from loadgen.output.markdown import REFUSALS_HEAD, refusals

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1240px;\
padding:16px 24px;color:#1b1b1b}
h1{font-size:22px;margin:.2em 0}h2{font-size:18px;margin:1.6em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:15px;margin:1.1em 0 .3em}
.meta{color:#444}.meta b{color:#1b1b1b}
.banner{background:#fff3cd;border:1px solid #e0c060;padding:8px 12px;margin:10px 0;border-radius:4px}
.missing{background:#f4f4f4;border-left:4px solid #999;padding:6px 10px;color:#333}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:13px}
th,td{border-bottom:1px solid #e3e3e3;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6;font-weight:600}th.num{white-space:normal}
th.num{text-align:right}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.src{font-size:11px;color:#555;max-width:520px}
figure.plot{margin:.4em 0 1.2em}figure.plot figcaption{font-size:12px;color:#555}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:8px 24px}
.cp{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,1fr));gap:4px 18px}
.cp table{width:100%}.cp td{word-break:break-all}.scroll{overflow-x:auto}.scroll table{width:100%}
.bad{color:#b00020;font-weight:600}.ok{color:#1e7b34}
nav a{margin-right:12px}
.iv{color:#555;font-size:11px}.ns{color:#8a6d00;font-weight:600}.sig{color:#1e7b34}td.pair{text-align:right;white-space:nowrap}
footer{margin-top:2em;color:#666;font-size:12px}
"""


def get(obj: Any, path: str) -> Any:
    """The value at a dotted path (list indices as numbers), None where it is absent."""
    for part in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def _doc(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{text(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


def _fig(svg: str | None, caption: str) -> str:
    if not svg:
        return ""
    return f'<figure class="plot">{svg}<figcaption>{text(caption)}</figcaption></figure>'


def _missing(msg: str) -> str:
    return f'<p class="missing">{text(msg)}</p>'


def render(data: RunData | CeilingData) -> str:
    from loadgen.output.html import seeds  # a run or a search over several seeds
    if isinstance(data, CeilingData):
        return (seeds.render_ceiling if "seeds" in data.ceiling else render_ceiling)(data)
    return (seeds.render_run if data.summary.get("spread") is not None else render_run)(data)


# --- a run ------------------------------------------------------------------------------------
SUMMARY_COLS = (("admitted", "jobs.admitted"), ("never admitted", "jobs.never_admitted"),
                ("p50 s", "admission_s.p50"), ("p99 s", "admission_s.p99"), ("p99.9 s", "admission_s.p999"),
                ("n", "admission_s.count"), ("max s", "admission_s.max"), ("alloc util", "alloc_util"),
                ("fragmentation", "fragmentation"), ("partial-gang GPU-h", "partial_gang_gpu_hours"),
                ("sched. tax", "scheduling_tax.tax"), ("$ per 1M GPU-h", "cost_per_million_gpu_hours"),
                ("SLO met", "slo_met"))
QUANTILE_COLS = (("p50 s", "p50"), ("p99 s", "p99"), ("p99.9 s", "p999"), ("n", "count"))


def render_run(data: RunData) -> str:
    from loadgen.output.html import figures
    s = data.summary
    names = data.schedulers
    body = [_run_header(data)]
    body.append('<nav><a href="#summary">summary</a><a href="#admission">admission</a><a href="#budgets">budgets</a>'
                '<a href="#placement">placement</a><a href="#timeline">timeline</a><a href="#control-plane">control '
                'plane</a><a href="#profile">calibration profile</a></nav>')

    # head to head
    body.append('<section id="summary"><h2>Head to head</h2>')
    if names:
        rows = ['<div class="scroll"><table><thead><tr><th>scheduler</th><th>backend</th>'
                + "".join(f'<th class="num">{text(h)}</th>' for h, _ in SUMMARY_COLS) + "</tr></thead><tbody>"]
        for n in names:
            r = s["schedulers"][n]
            rows.append(f"<tr><th>{text(n)}</th><td>{text(r.get('backend'))}</td>"
                        + "".join(cell(get(r, p), f"{n}.{p}") for _, p in SUMMARY_COLS) + "</tr>")
        rows.append("</tbody></table></div>")
        body += rows
        slo = s.get("slo") or {}
        body.append(f"<p>Admission latency = intended submit time to the last required member bound, exact "
                    f"nearest-rank quantiles over admitted jobs (n); never-admitted jobs are counted beside them. "
                    f"SLO: p99 &lt;= {text(readable(slo.get('admission_p99_s')))} s and at most 1% never admitted. "
                    f"Scheduling tax is a fraction of allocated GPU-hours.</p>")
        if lost := refusals(s):
            body.append(f'<p class="missing">{text(REFUSALS_HEAD)}</p><ul>' + "".join(
                f"<li><b>{text(n)}</b>: {text(head)}" + ("<ul>" + "".join(f"<li>{text(f)}</li>" for f in first)
                                                          + "</ul>" if first else "") + "</li>"
                for n, head, first in lost) + "</ul>")
    else:
        body.append(_missing(data.notes.get("run", "no scheduler results")))
    body.append("</section>")

    # admission
    body.append('<section id="admission"><h2>Admission latency</h2>')
    classes, figured, left_out = shown_classes(s, names)
    if data.admission is None or "admission" in data.notes:
        body.append(_missing(data.notes.get("admission", "")))
    if left_out or len(classes) > len(figured):
        body.append(_missing(f"{len(classes) + left_out:,} job classes: this page shows the {len(classes):,} with the "
                             f"most jobs in tables and draws the CDFs of the {len(figured)} largest; summary.json and "
                             f"jobs.csv hold every class"))
    body.append('<div class="grid">')
    for i, cls in enumerate(["all", *classes]):
        prefix = "admission_s" if cls == "all" else f"by_class.{cls}.admission_s"
        title = "all jobs" if cls == "all" else f"class {cls}"
        part = [f'<div class="panel" data-class="{text(cls)}"><h3>{text(title)}</h3>',
                "<table><thead><tr><th>scheduler</th>"
                + "".join(f'<th class="num">{h}</th>' for h, _ in QUANTILE_COLS)
                + '<th class="num">never admitted</th></tr></thead><tbody>']
        for n in names:
            r = s["schedulers"][n]
            never = "jobs.never_admitted" if cls == "all" else f"by_class.{cls}.never_admitted"
            part.append(f"<tr><th>{text(n)}</th>"
                        + "".join(cell(get(r, f"{prefix}.{k}"), f"{n}.{prefix}.{k}") for _, k in QUANTILE_COLS)
                        + cell(get(r, never), f"{n}.{never}") + "</tr>")
        part.append("</tbody></table>")
        if data.admission and (cls == "all" or cls in figured):
            lat = {n: data.admission[n].get(cls) for n in names if n in data.admission}
            if any(v is not None and len(v) for v in lat.values()):
                svg = figures.admission_cdf(f"cdf-{i}", f"Admission CDF: {title}", lat, names)
                part.append(_fig(svg, f"{title}: admission latency CDF per scheduler from jobs.csv "
                                      f"(drawn at ~300 ranks incl. the exact p50/p99/p99.9 marked)"))
        part.append("</div>")
        body += part
    body.append("</div></section>")

    body.append(_budgets_section(s, names, classes))
    body.append(_placement_section(s, names))
    body.append(_sharing_section(s, names))

    # timeline
    scale = {n: float(s["schedulers"][n].get("time_scale") or 1.0) for n in names}
    events, evictions = chaos_events(s)
    body.append('<section id="timeline"><h2>GPUs, gangs and queue over time</h2>')
    if data.series:
        note = (f" The {evictions:,} evictions are not marked: summary.json keeps their count, not their times."
                if evictions else "")
        body.append(_fig(figures.timeline("timeline", data.series, names, scale, events),
                         "From timeseries.csv: GPUs held by anything, GPUs held by gangs not fully bound, free GPUs "
                         "no member of the smallest pending job can use, and pending jobs; dotted lines are chaos "
                         "steps (shaded: nodes down or etcd refusing writes)." + note))
    else:
        body.append(_missing(data.notes.get("timeline", "no timeseries")))
    body.append(_chaos_table(s, names, events, evictions))
    body.append("</section>")

    # control plane
    body.append('<section id="control-plane"><h2>Control plane</h2>')
    cols = cp_columns(data.series)
    if cols:
        svg, zero = figures.control_plane("cp", data.series, names, scale, cols, events)
        body.append(_fig(svg, "From timeseries.csv's cp_* columns: gauges as sampled, counters (*_total) as a "
                              "rate per second between samples."))
        if zero:
            body.append(f"<p>Zero throughout for every scheduler: {text(', '.join(zero))}.</p>")
    elif data.series is not None:
        body.append(_missing("timeseries.csv has no cp_* columns (a run written by an older gangstorm, or a "
                             "backend that samples no control-plane gauges): final figures only"))
    else:
        body.append(_missing(data.notes.get("timeline", "no timeseries")))
    body.append("<h3>Final figures (summary.json)</h3><div class=\"cp\">")
    for n in names:
        cp = s["schedulers"][n].get("control_plane") or {}
        rows = [f"<div><table><thead><tr><th colspan=\"2\">{text(n)}</th></tr></thead><tbody>"]
        for path in _scalar_paths(cp):
            rows.append(f"<tr><td>{text(path)}</td>{cell(get(cp, path), f'{n}.control_plane.{path}')}</tr>")
        rows.append("</tbody></table></div>")
        body += rows
    body.append("</div></section>")

    body.append(_profile_section(data))
    body.append(_footer(data.dir, ["summary.json", "jobs.csv", "timeseries.csv"]))
    return _doc(f"gangstorm report {s.get('run_id')}", body)


MAX_CLASSES = 60           # per-class tables (a trace may give every job its own class)
MAX_CLASS_FIGURES = 12    # per-class CDFs: a figure costs about 0.1 s to draw


def shown_classes(s: dict, names: list[str]) -> tuple[list[str], set[str], int]:
    """The job classes the page shows in tables (at most MAX_CLASSES: those with the most jobs,
    listed by name), those of them that get a CDF (at most MAX_CLASS_FIGURES, the most jobs
    first), and how many classes it leaves out. Linear in the classes, whatever their number."""
    jobs: dict[str, int] = {}
    for n in names:
        for c, v in (s["schedulers"][n].get("by_class") or {}).items():
            count = v.get("jobs") if isinstance(v, dict) else None
            number = isinstance(count, (int, float)) and not isinstance(count, bool) and count == count
            jobs[str(c)] = max(jobs.get(str(c), 0), count if number else 0)
    jobs.pop("all", None)              # "all" is every job (input refuses it as a class name)
    by_size = sorted(jobs, key=lambda c: (-jobs[c], c))
    return sorted(by_size[:MAX_CLASSES]), set(by_size[:MAX_CLASS_FIGURES]), max(len(jobs) - MAX_CLASSES, 0)


BUDGETS = (("placement_to_ready", "Placement-to-ready", "admission to every member's container running: image "
             "pull on each member's node (shared registry, warm or cold cache) and container start"),
           ("rendezvous", "Rendezvous", "every member running to the first all-reduce, failed attempts and "
            "restarts included"),
           ("time_to_training", "Time to training", "intended submit to the first all-reduce: admission + "
            "placement-to-ready + rendezvous"))
ACTIVITY_COLS = (("measured active util", "activity.active_util"),
                 ("training SM activity", "activity.training_sm_active"),
                 ("active GPU-h", "activity.active_gpu_hours"), ("admitted GPU-h", "activity.admitted_gpu_hours"),
                 ("failed starts", "activity.start_failures"),
                 ("jobs with failed starts", "activity.jobs_with_failed_starts"),
                 ("admitted, never trained", "activity.never_trained"))
PLACEMENT_COLS = (("gangs placed", "placement.gangs_placed"), ("leaves mean", "placement.leaves_spanned.mean"),
                  ("leaves p99", "placement.leaves_spanned.p99"), ("leaves max", "placement.leaves_spanned.max"),
                  ("large gangs", "placement.large_gangs_placed"),
                  ("large in one leaf", "placement.large_in_one_leaf_share"),
                  ("cross-leaf GPU-h", "placement.cross_leaf_gpu_hours"),
                  ("cross-spine GPU-h", "placement.cross_spine_gpu_hours"))


def _table(s: dict, names: list[str], cols) -> str:
    rows = ["<table><thead><tr><th>scheduler</th>" + "".join(f'<th class="num">{text(h)}</th>' for h, _ in cols)
            + "</tr></thead><tbody>"]
    for n in names:
        r = s["schedulers"][n]
        rows.append(f"<tr><th>{text(n)}</th>" + "".join(cell(get(r, p), f"{n}.{p}") for _, p in cols) + "</tr>")
    return "".join(rows) + "</tbody></table>"


def _budgets_section(s: dict, names: list[str], classes: list[str]) -> str:
    """The budgets after admission per class, and what the admitted gangs' GPUs did."""
    have = [n for n in names if s["schedulers"][n].get("budgets")]
    out = ['<section id="budgets"><h2>Budgets after admission</h2>']
    if not have:
        out.append(_missing("summary.json has no budgets (a run written by an older gangstorm)"))
        return "".join(out) + "</section>"
    for key, title, what in BUDGETS:
        out.append(f"<h3>{text(title)}</h3><p>{text(what)}.</p><div class=\"grid\">")
        for cls in ["all", *classes]:
            cols = tuple((h, f"budgets.{key}.{cls}.{k}") for h, k in QUANTILE_COLS)
            out.append(f'<div data-class="{text(cls)}"><b>{text("all jobs" if cls == "all" else "class " + cls)}</b>'
                       + _table(s, have, cols) + "</div>")
        out.append("</div>")
    out.append("<h3>GPU activity</h3><p>Measured SM activity (what the fake DCGM exporter publishes) over the GPU "
               "time of admitted gangs: idle while the image pulls, the container starts and ranks meet, then the "
               "training step's activity less data-loader and checkpoint stalls. Cost uses it.</p>")
    out.append(_table(s, have, ACTIVITY_COLS))
    return "".join(out) + "</section>"


SHARING_COLS = (("placement policy", "gpu_sharing.placement_policy"),
                ("allocation (compute)", "gpu_sharing.allocation_ratio"),
                ("allocation (memory)", "gpu_sharing.allocation_ratio_memory"),
                ("fragmentation (ATC '23)", "gpu_sharing.fragmentation_ratio"),
                ("stranded", "gpu_sharing.stranded_ratio"),
                ("$ per 1M GPU-h, slices by compute", "gpu_sharing.cost_per_million_gpu_hours_by.compute"),
                ("by memory", "gpu_sharing.cost_per_million_gpu_hours_by.memory"),
                ("at slice_memory_weight", "gpu_sharing.cost_per_million_gpu_hours"))


def _sharing_section(s: dict, names: list[str]) -> str:
    """GPU sharing at slice granularity (runs on a fleet with node pools only)."""
    have = [n for n in names if s["schedulers"][n].get("gpu_sharing")]
    if not have:
        return ""
    return ('<section id="gpu-sharing"><h2>GPU sharing</h2><p>Time averages over the window, as fractions of '
            "the fleet's GPU capacity: slices held at their compute and memory share; fragmentation as in "
            "\"Beware of Fragmentation\" (USENIX ATC '23), free capacity a task of the arrived shape mix cannot use; "
            "stranded, free capacity on partly used GPUs no pending member can use; cost with slices priced by "
            "compute, by memory and at the scenario's weight (docs/gpu-sharing.md).</p>"
            + _table(s, have, SHARING_COLS) + "</section>")


def _placement_section(s: dict, names: list[str]) -> str:
    have = [n for n in names if s["schedulers"][n].get("placement")]
    out = ['<section id="placement"><h2>Placement of multi-node gangs</h2>']
    if not have:
        return "".join(out) + _missing("summary.json has no placement figures") + "</section>"
    out.append("<p>Leaves (switches) spanned by each multi-node gang at its first admission, the share of large "
               "gangs inside one leaf, and GPU-hours of runs whose members cross leaves or spines.</p>")
    out.append(_table(s, have, PLACEMENT_COLS))
    topo = {n: s["schedulers"][n].get("topology") for n in have if s["schedulers"][n].get("topology")}
    if topo:
        out.append("<h3>Topology settings</h3><table><thead><tr><th>scheduler</th><th>setting</th><th>value</th>"
                   "</tr></thead><tbody>")
        for n, settings in topo.items():
            for k, v in settings.items():
                out.append(f"<tr><th>{text(n)}</th><td>{text(k)}</td><td>{text(str(v))}</td></tr>")
        out.append("</tbody></table>")
    return "".join(out) + "</section>"


def _run_header(data: RunData) -> str:
    s = data.summary
    fl, wl, prof = s.get("fleet") or {}, s.get("workload") or {}, s.get("profile") or {}
    out = [f"<header><h1>gangstorm run {text(s.get('run_id'))}</h1>",
           f'<p class="meta">Scenario <b>{text(s.get("scenario"))}</b>, seed {_g(s.get("seed"))}; '
           f'{_g(fl.get("nodes"))} nodes x {_g(fl.get("gpus_per_node"))} GPUs; '
           f'{_g(wl.get("jobs"))} jobs over {_g(s.get("duration_h"))} h at '
           f'{_g(wl.get("churn_multiplier"))}x churn ({_g(wl.get("arrival_rate_per_s"))} jobs/s, '
           f'offered load {_g(wl.get("offered_load"))}); schedulers {text(", ".join(data.schedulers) or "none")}; '
           f'profile {text(prof.get("name"))}; wall {_g(s.get("wall_s"))} s.</p>']
    if data.partial:
        running = s.get("running")
        kept = (s.get("schedulers") or {}).get(running) if running else None
        part = kept.get("partial") if isinstance(kept, dict) else None
        what = (f" while {text(running)} was running (its rows up to the signal are kept, marked partial: "
                f"{_g(part.get('jobs_sent'))} of {_g(part.get('jobs_planned'))} jobs sent)" if isinstance(part, dict)
                else f" while {text(running)} was running (its results are absent)" if running else "")
        out.append(f'<p class="banner" id="partial"><b>Partial result</b> ("complete": false): the run was '
                   f'interrupted{what}. This report shows the {len(data.schedulers)} scheduler(s) it holds: '
                   f'{text(", ".join(data.schedulers) or "none")}.</p>')
    out.append("</header>")
    return "\n".join(out)


def _g(v) -> str:
    """A number in running text, shortest form (`6`, `3`, `0.05058`)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return text(readable(v))
    return text(f"{v:,}" if isinstance(v, int) else f"{v:,.4g}")


def _scalar_paths(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        if "." in str(k):
            continue
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _scalar_paths(v, path + ".")
        elif v is None or isinstance(v, (int, float, bool)):
            out.append(path)
    return out


def _chaos_table(s: dict, names: list[str], events: list[tuple[float, str]], evictions: int) -> str:
    if not events and not evictions:
        return "<p>No chaos in this run.</p>"
    plan = ", ".join(f"{kind} at {t / 3600.0:.2f} h" for t, kind in events)
    if evictions:
        plan += (", " if plan else "") + f"{evictions:,} evictions"
    kinds = sorted({k for n in names for k in (s["schedulers"][n].get("chaos_applied") or {})})
    rows = [f"<h3>Chaos</h3><p>Planned: {text(plan)}.</p>"]
    if kinds:
        rows.append("<table><thead><tr><th>scheduler</th>" + "".join(
            f'<th class="num">{text(k)} applied</th><th class="num">{text(k)} unsupported</th>' for k in kinds)
            + "</tr></thead><tbody>")
        for n in names:
            ca = s["schedulers"][n].get("chaos_applied") or {}
            rows.append(f"<tr><th>{text(n)}</th>" + "".join(
                cell(get(ca, f"{k}.applied"), f"{n}.chaos_applied.{k}.applied")
                + cell(get(ca, f"{k}.unsupported"), f"{n}.chaos_applied.{k}.unsupported") for k in kinds) + "</tr>")
        rows.append("</tbody></table>")
    return "\n".join(rows)


def _profile_section(data: RunData) -> str:
    from loadgen.output.html import figures
    from loadgen.output.markdown import held_out_text
    s = data.summary
    prof = s.get("profile") or {}
    out = ['<section id="profile"><h2>Calibration profile</h2>',
           f"<p>Profile <b>{text(prof.get('name'))}</b> ({text(prof.get('path'))}): "
           f"{text(prof.get('description'))}</p>"]
    models = {n: s["schedulers"][n].get("model") for n in data.schedulers if s["schedulers"][n].get("model")}
    if not models:
        out.append("<p>No simulated scheduler in this run: the results come from real backends.</p>")
    else:
        out.append("<table><thead><tr><th>scheduler</th><th>calibrated</th><th>held-out error</th></tr></thead><tbody>")
        errors = {}
        for n, m in models.items():
            if m.get("calibrated") and isinstance(m.get("held_out_error"), dict):
                errors[n] = m["held_out_error"]
                try:
                    line = held_out_text(m["held_out_error"])
                except (KeyError, TypeError, IndexError):
                    line = str(m["held_out_error"])
                cls = "ok" if m["held_out_error"].get("within_goal") else "bad"
                line_html = f'<span class="{cls}">{text(line)}</span>'
            else:
                line_html = f'<span class="bad">UNCALIBRATED</span>: {text(m.get("note", ""))}'
            if m.get("set_by_scenario"):
                line_html += f"; set by the scenario: {text(', '.join(m['set_by_scenario']))}"
            out.append(f"<tr><th>{text(n)}</th>{cell(m.get('calibrated'), f'{n}.model.calibrated')}"
                       f"<td>{line_html}</td></tr>")
        out.append("</tbody></table>")
        if errors:
            out.append(_fig(figures.held_out("heldout", errors), "Ranges of the held-out ratios per scheduler; the "
                                                                 "shaded band is the goal (0.8-1.25)."))
    p = data.profile
    if not models:
        pass
    elif p is None:
        out.append(_missing(data.profile_note))
    else:
        sections = [sec for sec in p.params if sec in models or sec not in SCHEDULERS]
        if sections:
            out.append(f"<h3>Parameters</h3><p>{text(data.profile_note)}.</p><table><thead><tr><th>parameter</th>"
                       "<th class=\"num\">value</th><th>unit</th><th>provenance</th><th>source</th></tr></thead>"
                       "<tbody>")
            for sec in sections:
                for key, par in p.params[sec].items():
                    out.append(f"<tr><td>{text(sec + '.' + key)}</td>{cell(par.value)}<td>{text(par.unit)}</td>"
                               f"<td>{text(par.provenance)}</td><td class=\"src\">{text(par.source)}</td></tr>")
            out.append("</tbody></table>")
    out.append("</section>")
    return "\n".join(out)


def _footer(d, files: list[str]) -> str:
    present = [f for f in files if (d / f).exists()]
    return (f"<footer>Built by <code>gangstorm report {text(str(d))}</code> from {text(', '.join(present))} "
            f"on {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}. Self-contained: no script, no "
            "network.</footer>")


# --- a ceiling sweep --------------------------------------------------------------------------
CEILING_COLS = (("ceiling (churn x)", "ceiling_churn_multiplier"), ("broke at (churn x)", "broke_at_churn_multiplier"),
                ("jobs/s", "jobs_per_s"), ("pods/s", "pods_per_s"), ("points", "points_run"))
POINT_COLS = (("churn x", "churn_multiplier"), ("jobs", "jobs"), ("p99 s", "p99_s"), ("p99.9 s", "p999_s"),
              ("never admitted", "never_admitted"), ("SLO met", "slo_met"), ("sustained", "sustained"), ("met", "met"))


def render_ceiling(data: CeilingData) -> str:
    from loadgen.output.html import figures
    c = data.ceiling
    slo = c.get("slo") or {}
    slo_s = slo.get("admission_p99_s") if isinstance(slo.get("admission_p99_s"), (int, float)) else None
    points = {n: p for n, p in (c.get("points") or {}).items() if isinstance(p, list)}
    ceil = {n: v for n, v in (c.get("ceiling") or {}).items() if isinstance(v, dict)}
    body = ["<header><h1>gangstorm ceiling " + text(c.get("scenario")) + "</h1>",
            f'<p class="meta">Scenario <b>{text(c.get("scenario"))}</b>; backend {text(c.get("backend", "sim"))}; '
            f'{text(readable(c.get("nodes")))} nodes; {text(readable(c.get("jobs_per_point")))} jobs per point; SLO: '
            'admission '
            f'p99 &lt;= {text(readable(slo_s))} s and at most 1% never admitted.</p></header>',
            '<section id="ceiling"><h2>Ceiling per scheduler</h2>']
    if c.get("complete") is False:
        body.insert(2, '<p class="banner" id="partial"><b>Partial search</b> ("complete": false): the sweep was '
                       'interrupted; the points below are the ones it ran, and schedulers without a ceiling row '
                       'had not finished their search.</p>')
    if ceil:
        body.append("<table><thead><tr><th>scheduler</th>"
                    + "".join(f'<th class="num">{h}</th>' for h, _ in CEILING_COLS)
                    + "<th>saturated at the break</th><th>search cap</th></tr></thead><tbody>")
        for n, v in ceil.items():
            body.append(f"<tr><th>{text(n)}</th>" + "".join(cell(v.get(k), f"ceiling.{n}.{k}") for _, k in CEILING_COLS)
                        + "<td>" + text(v.get("saturated") or ("n/a" if v.get("broke_at_churn_multiplier") is None
                                                               else "none near full"))
                        + (f" ({text(v.get('saturated_description'))})" if v.get("saturated_description") else "")
                        + f"</td><td>{text(v.get('cap') or '')}</td></tr>")
        body.append("</tbody></table>")
    else:
        body.append(_missing("ceiling.json holds no per-scheduler ceiling"))
    if any(points.values()):
        body.append(_fig(figures.ceiling_curve("ceiling", points, slo_s, ceil),
                         "Each point is one run at that churn multiplier (same number of jobs offered)."))
    else:
        body.append(_missing("ceiling.json holds no points"))
    body.append("<h3>Points</h3>")
    for n, pts in points.items():
        body.append(f"<table><thead><tr><th>{text(n)}</th>"
                    + "".join(f'<th class="num">{h}</th>' for h, _ in POINT_COLS)
                    + "<th>busiest</th></tr></thead><tbody>")
        for i, p in enumerate(pts):
            if not isinstance(p, dict):
                continue
            load = p.get("load") or {}
            busiest = max(load.items(), key=lambda kv: (kv[1], kv[0])) if load and all(
                isinstance(x, (int, float)) for x in load.values()) else None
            body.append("<tr><td></td>" + "".join(cell(p.get(k), f"points.{n}.{i}.{k}") for _, k in POINT_COLS)
                        + f"<td>{text(f'{busiest[0]} load {busiest[1]:.2f}' if busiest else 'n/a')}</td></tr>")
        body.append("</tbody></table>")
    body.append("</section>")
    body.append(_footer(data.dir, ["ceiling.json"]))
    return _doc(f"gangstorm ceiling {c.get('scenario')}", body)
