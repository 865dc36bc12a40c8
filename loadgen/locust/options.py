"""gangstorm's Locust arguments: declared once, shown in the web UI start form, validated to one line.

Values arrive as strings from the web form and as typed values from the command line, so
validation accepts both and reports `--flag: expected ..., got ...` (exit status 2 at start-up).
"""
from __future__ import annotations

from dataclasses import dataclass

from loadgen.scenario import Scenario, ScenarioError
from loadgen.model.registry import REGISTRY, SCHEDULERS, backends, target_class

ARGS = [
    # dest, flag, default, help
    ("scenario", "--scenario", "scenarios/baseline-3x.yaml", "gangstorm scenario YAML"),
    ("schedulers", "--schedulers", "kube", "comma-separated subset of kube,volcano,ray,slurm"),
    ("backend", "--backend", "sim", "sim (simulated scheduler, time-scaled) or real"),
    ("churn", "--churn", "", "churn multiplier (empty = the scenario's)"),
    ("time_scale", "--time-scale", "60", "virtual seconds per wall second"),
    ("seed", "--seed", "", "workload seed (empty = the scenario's)"),
    ("nodes", "--nodes", "", "fleet size override (empty = the scenario's)"),
    ("results_dir", "--results-dir", "", "where summary.json goes (empty = results/<run-id>)"),
]


class OptionError(ValueError):
    """One line naming the flag and what was expected."""


@dataclass(frozen=True)
class Settings:
    scenario: Scenario
    schedulers: tuple[str, ...]
    backend: str
    time_scale: float
    results_dir: str
    wall: bool = False            # the targets run on the wall clock (jobs and chaos time-scaled)


def add_arguments(parser) -> None:
    for dest, flag, default, help_text in ARGS:
        parser.add_argument(flag, dest=dest, default=default, help=f"gangstorm: {help_text}", include_in_web_ui=True)
    # Everything gangstorm starts binds to 127.0.0.1; plain `locust -f loadgen/locust/locustfile.py` too.
    parser.set_defaults(web_host="127.0.0.1", master_bind_host="127.0.0.1")


def _number(flag: str, text, kind, positive: bool = True):
    if text is None or str(text).strip() == "":
        return None
    try:
        value = kind(str(text).strip())
    except ValueError:
        raise OptionError(f"{flag}: expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if positive and not value > 0 or (not positive and value < 0):
        raise OptionError(f"{flag}: expected a {'positive' if positive else 'non-negative'} number, got {text!r}")
    return value


def settings(opts) -> Settings:
    """Parsed Locust options -> validated Settings; raises OptionError or ScenarioError (one line)."""
    from loadgen.cli.common import load_with_overrides
    path = str(getattr(opts, "scenario", "") or "").strip()
    if not path:
        raise OptionError("--scenario: expected a scenario YAML path, got nothing")
    churn = _number("--churn", getattr(opts, "churn", ""), float)
    seed = _number("--seed", getattr(opts, "seed", ""), int, positive=False)
    nodes = _number("--nodes", getattr(opts, "nodes", ""), int)
    scale = _number("--time-scale", getattr(opts, "time_scale", "60"), float) or 60.0
    backend = str(getattr(opts, "backend", "sim") or "sim").strip()
    if backend not in backends():
        raise OptionError(f"--backend: expected {' or '.join(backends())}, got {backend!r}")
    text = str(getattr(opts, "schedulers", "") or "")
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [n for n in names if n not in SCHEDULERS]
    if bad or not names or len(set(names)) != len(names):
        raise OptionError(f"--schedulers: expected a comma-separated list of {', '.join(SCHEDULERS)}, got {text!r}")
    missing = [n for n in names if (n, backend) not in REGISTRY]
    if missing:
        raise OptionError(f"--schedulers: no {backend} target for {', '.join(missing)}")
    scenario = load_with_overrides(path, nodes=nodes, seed=seed, churn=churn)
    return Settings(scenario=scenario, schedulers=names, backend=backend, time_scale=scale,
                    results_dir=str(getattr(opts, "results_dir", "") or "").strip(),
                    wall=target_class(names[0], backend).timebase == "wall")


__all__ = ["ARGS", "OptionError", "ScenarioError", "Settings", "add_arguments", "settings"]
