"""One way to print a number from summary.json, used for every table cell of report.html.

Integers in full with thousands separators (`42,740`); other numbers to 4 significant digits,
at least one decimal and at most six (summary.json keeps six), e.g. `1,427.6`, `93.01`, `0.9543`,
`0.000012`. The exact value is in the cell's data-value (and its tooltip).
"""
from __future__ import annotations

import html
import json
import math

SIGNIFICANT = 4


def num(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        if v == 0:
            return "0"
        before = math.floor(math.log10(abs(v))) + 1          # digits before the point (<= 0 below 1)
        return f"{v:,.{min(max(SIGNIFICANT - before, 1), 6)}f}"
    return str(v)


def cell(v, metric: str | None = None, tag: str = "td", cls: str = "num") -> str:
    """A table cell; with `metric` (a dotted path into summary.json's schedulers) it carries
    data-metric and the exact JSON value in data-value, so a test can read both back."""
    attrs = f' class="{cls}"' if cls else ""
    if metric is not None:
        exact = json.dumps(v)
        attrs += f' data-metric="{html.escape(metric)}" data-value="{html.escape(exact)}"'
        if isinstance(v, float):
            attrs += f' title="{html.escape(exact)}"'
    return f"<{tag}{attrs}>{html.escape(num(v))}</{tag}>"


def text(s) -> str:
    return html.escape("" if s is None else str(s))
