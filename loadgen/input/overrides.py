"""The scenario overrides every entry point takes, declared once: --nodes, --seed, --churn,
--duration-h, --time-scale and --ray-nodes.

The CLI subcommands add them with cli.common.add_overrides (asv's common_args); the Locust driver
declares the same ones in its web UI form, where values arrive as text. Either way a bad value is
one line, `--flag: expected ..., got ...`: refused by the flag's own parsing here, or by the
scenario's schema in the one validation of the file with every override in place (then the
scenario key follows in parentheses).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadgen.input.scenario import Scenario, load
from loadgen.model.errors import UserError

TIME_SCALE = 60.0           # wall-clock backends: virtual seconds per wall second, by default


class OverrideError(UserError):
    """A bad override value: one line naming the flag and what was expected."""


@dataclass(frozen=True)
class Override:
    dest: str
    flag: str
    key: str | None           # the dotted scenario key it sets (None: a run option, not a scenario key)
    kind: type
    positive: bool            # > 0, else >= 0
    help: str
    choices: tuple[str, ...] = ()     # kind str: the values accepted

    def parse(self, text) -> int | float | str | None:
        """Text (web form) or a typed value (argparse) -> value; empty -> None."""
        if text is None or str(text).strip() == "":
            return None
        if self.kind is str:
            if str(text).strip() not in self.choices:
                raise OverrideError(f"{self.flag}: expected one of {', '.join(self.choices)}, got {text!r}")
            return str(text).strip()
        noun = "integer" if self.kind is int else "number"
        sign = "positive" if self.positive else "non-negative"
        try:
            value = self.kind(str(text).strip())
        except ValueError:
            raise OverrideError(f"{self.flag}: expected {'an' if noun == 'integer' else 'a'} {noun}, "
                                f"got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or (value <= 0 if self.positive else value < 0):
            raise OverrideError(f"{self.flag}: expected a {sign} {noun}, got {text!r}")
        return value


OVERRIDES = {o.dest: o for o in (
    Override("nodes", "--nodes", "fleet.nodes", int, True, "fleet size (overrides fleet.nodes)"),
    Override("seed", "--seed", "seed", int, False, "workload seed (overrides the scenario's)"),
    Override("churn", "--churn", "workload.churn_multiplier", float, True,
             "churn multiplier (overrides workload.churn_multiplier)"),
    Override("duration_h", "--duration-h", "duration_h", float, True, "hours of arrivals (overrides duration_h)"),
    Override("time_scale", "--time-scale", None, float, True,
             f"wall-clock backends: virtual seconds per wall second (default {TIME_SCALE:g})"),
    Override("ray_nodes", "--ray-nodes", "schedulers.ray.nodes", str, False,
             "--backend real: the Ray fleet's nodes, raylet (real raylets, up to 256) or fakelet (fake raylets "
             "on the real GCS, up to 20,000; overrides schedulers.ray.nodes)", ("raylet", "fakelet")),
)}


def load_with_overrides(path: str, profile: str | None = None, more: dict[str, tuple[str, Any]] | None = None,
                        **values) -> Scenario:
    """The scenario at `path` with the given override values (None = keep the scenario's) and a
    subcommand's own flags (`more`: flag -> (dotted key, value)) in place of the file's, validated
    once; its simulated schedulers timed by `profile` (None = the scenario's own choice). A value
    the scenario refuses is one line naming its flag."""
    if isinstance(profile, str):           # a flag's value: its error names the flag, not the scenario
        from loadgen.input.profile import ProfileError
        from loadgen.input.profile import load as load_profile
        try:
            profile = load_profile(profile)
        except ProfileError as e:
            raise OverrideError(f"--profile {e}") from None
    given = {OVERRIDES[d].flag: (OVERRIDES[d].key, v) for d, v in values.items() if v is not None and OVERRIDES[d].key}
    given.update({flag: (key, v) for flag, (key, v) in (more or {}).items() if v is not None})
    return load(path, profile, overrides={key: v for key, v in given.values()},
                flags={key: flag for flag, (key, _) in given.items()})
