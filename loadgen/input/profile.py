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
from loadgen.input.names import shown
from loadgen.input.schema import PROFILE, SCENARIO, Field
from loadgen.model.errors import UserError

MAX_VALUE = 1e9             # no timing or size parameter comes near: ms, us, bytes or s

# "unsourced" marks a value awaiting measurement: allowed while a profile is being built, never in a
# shipped one (tests/test_profiles.py), and a result that used one says so.
PROVENANCES = ("measured", "fitted", "sourced", "unsourced")
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "fakes" / "profiles"
DEFAULT = "reference"
SCHEDULERS = tuple(SCENARIO["schedulers"])


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
            raise ProfileError(self.path, f"parameters.{section}.{key}",
                               "is missing (the scenario takes it from the profile)") from None

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
            why = v.get("uncalibrated_because") or f"profile {self.name!r} has no held-out validation for {scheduler}"
            out["note"] = f"uncalibrated: {why}"
        return out


def resolve(name_or_path: str | None) -> Path:
    """A shipped profile's name (local, reference) or a path to a profile file."""
    text = name_or_path or DEFAULT
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or p.parent != Path("."):
        return p
    return BUILTIN_DIR / f"{text}.yaml"


def load(name_or_path: str | None = None) -> Profile:
    """The profile, checked in one pass: its keys and sections, every parameter against the range
    the scenario schema gives it (a profile may not set what a scenario could not: a zero lease
    period, a negative cost), and the validation block every result quotes."""
    path = resolve(name_or_path)
    src = str(path)
    try:
        raw = yamlfile.read(path, "profile file")
    except yamlfile.YamlFileError as e:
        if e.expected == "no such file":
            shipped = ", ".join(sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")))
            raise ProfileError(src, "", f"no such profile (shipped: {shipped}; or give a path)") from None
        raise ProfileError(src, e.where, e.expected) from None
    if not isinstance(raw, dict):
        raise ProfileError(src, "", "expected a mapping with name, parameters and (optionally) validation")
    unknown = sorted(map(str, set(raw) - set(TOP_KEYS)))
    if unknown:
        raise ProfileError(src, shown(unknown[0]), f"unknown key (known: {', '.join(TOP_KEYS)})")
    for key in ("name", "description"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ProfileError(src, key, f"expected a string, got {type(raw[key]).__name__} {raw[key]!r}")
    params: dict[str, dict[str, Param]] = {}
    sections = raw.get("parameters")
    if not isinstance(sections, dict) or not sections:
        raise ProfileError(src, "parameters", "expected a mapping of sections")
    for section, keys in sections.items():
        fields = profile_fields(section)
        if fields is None:
            raise ProfileError(src, f"parameters.{shown(section)}", f"unknown section (known: {', '.join(SECTIONS)})")
        if not isinstance(keys, dict):
            raise ProfileError(src, f"parameters.{section}", "expected a mapping of parameters")
        for k in keys:
            if k not in fields:
                raise ProfileError(src, f"parameters.{section}.{shown(k)}",
                                   f"unknown parameter (known: {', '.join(fields)})")
        params[section] = {k: _param(v, src, f"parameters.{section}.{k}", fields[k]) for k, v in keys.items()}
    for section, keys, what in NOT_ALL_ZERO:
        have = params.get(section) or {}
        if all(k in have for k in keys) and not any(have[k].value for k in keys):
            raise ProfileError(src, f"parameters.{section}", f"expected {what} (one of {', '.join(keys)} above 0), "
                               "got 0 for all of them")
    validation = raw.get("validation") or {}
    check_validation(validation, src)
    return Profile(name=str(raw.get("name") or path.stem), path=src, description=str(raw.get("description") or ""),
                   params=params, validation=validation)


TOP_KEYS = ("name", "description", "parameters", "validation")
# Costs that may each be 0 but not all at once: the model divides by their sum (a scenario setting
# them is held to the same, loadgen/input/scenario.py).
NOT_ALL_ZERO = (("ray", ("gcs_base_ms", "gcs_per_bundle_ms", "gcs_per_bundle_sq_us", "gcs_per_node_us",
                         "commit_rtt_ms"),
                 "a GCS that takes some time per placement group"),)
SECTIONS = (*SCHEDULERS, "control_plane")


def profile_fields(section: str) -> dict[str, Field] | None:
    """The scenario schema's profile-supplied fields of a section, by dotted key (e.g.
    `object_bytes.pod`); None for a section no profile has."""
    if section not in SECTIONS:
        return None
    spec = SCENARIO["control_plane"] if section == "control_plane" else SCENARIO["schedulers"][section]

    def walk(sub, prefix=""):
        for key, f in sub.items():
            if isinstance(f, dict):
                yield from walk(f, f"{prefix}{key}.")
            elif isinstance(f, Field) and f.default is PROFILE:
                yield f"{prefix}{key}", f
    return dict(walk(spec))


def _param(v: Any, src: str, where: str, spec: Field) -> Param:
    if not isinstance(v, dict):
        raise ProfileError(src, where, "expected {value, unit, provenance, source[, command]}")
    unknown = sorted(map(shown, set(v) - {"value", "unit", "provenance", "source", "command"}))
    if unknown:
        raise ProfileError(src, f"{where}.{unknown[0]}",
                           "unknown key (known: value, unit, provenance, source, command)")
    value = v.get("value")
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 <= value <= MAX_VALUE):
        raise ProfileError(src, f"{where}.value", f"expected a finite number in [0, {MAX_VALUE:g}], got {value!r}")
    if spec.lo is not None and value < spec.lo:       # the range a scenario setting it would get
        raise ProfileError(src, f"{where}.value", f"expected >= {spec.lo:g}, got {value!r}")
    if spec.hi is not None and value > spec.hi:
        raise ProfileError(src, f"{where}.value", f"expected <= {spec.hi:g}, got {value!r}")
    prov = v.get("provenance")
    if prov not in PROVENANCES:
        raise ProfileError(src, f"{where}.provenance", f"expected one of {', '.join(PROVENANCES)}, got {prov!r}")
    for key in ("unit", "source", "command"):
        if v.get(key) is not None and not isinstance(v[key], str):
            raise ProfileError(src, f"{where}.{key}", f"expected a string, got {type(v[key]).__name__} {v[key]!r}")
    source = str(v.get("source") or "").strip()
    if not source:
        raise ProfileError(src, f"{where}.source", "expected the metric or publication the value comes from")
    command = str(v.get("command") or "").strip()
    if prov in ("measured", "fitted") and not command:
        raise ProfileError(src, f"{where}.command", f"expected the command a {prov} value came from")
    return Param(value=float(value), unit=str(v.get("unit") or ""), provenance=prov, source=source, command=command)


# --- the validation block ------------------------------------------------------------------------
# What `gangstorm calibrate` writes and every output reads (summary.md's model line, report.html,
# `profile show`): the kinds each key must have. SPAN is null or [low, high].
NUM, SPAN, TEXT = "a number", "null or [low, high]", "a string"
HELD_OUT_REAL = {"cases": TEXT, "real_runs_per_case": "an integer", "p50_ratio": SPAN, "p99_ratio": SPAN,
                 "p999_ratio": SPAN, "util_diff_pp": SPAN, "within_goal": "true or false"}
HELD_OUT_PUBLISHED = {"anchors": TEXT, "ratio": SPAN, "within_goal": "true or false"}
ROW = {"case": TEXT, "role": TEXT, "runs": "an integer", "n": "an integer", "p50_ratio": "a number or null",
       "p99_ratio": "a number or null", "p999_ratio": "a number or null", "util_diff_pp": "a number or null",
       "real": "a mapping", "real_spread": "a mapping", "sim": "a mapping", "within_goal": "true or false"}
ANCHOR = {"anchor": TEXT, "role": TEXT, "unit": TEXT, "published": NUM, "sim": NUM, "ratio": NUM}


def _is(kind: str, v: Any) -> bool:
    number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return {TEXT: isinstance(v, str), NUM: number, "a number or null": v is None or number,
            "an integer": isinstance(v, int) and not isinstance(v, bool), "true or false": isinstance(v, bool),
            "a mapping": isinstance(v, dict),
            SPAN: v is None or (isinstance(v, list) and len(v) == 2 and all(_is(NUM, x) for x in v))}[kind]


def _check_keys(obj: Any, spec: dict[str, str], src: str, where: str) -> None:
    if not isinstance(obj, dict):
        raise ProfileError(src, where, f"expected a mapping with {', '.join(spec)}, got {type(obj).__name__}")
    for key, kind in spec.items():
        if key not in obj:
            raise ProfileError(src, f"{where}.{key}", "is required")
        if not _is(kind, obj[key]):
            raise ProfileError(src, f"{where}.{key}", f"expected {kind}, got {obj[key]!r}"[:300])


def check_validation(validation: Any, src: str) -> None:
    """The validation block as gangstorm calibrate writes it; unknown extra keys are kept."""
    if not isinstance(validation, dict):
        raise ProfileError(src, "validation", "expected a mapping by scheduler")
    for name, entry in validation.items():
        where = f"validation.{shown(name)}"
        if name not in SCHEDULERS:
            raise ProfileError(src, where, f"unknown scheduler (known: {', '.join(SCHEDULERS)})")
        if not isinstance(entry, dict):
            raise ProfileError(src, where, f"expected a mapping (held_out, rows, anchors, ...), got "
                               f"{type(entry).__name__}")
        held = entry.get("held_out")
        if held is not None:
            _check_keys(held, HELD_OUT_PUBLISHED if isinstance(held, dict) and "anchors" in held else HELD_OUT_REAL,
                        src, f"{where}.held_out")
            if "because" in held and not _is(TEXT, held["because"]):
                raise ProfileError(src, f"{where}.held_out.because", f"expected {TEXT}, got {held['because']!r}"[:300])
        if "uncalibrated_because" in entry and not _is(TEXT, entry["uncalibrated_because"]):
            raise ProfileError(src, f"{where}.uncalibrated_because",
                               f"expected {TEXT}, got {entry['uncalibrated_because']!r}"[:300])
        for key, spec in (("rows", ROW), ("anchors", ANCHOR)):
            items = entry.get(key)
            if items is None:
                continue
            if not isinstance(items, list):
                raise ProfileError(src, f"{where}.{key}", f"expected a list, got {type(items).__name__}")
            for i, item in enumerate(items):
                _check_keys(item, spec, src, f"{where}.{key}[{i}]")


def dump(profile: Profile) -> str:
    """YAML text of a profile (what `gangstorm calibrate` writes)."""
    params = {s: {k: {"value": p.value, "unit": p.unit, "provenance": p.provenance, "source": p.source,
                      **({"command": p.command} if p.command else {})} for k, p in keys.items()}
              for s, keys in profile.params.items()}
    doc = {"name": profile.name, "description": profile.description, "parameters": params}
    if profile.validation:
        doc["validation"] = profile.validation
    return yaml.safe_dump(doc, sort_keys=False, width=110)
