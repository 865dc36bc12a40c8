"""How gangstorm prints a number, written once so that a missing value (None, NaN, an infinity)
reads "n/a" in every table, report and command line, whatever style the number is printed in.

- `fixed(v, digits)`: that many decimals, thousands separated (`1,427.6`); an integer in full
  (`42,740`). Tables of seconds, shares and dollars.
- `significant(v, digits)`: that many significant digits, as Python's `g` writes them (`0.0123`,
  `93.01`, `1.23e+04`), and from a million up the whole number (`1,234,568`). Ratios and values
  whose scale varies from row to row.
- `readable(v)`: report.html's cells. An integer in full; any other number to 4 significant
  digits, at least one decimal and at most six (summary.json keeps six), never an exponent
  (`1,427.6`, `93.01`, `0.9543`, `0.000012`); true and false as yes and no.

Both sides import it (fakes/ may import only loadgen.model), which is why it lives here.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

NA = "n/a"
READABLE_DIGITS = 4


def missing(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def fixed(v, digits: int = 1, unit: str = "", grouping: bool = True) -> str:
    """`digits` decimals for a float, an integer in full; thousands separated unless grouping is False."""
    if missing(v):
        return NA
    sep = "," if grouping else ""
    if isinstance(v, float):
        return f"{v:{sep}.{digits}f}{unit}"
    if isinstance(v, Integral):
        return f"{int(v):{sep}}{unit}"
    return f"{v}{unit}"


def significant(v, digits: int = 6, unit: str = "") -> str:
    """`digits` significant digits (format `g`); from a million up, the whole number with separators."""
    if missing(v):
        return NA
    return (f"{v:.{digits}g}" if abs(v) < 1e6 else f"{v:,.0f}") + unit


def readable(v) -> str:
    """A summary.json value as report.html shows it (see the module docstring)."""
    if missing(v):
        return NA
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, Integral):
        return f"{int(v):,}"
    if isinstance(v, Real):
        if v == 0:
            return "0"
        before = math.floor(math.log10(abs(v))) + 1          # digits before the point (<= 0 below 1)
        return f"{v:,.{min(max(READABLE_DIGITS - before, 1), 6)}f}"
    return str(v)
