"""The report's figures: matplotlib (Agg, no pyplot state) rendered to inline SVG strings.

Text stays text (svg.fonttype none), ids are fixed (svg.hashsalt) and prefixed per figure, so
several figures live in one HTML page and the same data gives the same bytes. matplotlib is
imported here only, and this module only when a report is built.
"""
from __future__ import annotations

import io
import re

import numpy as np

from loadgen.output.html import curves

# Each built-in scheduler keeps its colour in every report; a scheduler of one's own takes a spare.
COLORS = {"kube": "#1f77b4", "volcano": "#ff7f0e", "ray": "#2ca02c", "slurm": "#d62728",
          "kube-gang": "#9467bd", "coscheduling": "#8c564b", "kueue": "#17becf"}
SPARE = ["#e377c2", "#7f7f7f", "#bcbd22", "#aec7e8", "#ffbb78", "#98df8a"]
RC = {"svg.fonttype": "none", "svg.hashsalt": "gangstorm", "font.size": 9, "axes.titlesize": 10,
      "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6, "legend.fontsize": 8, "legend.frameon": False,
      "path.simplify": True, "axes.spines.top": False, "axes.spines.right": False, "lines.linewidth": 1.4}
MARKS = {"p50": "o", "p99": "s", "p999": "^"}
LOGIT_TICKS = (0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999)
SPANS = {"node_fail": ("node_recover", "nodes down"), "etcd_fill": ("etcd_recover", "etcd NOSPACE")}


def color(name: str, order: list[str]) -> str:
    if name in COLORS:
        return COLORS[name]
    others = [n for n in order if n not in COLORS]
    return SPARE[others.index(name) % len(SPARE)] if name in others else SPARE[0]


def _line(*args, **kw):
    from matplotlib.lines import Line2D as line
    return line(*args, **kw)


