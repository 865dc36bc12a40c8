"""Calibration profiles: the timing and cost parameters of the simulated schedulers, each with
where its value came from, and how far the profile was from the real schedulers on held-out cases.

A profile is a YAML file (the shipped ones are fakes/profiles/<name>.yaml):

    name: local
    description: what hardware and which runs it was fitted to
    parameters:
      <section>:                      # kube | volcano | ray | slurm | control_plane
        <key>:
          value: 1.5
          unit: ms
          provenance: measured        # measured | fitted | sourced
          source: the real component's metric, or the publication
          command: how it was measured or fitted (measured and fitted only)
    validation:                       # written by `gangstorm calibrate`; absent = uncalibrated
      <scheduler>: {cases: [...], admission_p50_ratio: ..., ...}

A scenario never carries these values itself: its schema marks them PROFILE and loading resolves
them from the run's profile (a scenario may still set one explicitly; the summary then says so).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadgen.input import yamlfile
from loadgen.model.errors import UserError

MAX_VALUE = 1e9             # no timing or size parameter comes near: ms, us, bytes or s

# "unsourced" marks a value awaiting measurement: allowed while a profile is being built, never in a
# shipped one (tests/test_profiles.py), and a result that used one says so.
PROVENANCES = ("measured", "fitted", "sourced", "unsourced")
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "fakes" / "profiles"
DEFAULT = "reference"


class ProfileError(UserError):
    """One line: the profile file, the field and what was expected."""

    def __init__(self, source: str, field: str, expected: str):
        super().__init__(f"{source}: {field}: {expected}" if field else f"{source}: {expected}")


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    provenance: str
    source: str
    command: str = ""


@dataclass
class Profile:
    name: str
    path: str
    description: str
    params: dict[str, dict[str, Param]]
    validation: dict[str, Any] = field(default_factory=dict)

    def value(self, section: str, key: str) -> float:
        try:
            return self.params[section][key].value
        except KeyError:
            raise ProfileError(self.path, f"parameters.{section}.{key}", "is missing (the scenario takes it from the profile)") from None

    def calibrated(self, scheduler: str) -> bool:
        """Only a held-out validation makes a scheduler's profile calibrated."""
        return bool((self.validation.get(scheduler) or {}).get("held_out"))

    def status(self, scheduler: str) -> dict[str, Any]:
        """What a result says about the model that produced it."""
        v = self.validation.get(scheduler) or {}
        out: dict[str, Any] = {"profile": self.name, "profile_path": self.path,
                               "calibrated": self.calibrated(scheduler)}
        if out["calibrated"]:
            out["held_out_error"] = v["held_out"]
        else:
            out["note"] = f"uncalibrated: profile {self.name!r} has no held-out validation for {scheduler}"
        return out


def resolve(name_or_path: str | None) -> Path:
    """A shipped profile's name (local, reference) or a path to a profile file."""
    text = name_or_path or DEFAULT
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or p.parent != Path("."):
        return p
    return BUILTIN_DIR / f"{text}.yaml"


def load(name_or_path: str | None = None) -> Profile:
    path = resolve(name_or_path)
    src = str(path)
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")))
        raise ProfileError(src, "", f"no such profile (shipped: {shipped}; or give a path)")
    try:
        raw = yamlfile.read(path)
    except yamlfile.YamlFileError as e:
        raise ProfileError(src, e.where, e.expected) from None
    if not isinstance(raw, dict):
        raise ProfileError(src, "", "expected a mapping with name, parameters and (optionally) validation")
    params: dict[str, dict[str, Param]] = {}
    sections = raw.get("parameters")
    if not isinstance(sections, dict) or not sections:
        raise ProfileError(src, "parameters", "expected a mapping of sections")
    for section, keys in sections.items():
        if not isinstance(keys, dict):
            raise ProfileError(src, f"parameters.{section}", "expected a mapping of parameters")
        params[str(section)] = {str(k): _param(v, src, f"parameters.{section}.{k}") for k, v in keys.items()}
    validation = raw.get("validation") or {}
    if not isinstance(validation, dict):
        raise ProfileError(src, "validation", "expected a mapping by scheduler")
    return Profile(name=str(raw.get("name") or path.stem), path=src, description=str(raw.get("description") or ""),
                   params=params, validation=validation)


def _param(v: Any, src: str, where: str) -> Param:
    if not isinstance(v, dict):
        raise ProfileError(src, where, "expected {value, unit, provenance, source[, command]}")
    value = v.get("value")
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 <= value <= MAX_VALUE):
        raise ProfileError(src, f"{where}.value", f"expected a finite number in [0, {MAX_VALUE:g}], got {value!r}")
    prov = v.get("provenance")
    if prov not in PROVENANCES:
        raise ProfileError(src, f"{where}.provenance", f"expected one of {', '.join(PROVENANCES)}, got {prov!r}")
    source = str(v.get("source") or "").strip()
    if not source:
        raise ProfileError(src, f"{where}.source", "expected the metric or publication the value comes from")
    command = str(v.get("command") or "").strip()
    if prov in ("measured", "fitted") and not command:
        raise ProfileError(src, f"{where}.command", f"expected the command a {prov} value came from")
    return Param(value=float(value), unit=str(v.get("unit") or ""), provenance=prov, source=source, command=command)


def dump(profile: Profile) -> str:
    """YAML text of a profile (what `gangstorm calibrate` writes)."""
    params = {s: {k: {"value": p.value, "unit": p.unit, "provenance": p.provenance, "source": p.source,
                      **({"command": p.command} if p.command else {})} for k, p in keys.items()}
              for s, keys in profile.params.items()}
    doc = {"name": profile.name, "description": profile.description, "parameters": params}
    if profile.validation:
        doc["validation"] = profile.validation
    return yaml.safe_dump(doc, sort_keys=False, width=110)
