"""report.html of a soak folder (loadgen/output/soak.py): the windows over time. Per scheduler,
admission p99 per job class at each window's end (the SLO as a line, the churn steps marked),
generator lateness p99, GPUs held by partial gangs, and which alerts were firing in the soak's
Prometheus when each window closed; then the windows' table. Numbers carry data-metric paths into
soak.json's `windows` (`windows.3.admission_s.kube.large.p99`).
"""
from __future__ import annotations

import json
from pathlib import Path

from loadgen.model.numbers import readable
from loadgen.output import soak as soakfiles
from loadgen.output.html.fmt import text
from loadgen.output.html.page import _doc, _fig, _footer, _missing
from loadgen.output.storage import atomic_write

REPORT = "report.html"


def build(folder: str | Path, out: str | Path | None = None) -> Path:
    d = Path(folder)
    soak = soakfiles.read(d)
    path = Path(out) if out is not None else d / REPORT
    atomic_write(path, render(soak, d))
    return path


def _minutes(row: dict) -> float:
    return float(row.get("end_s") or 0.0) / 60.0


def _churn_steps(ax, soak: dict) -> None:
    for i, step in enumerate(soak.get("churn_schedule") or []):
        if i == 0:
            continue
        ax.axvline(step["from_s"] / 60.0, color="#555", linestyle=":", linewidth=1.0)
        ax.annotate(f"churn {step['churn_multiplier']:g}x", (step["from_s"] / 60.0, 1.0),
                    xycoords=("data", "axes fraction"), fontsize=7, ha="left", va="top", rotation=90)


def p99_figure(key: str, soak: dict, scheduler: str) -> str | None:
    from loadgen.output.html import figures as F
    rows = soak["windows"]
    classes = sorted({c for r in rows for c in ((r.get("admission_s") or {}).get(scheduler) or {})})
    if not classes:
        return None
    with F._ctx():
        fig = F._figure(7.5, 4.0)
        ax = fig.add_subplot()
        drawn = False
        for i, c in enumerate(classes):
            pts = [(_minutes(r), ((r["admission_s"].get(scheduler) or {}).get(c) or {}).get("p99")) for r in rows]
            pts = [(x, max(y, 1e-3)) for x, y in pts if isinstance(y, (int, float))]
            if pts:
                drawn = True
                style = "o-" if c == "all" else "s--"
                ax.plot([x for x, _ in pts], [y for _, y in pts], style, markersize=3,
                        color="black" if c == "all" else F.SPARE[i % len(F.SPARE)], label=F.plain(c))
        if not drawn:
            return None
        slo = (soak.get("slo") or {}).get("admission_p99_s")
        if isinstance(slo, (int, float)) and slo > 0:
            ax.axhline(slo, color="#d62728", linestyle="--", linewidth=1.0, label=f"SLO: p99 <= {slo:g} s")
        _churn_steps(ax, soak)
        ax.set_yscale("log")
        ax.set_xlabel("minutes into the soak (window end)")
        ax.set_ylabel("admission p99 (s, log scale)")
        ax.set_title(F.plain(f"{scheduler}: admission p99 per window and class"))
        ax.legend(loc="best")
        return F.to_svg(fig, key, f"{scheduler} admission p99 per window")


def side_figure(key: str, soak: dict, scheduler: str) -> str | None:
    """Generator lateness p99 and partial-gang GPUs (mean) per window, one above the other."""
    from loadgen.output.html import figures as F
    rows = soak["windows"]
    xs = [_minutes(r) for r in rows]
    late = [((r.get("generator_lateness_s") or {}).get(scheduler) or {}).get("p99") for r in rows]
    part = [((r.get("partial_gang_gpus") or {}).get(scheduler) or {}).get("mean") for r in rows]
    if not any(isinstance(v, (int, float)) for v in late + part):
        return None
    with F._ctx():
        fig = F._figure(7.5, 4.4, hspace=0.45)
        a1, a2 = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
        for ax, ys, label in ((a1, late, "generator lateness p99 (s)"), (a2, part, "partial-gang GPUs (mean)")):
            pts = [(x, y) for x, y in zip(xs, ys) if isinstance(y, (int, float))]
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", markersize=3, color=F.color(scheduler, [scheduler]))
            ax.set_ylabel(label, fontsize=8)
            _churn_steps(ax, soak)
        a2.set_xlabel("minutes into the soak (window end)")
        a1.set_title(F.plain(f"{scheduler}: generator lateness and partial gangs per window"))
        return F.to_svg(fig, key, f"{scheduler} lateness and partial gangs per window")


def alert_figure(key: str, soak: dict) -> str | None:
    """One row per alert name, a mark at each window that closed with it firing."""
    from loadgen.output.html import figures as F
    rows = [r for r in soak["windows"] if "alerts_firing" in r]
    if not rows:
        return None
    names = sorted({a for r in rows for a in r["alerts_firing"]})
    with F._ctx():
        fig = F._figure(7.5, 1.0 + 0.3 * max(len(names), 1), left=2.7)
        ax = fig.add_subplot()
        for y, name in enumerate(names):
            xs = [_minutes(r) for r in rows if name in r["alerts_firing"]]
            ax.plot(xs, [y] * len(xs), "s", color="#d62728", markersize=6)
        quiet = [_minutes(r) for r in rows if not r["alerts_firing"]]
        if quiet:
            ax.plot(quiet, [-1] * len(quiet), "o", color="#2ca02c", markersize=4)
        ax.set_yticks(range(-1, len(names)), ["(none firing)"] + [F.plain(n) for n in names])
        ax.set_ylim(-1.6, max(len(names), 1) - 0.4)
        ax.set_xlim(0, max(_minutes(r) for r in soak["windows"]) * 1.02 + 0.01)
        ax.set_xlabel("minutes into the soak (window end)")
        ax.set_title("alerts firing in the soak's Prometheus when each window closed")
        return F.to_svg(fig, key, "alerts firing per window")