def _figure(w: float, h: float, **margins):
    """Fixed margins in inches (left, right, bottom, top): a layout engine would draw every figure
    twice to measure it, and a report is built at the end of every run."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h))
    m = {"left": 0.75, "right": 0.2, "bottom": 0.55, "top": 0.35, **margins}
    fig.subplots_adjust(left=m["left"] / w, right=1 - m["right"] / w, bottom=m["bottom"] / h, top=1 - m["top"] / h,
                        hspace=m.get("hspace", 0.2), wspace=m.get("wspace", 0.2))
    return fig


def to_svg(fig, key: str, label: str) -> str:
    """One <svg> element for inline use: no XML prolog or metadata, ids prefixed with key, scaled to
    its container's width."""
    import matplotlib
    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    s = re.sub(r"<metadata>.*?</metadata>\s*", "", s, flags=re.S)
    s = re.sub(r' d="([^"]*)"', lambda m: ' d="' + _NUMBER.sub(_tenth, m.group(1)) + '"', s)
    s = re.sub(r' ([xy])="(-?\d+\.\d+)"', lambda m: f' {m.group(1)}="' + _NUMBER.sub(_tenth, m.group(2)) + '"', s)
    s = re.sub(r"\n\s+", "\n", s)                           # matplotlib's indentation
    key = re.sub(r"[^A-Za-z0-9_-]", "_", key)              # an id prefix, never a user's text
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{key}-{m.group(1)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{key}-{m.group(1)})", s)
    s = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{key}-{m.group(1)}"', s)
    m = re.search(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"', s)
    if m:
        px = float(m.group(2)) * 4 / 3
        s = s[:m.start()] + (f'<svg{m.group(1)} width="100%" style="max-width:{px:.0f}px" role="img" '
                             f'aria-label="{_attr(label)}" data-figure="{_attr(key)}"') + s[m.end():]
    return s


_NUMBER = re.compile(r"-?\d+\.\d+")


def _tenth(m) -> str:
    """Path coordinates to 0.1 pt (matplotlib writes 6 decimals): a third of the bytes, no visible change."""
    text = f"{float(m.group()):.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def plain(s) -> str:
    """A name from a summary, a trace or a CSV header as matplotlib text: `$` is a dollar sign,
    never the start of mathtext (a name like `$x^$` would otherwise fail the whole page)."""
    return str(s).replace("$", r"\$")


def _ctx():
    import matplotlib
    return matplotlib.rc_context(RC)


# --- admission --------------------------------------------------------------------------------
def admission_cdf(key: str, title: str, lat: dict[str, np.ndarray], order: list[str]) -> str:
    """CDF of admission latency per scheduler: log x, logit y (so p50, p99 and p99.9 are equally
    readable), the nearest-rank p50/p99/p99.9 marked on each curve."""
    with _ctx():
        fig = _figure(6.4, 4.3)
        ax = fig.add_subplot()
        nmax = 1
        for name in order:
            v = lat.get(name)
            if v is None or len(v) == 0:
                continue
            nmax = max(nmax, len(v))
            x, f = curves.cdf_points(v)
            n = len(v)
            f = np.clip(f, 0.5 / n, 1 - 0.5 / n)
            c = color(name, order)
            ax.plot(np.maximum(x, curves.MIN_LATENCY_S), f, color=c, label=plain(f"{name} (n={n:,})"))
            for q, (qx, qf) in curves.quantile_marks(v).items():
                ax.plot([max(qx, curves.MIN_LATENCY_S)], [min(max(qf, 0.5 / n), 1 - 0.5 / n)], MARKS[q],
                        color=c, markersize=4.5, markerfacecolor="white", markeredgewidth=1.2)
        for q, m in MARKS.items():
            ax.plot([], [], m, color="0.35", markerfacecolor="white", label=q.replace("p999", "p99.9"))
        ax.set_xscale("log")
        ax.set_yscale("logit")
        top = 1 - 0.5 / nmax if nmax > 1 else 0.99
        ax.set_ylim(min(0.01, 1 - top), top)
        from matplotlib.ticker import NullLocator
        ticks = [t for t in LOGIT_TICKS if min(0.01, 1 - top) <= t <= top]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("admission latency (s, log scale; < 1 ms drawn at 1 ms)")
        ax.set_ylabel("share of admitted jobs at or below (logit scale)")
        ax.set_title(title, parse_math=False)         # holds a class name: a $ is a dollar sign
        ax.legend(loc="lower right")
        return to_svg(fig, key, title)


# --- timelines --------------------------------------------------------------------------------
def _chaos_marks(axes, events: list[tuple[float, str]], end_h: float, label_ax) -> None:
    open_: dict[str, float] = {}
    for t, kind in events:
        h = t / 3600.0
        for ax in axes:
            ax.axvline(h, color="0.3", linestyle=":", linewidth=0.9)
        label_ax.annotate(plain(kind), (h, 1.0), xycoords=("data", "axes fraction"), xytext=(1, 2),
                          textcoords="offset points",
                          fontsize=7, va="bottom", ha="left", color="0.25")
        if kind in SPANS:
            open_[kind] = h
        for start, (stop, _) in SPANS.items():
            if kind == stop and start in open_:
                began = open_.pop(start)
                for ax in axes:
                    ax.axvspan(began, h, color="0.5", alpha=0.12, linewidth=0)
    for h in open_.values():
        for ax in axes:
            ax.axvspan(h, end_h, color="0.5", alpha=0.12, linewidth=0)


TIMELINE = (("gpus_allocated", "GPUs allocated"), ("gpus_partial", "partial-gang GPUs"),
            ("gpus_stranded", "stranded GPUs"), ("pending_jobs", "pending jobs"))


def timeline(key: str, series: dict[str, dict[str, np.ndarray]], order: list[str], scale: dict[str, float],
             events: list[tuple[float, str]]) -> str:
    """Allocated, partial-gang and stranded GPUs and pending jobs against run time, one line per
    scheduler, chaos steps as dotted lines (outages shaded)."""
    with _ctx():
        fig = _figure(11.0, 8.2, top=0.45, hspace=0.12)
        axes = fig.subplots(len(TIMELINE), 1, sharex=True)
        end_h = 0.0
        for name in order:
            cols = series.get(name)
            if not cols or "t" not in cols:
                continue
            th = cols["t"] * scale.get(name, 1.0) / 3600.0
            end_h = max(end_h, float(np.nanmax(th)) if len(th) else 0.0)
            for ax, (col, _) in zip(axes, TIMELINE):
                if col in cols:
                    x, y = curves.decimate(th, cols[col])
                    ax.plot(x, y, color=color(name, order), label=plain(name), linewidth=1.1)
        for ax, (_, label) in zip(axes, TIMELINE):
            ax.set_ylabel(label)
        _chaos_marks(axes, events, end_h, axes[0])
        axes[-1].set_xlabel("run time (h)")
        handles = [_line([], [], color=color(n, order)) for n in order if n in series]
        fig.legend(handles, [plain(n) for n in order if n in series], loc="upper center", ncol=len(order))
        return to_svg(fig, key, "GPUs and queue over time")


def control_plane(key: str, series: dict[str, dict[str, np.ndarray]], order: list[str], scale: dict[str, float],
                  columns: list[str], events: list[tuple[float, str]]) -> tuple[str | None, list[str]]:
    """One small panel per control-plane column: a gauge as sampled, a counter (`*_total`) as its
    rate per second between samples. Columns that stay 0 for every scheduler are returned, not drawn."""
    drawn: list[tuple[str, list[tuple[str, np.ndarray, np.ndarray]]]] = []
    zero: list[str] = []
    for col in columns:
        lines = []
        for name in order:
            cols = series.get(name) or {}
            y = cols.get("cp_" + col)
            if y is None or "t" not in cols:
                continue
            t = cols["t"] * scale.get(name, 1.0)
            if col.endswith("_total"):
                t, y = curves.rate(t, y)
            lines.append((name, t / 3600.0, y))
        if not lines or all(np.all(np.nan_to_num(y) == 0) for _, _, y in lines):
            zero.append(col)
            continue
        drawn.append((col, lines))
    if not drawn:
        return None, zero
    ncols = 3
    nrows = -(-len(drawn) // ncols)
    with _ctx():
        fig = _figure(11.0, 2.1 * nrows + 0.5, left=0.55, top=0.55, bottom=0.5, hspace=0.45, wspace=0.25)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True)).ravel()
        for ax, (col, lines) in zip(axes, drawn):
            for name, x, y in lines:
                x, y = curves.decimate(x, y)
                ax.plot(x, y, color=color(name, order), label=plain(name), linewidth=1.0)
            ax.set_title(col.removesuffix("_total") + (" per s" if col.endswith("_total") else ""), fontsize=9,
                         parse_math=False)
            for t, _ in events:
                ax.axvline(t / 3600.0, color="0.3", linestyle=":", linewidth=0.8)
            ax.tick_params(labelsize=7)
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 5))
        for ax in axes[len(drawn):]:
            ax.set_visible(False)
        for ax in axes[max(len(drawn) - ncols, 0):len(drawn)]:
            ax.set_xlabel("run time (h)")
            ax.xaxis.set_tick_params(labelbottom=True)
        names = [n for n in order if any(n == ln for _, lines in drawn for ln, _, _ in lines)]
        handles = [_line([], [], color=color(n, order)) for n in names]
        fig.legend(handles, [plain(n) for n in names], loc="upper center", ncol=len(names))
        return to_svg(fig, key, "control-plane figures over time"), zero


