"""report.html: one self-contained page per run folder or ceiling folder.

  data.py     reads summary.json, jobs.csv, timeseries.csv (or ceiling.json) into plain structures
  curves.py   pure downsampling: CDF ranks, min/max decimation, counter rates
  figures.py  matplotlib figures -> inline SVG strings (matplotlib is imported there only)
  fmt.py      the one way a number from summary.json is printed
  page.py     the HTML: tables with data-metric cells, the figures, inline CSS, no script

`build(folder)` is what `gangstorm run` calls at the end of a run, `gangstorm ceiling` at the end
of a sweep and `gangstorm report` on any folder.
"""
from __future__ import annotations

from pathlib import Path

REPORT = "report.html"


def build(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write report.html into the folder (or to `out`) and return its path. Raises
    data.ReportError (a UserError: one line, exit 2) for a folder that is not a run or ceiling folder."""
    from loadgen.output.html import data
    return write(data.load(run_dir), out)


def write(folder, out: str | Path | None = None) -> Path:
    """The page of already loaded data (data.load) written atomically to `out` or folder/report.html."""
    from loadgen.output.html import page
    from loadgen.output.storage import atomic_write
    path = Path(out) if out is not None else folder.dir / REPORT
    atomic_write(path, page.render(folder))
    return path
