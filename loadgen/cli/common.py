"""Flag parsing shared by subcommands: schedulers, overrides, progress bar."""
from __future__ import annotations

import sys
import time

from loadgen.scenario import Scenario, load
from loadgen.model.registry import SCHEDULERS


class UsageError(Exception):
    """A bad flag value: one line, exit status 2."""


def parse_schedulers(text: str | None, scenario: Scenario) -> list[str]:
    if text is None:
        return list(scenario.data["schedulers_enabled"])
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in SCHEDULERS]
    if bad or not names:
        raise UsageError(f"--schedulers: expected a comma-separated list of {', '.join(SCHEDULERS)}, got {text!r}")
    return names


def load_with_overrides(path: str, nodes: int | None = None, seed: int | None = None,
                        churn: float | None = None, duration_h: float | None = None) -> Scenario:
    sc = load(path)
    over = {}
    if nodes is not None:
        over["fleet.nodes"] = nodes
    if seed is not None:
        over["seed"] = seed
    if churn is not None:
        over["workload.churn_multiplier"] = churn
    if duration_h is not None:
        over["duration_h"] = duration_h
    if over:
        sc = sc.with_overrides(**over)
        sc.path = path
    return sc


def _positive(kind, noun: str):
    def parse(text: str):
        import argparse
        try:
            v = kind(text)
        except ValueError:
            v = None
        if v is None or not v > 0:
            raise argparse.ArgumentTypeError(f"expected a positive {noun}, got {text!r}")
        return v
    parse.__name__ = f"positive_{kind.__name__}"
    return parse


positive_int = _positive(int, "integer")
positive_float = _positive(float, "number")


class ProgressBar:
    """One line on stderr per scheduler, redrawn in place when stderr is a terminal."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream, self.width = stream, width
        self.tty = stream.isatty()
        self.current = None
        self.t0 = time.monotonic()
        self.last = -1.0

    def __call__(self, name: str, frac: float) -> None:
        if name != self.current:
            if self.current is not None:
                self._draw(self.current, 1.0, end=True)
            self.current, self.t0, self.last = name, time.monotonic(), -1.0
        if self.tty:
            self._draw(name, frac)
        elif frac - self.last >= 0.25:
            self.last = frac
            self._draw(name, frac, end=True)

    def _draw(self, name: str, frac: float, end: bool = False) -> None:
        n = int(self.width * min(frac, 1.0))
        line = f"  {name:<8} [{'#' * n}{'.' * (self.width - n)}] {frac * 100:5.1f}% {time.monotonic() - self.t0:6.1f}s"
        self.stream.write(("\r" + line) if self.tty and not end else (("\r" if self.tty else "") + line + "\n"))
        self.stream.flush()

    def done(self) -> None:
        if self.current is not None:
            self._draw(self.current, 1.0, end=True)
            self.current = None