# --- ceiling ----------------------------------------------------------------------------------
def ceiling_curve(key: str, points: dict[str, list[dict]], slo_s: float | None,
                  ceiling: dict[str, dict]) -> str | None:
    """p99 admission against the churn multiplier per scheduler (log-log), the SLO as a line;
    filled markers met the SLO, hollow ones broke it, a star marks the ceiling. None when no point
    can be drawn."""
    order = list(points)
    if not any(isinstance(p, dict) and _positive(p.get("churn_multiplier")) and _finite(p.get("p99_s"))
               for pts in points.values() for p in pts):
        return None
    with _ctx():
        fig = _figure(8.0, 4.8)
        ax = fig.add_subplot()
        for name, pts in points.items():
            # points a log-log axis can hold: a positive multiplier and a number for p99 (a hand-edited
            # or foreign ceiling.json may hold anything)
            pts = sorted((p for p in pts if isinstance(p, dict) and _positive(p.get("churn_multiplier"))
                          and _finite(p.get("p99_s"))), key=lambda p: p["churn_multiplier"])
            xs = [p["churn_multiplier"] for p in pts]
            ys = [max(p["p99_s"], curves.MIN_LATENCY_S) for p in pts]
            if not xs:
                continue
            c = color(name, order)
            ax.plot(xs, ys, "-", color=c, label=plain(name))
            for p in pts:
                met = p.get("met", p.get("slo_met"))
                ax.plot([p["churn_multiplier"]], [max(p["p99_s"], curves.MIN_LATENCY_S)], "o", color=c,
                        markerfacecolor=c if met else "white", markersize=5)
            best = (ceiling.get(name) or {}).get("ceiling_churn_multiplier")
            at = [p for p in pts if p["churn_multiplier"] == best]
            if at:
                ax.plot([best], [max(at[0]["p99_s"], curves.MIN_LATENCY_S)], "*", color=c, markersize=13,
                        markeredgecolor="black", markeredgewidth=0.5)
        if _positive(slo_s):
            ax.axhline(slo_s, color="black", linestyle="--", linewidth=1.0, label=f"SLO: p99 <= {slo_s:g} s")
        ax.plot([], [], "o", color="0.4", label="met the SLO")
        ax.plot([], [], "o", color="0.4", markerfacecolor="white", label="broke it")
        ax.plot([], [], "*", color="0.4", markersize=10, label="ceiling")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("churn multiplier (log scale)")
        ax.set_ylabel("admission p99 (s, log scale)")
        ax.set_title("Control-plane ceiling: p99 admission against churn")
        ax.legend(loc="upper left")
        return to_svg(fig, key, "ceiling curve")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _positive(v) -> bool:
    return _finite(v) and v > 0


