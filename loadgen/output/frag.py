"""The frag experiment's outputs (loadgen/drive/frag.py): frag.md, a table of allocation and
fragmentation at chosen arrived loads per scheduler and policy, and report.html, both curves
against arrived load. Rendered from frag.json alone."""
from __future__ import annotations

from html import escape

TABLE_LOADS = (0.5, 0.7, 0.9, 1.0, 1.1, 1.3)


def _at(points: list[dict], load: float) -> dict | None:
    """The first sample at or past `load` (None if the run never got there)."""
    return next((p for p in points if p["arrived_load"] + 1e-9 >= load), None)


def label(run: dict) -> str:
    return f"{run['scheduler']} / {run['policy']}"


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = [f"# gangstorm frag: {result['scenario']}", "",
             f"{result['tasks']:,} tasks drawn from `{result['trace']}` (seed {result['seed']}, "
             f"{result['fractional_tasks']:,} asking for a fraction of a GPU), arriving {s['gap_s']:g} s apart and "
             f"never leaving, up to {s['max_load'] * 100:.0f}% of {result['capacity_gpus']:,.0f} GPUs on "
             f"{result['nodes']:,} nodes. Allocation = GPU capacity held (slices at their share) / capacity; "
             "fragmentation = free capacity a task of the trace's shape mix cannot use / capacity "
             "(\"Beware of Fragmentation\", USENIX ATC '23).", ""]
    head = " | ".join(f"{x * 100:.0f}%" for x in TABLE_LOADS)
    for metric, title in (("allocation_ratio", "GPU allocation ratio"), ("fragmentation_ratio", "fragmentation")):
        lines += [f"{title} at arrived load:", "", f"| scheduler / policy | {head} |",
                  "|---|" + "---:|" * len(TABLE_LOADS)]
        for run in result["runs"]:
            cells = []
            for x in TABLE_LOADS:
                p = _at(run["points"], x)
                cells.append("n/a" if p is None else f"{p[metric] * 100:.1f}%")
            lines.append(f"| {label(run)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def report_html(result: dict) -> str:
    from loadgen.output.html.figures import _ctx, _figure, plain, to_svg
    figs = []
    with _ctx():
        for metric, title in (("allocation_ratio", "GPU allocation ratio"),
                              ("fragmentation_ratio", "fragmentation (ATC '23)")):
            fig = _figure(8.0, 4.4)
            ax = fig.add_subplot()
            for run in result["runs"]:
                xs = [p["arrived_load"] * 100 for p in run["points"]]
                ys = [p[metric] * 100 for p in run["points"]]
                ax.plot(xs, ys, "-", marker=".", markersize=3, label=plain(label(run)))
            ax.axvline(100, color="black", linewidth=0.8, linestyle=":")
            ax.set_xlabel("arrived load (% of GPU capacity)")
            ax.set_ylabel(f"{title} (%)")
            ax.set_title(f"{title} against arrived load")
            ax.legend(loc="upper left", ncol=2)
            figs.append(to_svg(fig, metric, title))
    table = markdown(result).split("\n", 2)[2]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>gangstorm frag {escape(result['scenario'])}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{white-space:pre-wrap}</style>"
            f"</head>\n<body>\n<h1>gangstorm frag: {escape(result['scenario'])}</h1>\n"
            + "\n".join(f"<figure>{f}</figure>" for f in figs)
            + f"\n<pre>{escape(table)}</pre>\n</body></html>\n")
