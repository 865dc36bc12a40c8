"""Table cells of report.html: every number printed by loadgen.model.numbers.readable.

The exact value is in the cell's data-value (and its tooltip).
"""
from __future__ import annotations

import html
import json

from loadgen.model.numbers import readable


def cell(v, metric: str | None = None, tag: str = "td", cls: str = "num") -> str:
    """A table cell; with `metric` (a dotted path into summary.json's schedulers) it carries
    data-metric and the exact JSON value in data-value, so a test can read both back."""
    attrs = f' class="{cls}"' if cls else ""
    if metric is not None:
        exact = json.dumps(v)
        attrs += f' data-metric="{html.escape(metric)}" data-value="{html.escape(exact)}"'
        if isinstance(v, float):
            attrs += f' title="{html.escape(exact)}"'
    return f"<{tag}{attrs}>{html.escape(readable(v))}</{tag}>"


def text(s) -> str:
    return html.escape("" if s is None else str(s))