# --- calibration ------------------------------------------------------------------------------
RATIOS = (("p50_ratio", "p50"), ("p99_ratio", "p99"), ("p999_ratio", "p99.9"), ("ratio", "published"))


def held_out(key: str, errors: dict[str, dict], band: tuple[float, float] = (0.8, 1.25)) -> str | None:
    """Each calibrated scheduler's held-out real/sim (or published/sim) ratio ranges against the goal band."""
    rows = []
    for name, err in errors.items():
        for field, label in RATIOS:
            v = err.get(field)
            if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
                rows.append((plain(f"{name} {label}"), float(v[0]), float(v[1]), name))
    if not rows:
        return None
    order = list(errors)
    with _ctx():
        fig = _figure(7.0, 1.0 + 0.32 * len(rows), left=1.6)
        ax = fig.add_subplot()
        ax.axvspan(*band, color="#2ca02c", alpha=0.12, linewidth=0)
        ax.axvline(1.0, color="0.4", linewidth=0.8)
        for i, (_label, lo, hi, name) in enumerate(rows):
            c = color(name, order)
            ax.plot([lo, hi], [i, i], "-", color=c, linewidth=3, solid_capstyle="round")
            ax.plot([lo, hi], [i, i], "|", color=c, markersize=9)
        ax.set_yticks(range(len(rows)), [r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_xscale("log")
        lo = min(min(r[1] for r in rows), band[0]) / 1.3
        hi = max(max(r[2] for r in rows), band[1]) * 1.3
        ax.set_xlim(lo, hi)
        ax.set_xlabel("held-out ratio: real (or published) / simulated (log scale)")
        ax.set_title(f"Held-out error of the profile (shaded: the goal band {band[0]:g}-{band[1]:g})")
        return to_svg(fig, key, "held-out error of the profile")


# --- seeds ------------------------------------------------------------------------------------
def _clamp(v: float, floor: float | None) -> float:
    """Lift a value to the log axis' floor (none on a linear axis)."""
    return max(v, floor) if floor else v


def seed_spread(key: str, title: str, panels: list[tuple[str, bool, dict[str, dict]]], order: list[str]) -> str | None:
    """One panel per figure: for each scheduler its per-seed values as dots, the interval as a
    vertical bar and the median as a horizontal tick. panels: (label, log scale, scheduler ->
    interval entry of output.aggregate, with "values")."""
    panels = [p for p in panels if any(e for e in p[2].values())]
    if not panels:
        return None
    ncols = min(4, len(panels))
    nrows = -(-len(panels) // ncols)
    with _ctx():
        fig = _figure(2.6 * ncols + 0.6, 2.4 * nrows + 0.5, left=0.6, right=0.15, top=0.5, bottom=0.45, hspace=0.55,
                      wspace=0.38)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax, (label, log, entries) in zip(axes, panels):
            names = [n for n in order if entries.get(n)]
            for i, name in enumerate(names):
                e = entries[name]
                c = color(name, order)
                vals = [v for v in (e.get("values") or {}).values() if v is not None]
                floor = curves.MIN_LATENCY_S if log else None
                if vals:
                    k = len(vals)
                    xs = [i + (0.5 * (j / (k - 1) - 0.5) if k > 1 else 0.0) for j in range(k)]
                    ax.plot(xs, [_clamp(v, floor) for v in vals], "o", color=c, alpha=0.55, markersize=3.2,
                            markeredgewidth=0)
                if e.get("low") is not None and e.get("high") is not None:
                    ax.plot([i, i], [_clamp(e["low"], floor), _clamp(e["high"], floor)], "-", color=c,
                            linewidth=5, alpha=0.35,
                            solid_capstyle="butt")
                if e.get("median") is not None:
                    ax.plot([i - 0.32, i + 0.32], [_clamp(e["median"], floor)] * 2, "-", color=c, linewidth=2.2)
            ax.set_xticks(range(len(names)), names, fontsize=7, parse_math=False)
            ax.set_xlim(-0.6, len(names) - 0.4)
            if log:
                ax.set_yscale("log")
            ax.set_title(label, fontsize=9, parse_math=False)      # class names: a $ is a dollar sign
            ax.tick_params(axis="y", labelsize=7)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        return to_svg(fig, key, title)