def _v(path: str, v) -> str:
    return f'<td class="num" data-metric="{text(path)}" data-value="{text(json.dumps(v))}">{text(readable(v))}</td>'


def render(soak: dict, d: Path) -> str:
    rows = soak["windows"]
    name = soak.get("scheduler") or ""
    schedule = ", ".join(f"{s['churn_multiplier']:g}x from {s['from_s']:g} s" for s in soak.get("churn_schedule") or [])
    body = [f"<header><h1>gangstorm soak {text(soak.get('soak_id'))}</h1>",
            f'<p class="meta">Scenario <b>{text(soak.get("scenario"))}</b>, scheduler <b>{text(name)}</b> '
            f'({text(soak.get("backend"))}{", attached" if soak.get("attached") else ", launched"}), '
            f'{text(readable(soak.get("nodes")))} nodes, windows of {text(readable(soak.get("window_s")))} s, '
            f'time scale {text(readable(soak.get("time_scale")))}; churn {text(schedule)}; started '
            f'{text(soak.get("started"))}, {len(rows)} windows, ended by {text(soak.get("ended_by") or "(running)")}'
            + (f'; left behind on the cluster: {text(json.dumps(soak.get("left_behind")))}'
               if soak.get("left_behind") is not None else "") + ".</p></header>"]
    if not rows:
        body.append(_missing("no window closed yet"))
    else:
        body.append('<div class="grid">')
        body.append(_fig(p99_figure("soak-p99", soak, name),
                         "Each point: a window's exact p99 of the jobs admitted by its close (pending jobs are "
                         "counted in the table, not here). Dotted lines: churn steps."))
        body.append(_fig(side_figure("soak-side", soak, name), "Lateness: actual minus intended submit time; "
                         "partial-gang GPUs: fleet-wide, mean over the window's samples."))
        svg = alert_figure("soak-alerts", soak)
        body.append(_fig(svg, "From ALERTS{alertstate=\"firing\"} at each window's close (rules: "
                         "fakes/prom/rules/gangstorm.rules.yml).") if svg else
                    _missing("no alert state: the soak ran without --prometheus"))
        body.append("</div>")
        classes = sorted({c for r in rows for c in ((r.get("admission_s") or {}).get(name) or {})} - {"all"})
        head = ["window", "end (UTC)", "churn x", "jobs", "pending at close", "p50 s", "p99 s", "p99.9 s", "n"]
        head += [f"{c} p99 s" for c in classes] + ["lateness p99 s", "partial GPUs mean", "etcd MB", "alerts firing"]
        body.append("<table><thead><tr>" + "".join(f'<th class="num">{text(h)}</th>' for h in head)
                    + "</tr></thead><tbody>")
        for i, r in enumerate(rows):
            p = f"windows.{i}"
            a = (r.get("admission_s") or {}).get(name) or {}
            cells = [f'<th>{r["window"]}{"" if r.get("complete") else " (partial)"}</th>', f'<td>{text(r["end"])}</td>',
                     _v(f"{p}.churn_multiplier", r.get("churn_multiplier")),
                     _v(f"{p}.jobs.{name}", (r.get("jobs") or {}).get(name)),
                     _v(f"{p}.pending_at_close.{name}", (r.get("pending_at_close") or {}).get(name))]
            cells += [_v(f"{p}.admission_s.{name}.all.{q}", (a.get("all") or {}).get(q))
                      for q in ("p50", "p99", "p999", "count")]
            cells += [_v(f"{p}.admission_s.{name}.{c}.p99", (a.get(c) or {}).get("p99")) for c in classes]
            late = ((r.get("generator_lateness_s") or {}).get(name) or {}).get("p99")
            cells.append(_v(f"{p}.generator_lateness_s.{name}.p99", late))
            part = ((r.get("partial_gang_gpus") or {}).get(name) or {}).get("mean")
            cells.append(_v(f"{p}.partial_gang_gpus.{name}.mean", part))
            etcd = (r.get("etcd_db_bytes") or {}).get(name)
            cells.append(_v(f"{p}.etcd_db_bytes.{name}", None if etcd is None else round(etcd / 1e6, 2)))
            cells.append(f'<td>{text(", ".join(r["alerts_firing"])) if "alerts_firing" in r else "n/a"}</td>')
            body.append("<tr>" + "".join(cells) + "</tr>")
        body.append("</tbody></table>")
    body.append('<p class="meta">Each window is a run folder under <code>windows/</code> '
                "(<code>gangstorm report windows/NNNN</code> draws one); <code>soak.json</code> holds the rows above, "
                "and results/index.jsonl a line per window (\"kind\": \"soak\").</p>")
    body.append(_footer(d, [soakfiles.SOAK_FILE]))
    return _doc(f"gangstorm soak {soak.get('soak_id')}", body)
