"""gangstorm's Locust arguments: declared once, shown in the web UI start form, validated to one line.

Values arrive as strings from the web form and as typed values from the command line, so
validation accepts both and reports `--flag: expected ..., got ...` (exit status 2 at start-up).
"""
from __future__ import annotations

from dataclasses import dataclass

from loadgen.input.overrides import OVERRIDES, TIME_SCALE, OverrideError, load_with_overrides
from loadgen.input.scenario import Scenario, ScenarioError
from loadgen.model.registry import REGISTRY, SCHEDULERS, backends, target_class
from loadgen.model.target import Existing

ARGS = [
    # dest, flag, default, help
    ("scenario", "--scenario", "scenarios/baseline-3x.yaml", "gangstorm scenario YAML"),
    ("schedulers", "--schedulers", "kube", f"comma-separated subset of {','.join(SCHEDULERS)}"),
    ("backend", "--backend", "sim", "sim (simulated scheduler, time-scaled) or real"),
    *[(o.dest, o.flag, f"{TIME_SCALE:g}" if o.dest == "time_scale" else "", f"{o.help} (empty = the scenario's)"
       if o.key else o.help) for o in OVERRIDES.values() if o.dest != "duration_h"],
    ("profile", "--sim-profile", "",
     "calibration profile of the simulated schedulers (empty = the scenario's); Locust has its own --profile"),
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
    existing: Existing | None = None   # attach the real targets to this cluster (gangstorm locust --kubeconfig ...)


def add_arguments(parser) -> None:
    for dest, flag, default, help_text in ARGS:
        parser.add_argument(flag, dest=dest, default=default, help=f"gangstorm: {help_text}", include_in_web_ui=True)
    # Written by `gangstorm locust` after it checked the attach flags (loadgen/cli/existing.py).
    parser.add_argument("--existing", dest="existing", default="", include_in_web_ui=False,
                        help="gangstorm: JSON of the existing cluster to attach to (set by `gangstorm locust`)")
    # Everything gangstorm starts binds to 127.0.0.1; plain `locust -f loadgen/locust/locustfile.py` too.
    parser.set_defaults(web_host="127.0.0.1", master_bind_host="127.0.0.1")


def settings(opts) -> Settings:
    """Parsed Locust options -> validated Settings; raises OptionError or ScenarioError (one line)."""
    path = str(getattr(opts, "scenario", "") or "").strip()
    if not path:
        raise OptionError("--scenario: expected a scenario YAML path, got nothing")
    try:
        values = {d: o.parse(getattr(opts, d, "")) for d, o in OVERRIDES.items() if d != "duration_h"}
    except OverrideError as e:
        raise OptionError(str(e)) from None
    scale = values.pop("time_scale") or TIME_SCALE
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
    scenario = load_with_overrides(path, profile=str(getattr(opts, "profile", "") or "").strip() or None, **values)
    existing = _existing(str(getattr(opts, "existing", "") or ""))
    return Settings(scenario=scenario, schedulers=names, backend=backend, time_scale=scale,
                    results_dir=str(getattr(opts, "results_dir", "") or "").strip(),
                    wall=target_class(names[0], backend).timebase == "wall", existing=existing)


def _existing(text: str) -> Existing | None:
    if not text.strip():
        return None
    import json
    try:
        return Existing(**json.loads(text))
    except (ValueError, TypeError) as e:
        raise OptionError(f"--existing: expected the JSON `gangstorm locust` writes, got {text[:80]!r} ({e})") from None


__all__ = ["ARGS", "OptionError", "ScenarioError", "Settings", "add_arguments", "settings"]
