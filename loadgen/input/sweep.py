"""Sweep specs: a grid of runs in one YAML file, validated to a Sweep whose cells each hold their
scenario, built and checked as `gangstorm run` would build it.

    name: churn-by-scheduler          # optional (default: the file's stem)
    scenarios: [baseline-3x.yaml]     # required: scenario files, relative to this file
    schedulers: [kube, slurm]         # default: each scenario's schedulers_enabled
    seeds: 5                          # N: each scenario's seed and the next N-1; or a list [1, 2, 3]
    churn: [1, 3, 6]                  # workload.churn_multiplier (default: the scenario's)
    profiles: [reference, local]      # calibration profiles: shipped names or files (default: the scenario's)
    nodes: [500, 2000]                # fleet.nodes (default: the scenario's)
    set: {duration_h: 2}              # dotted scenario keys given the same value in every cell

A cell is one scenario x scheduler x seed x churn x profile x nodes: one run folder. Every axis but
`scenarios` is optional. Errors are one line naming the spec file (or the scenario or profile file
that is wrong), the field and what was expected, before anything is written: an unknown key, a
wrong type or range (axis values are checked against the scenario schema's own field), an axis
value given twice, a `set` key an axis already varies, a combination the scenario refuses (the
scenario's error, with the cell it came from), or more than MAX_CELLS cells.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.input import names, yamlfile
from loadgen.input import profile as profiles
from loadgen.input.plan import plan_run
from loadgen.input.scenario import Scenario, ScenarioError, from_dict, validate
from loadgen.input.schema import SCENARIO, Field, ListOf
from loadgen.input.traces import is_csv
from loadgen.model.errors import UserError
from loadgen.model.registry import SCHEDULERS

MAX_CELLS = 5000
MAX_SEEDS = 60                        # as `--seeds` (the exact rank tests' limit)
BACKEND = "sim"                       # a sweep runs the simulated schedulers (cells side by side)

# axis -> (the dotted scenario key it sets, the field its values are checked against)
AXES: dict[str, tuple[str | None, Any]] = {
    "schedulers": ("schedulers_enabled", Field(str, choices=SCHEDULERS)),
    "churn": ("workload.churn_multiplier", SCENARIO["workload"]["churn_multiplier"]),
    "profiles": ("profile", Field(str)),
    "nodes": ("fleet.nodes", SCENARIO["fleet"]["nodes"]),
    "seeds": ("seed", SCENARIO["seed"]),
}
TOP_KEYS = ("name", "description", "scenarios", *AXES, "set")


class SweepError(ScenarioError):
    """A bad sweep spec: one line naming the spec file, the field and what was expected."""


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a scenario (every axis value in place) on one scheduler."""
    index: int
    name: str                   # its folder under cells/
    scenario: Scenario
    scheduler: str
    seed: int
    churn: float
    profile: str                # as the spec (or the scenario) names it
    nodes: int
    fingerprint: str            # of everything that decides its results (sweep resumes check it)

    def key(self) -> dict[str, Any]:
        """What the index and the summary group by."""
        return {"cell": self.index, "dir": f"cells/{self.name}", "scenario": self.scenario.name,
                "scenario_path": self.scenario.path, "scheduler": self.scheduler, "seed": self.seed,
                "churn": self.churn, "profile": self.profile, "nodes": self.nodes, "fingerprint": self.fingerprint}


@dataclass
class Sweep:
    path: str
    name: str
    description: str
    axes: dict[str, Any]        # every axis as given (None: the scenario's own value)
    set: dict[str, Any]
    cells: list[Cell]

    def identity(self) -> dict[str, Any]:
        """What a resumed sweep must match: its cells, each by folder and fingerprint."""
        return {"cells": [[c.name, c.fingerprint] for c in self.cells]}


def load(path: str | Path) -> Sweep:
    """The spec at `path`, every cell's scenario built and its run planned once (then dropped), so
    that nothing a cell could refuse is found after the sweep has started."""
    src = str(path)
    raw = _read(src)
    base = Path(src).parent
    unknown = sorted(map(str, set(raw) - set(TOP_KEYS)))
    if unknown:
        raise SweepError(src, names.shown(unknown[0]), f"unknown key (known: {', '.join(TOP_KEYS)})")
    name = validate(raw.get("name"), Field(str, None, nullable=True), src, "name") or Path(src).stem
    if why := names.problem(name):
        raise SweepError(src, "name", why)
    description = validate(raw.get("description", ""), Field(str, "", nullable=True), src, "description") or ""
    if "scenarios" not in raw:
        raise SweepError(src, "scenarios", "is required (a list of scenario files, relative to this file)")
    files = _values(raw["scenarios"], Field(str), src, "scenarios")
    axes = {axis: _axis(raw, axis, src) for axis in AXES}
    given = _set(raw.get("set", {}), axes, src)
    bound = len(files) * (len(axes["schedulers"]) if axes["schedulers"] else len(SCHEDULERS))
    for axis in ("seeds", "churn", "profiles", "nodes"):
        v = axes[axis]
        bound *= (v if isinstance(v, int) else len(v)) if v is not None else 1
    if axes["schedulers"] is not None and bound > MAX_CELLS:        # else the count below stops it
        raise SweepError(src, "", _too_many(bound))
    loaded_profiles = {p: _profile(p, base, src, i) for i, p in enumerate(axes["profiles"] or [])}
    cells: list[Cell] = []
    for si, file in enumerate(files):
        scenario_path = str(base / file) if not Path(file).is_absolute() else file
        scenario_raw = _scenario_raw(scenario_path, src, si)
        for label, prof in (loaded_profiles.items() if loaded_profiles else [(None, None)]):
            for ni, nodes in enumerate(axes["nodes"] or [None]):
                for ci, churn in enumerate(axes["churn"] or [None]):
                    built = _built(scenario_raw, scenario_path, prof, nodes, churn, given, src, (si, ni, ci))
                    seeds = _seeds(axes["seeds"], built.seed)
                    schedulers = axes["schedulers"] or list(built.data["schedulers_enabled"])
                    for sch in schedulers:
                        for seed in seeds:
                            sc = built if seed == built.seed else built.with_overrides(seed=seed)
                            cells.append(_cell(len(cells), sc, sch, label or sc.profile.name))
                            if len(cells) > MAX_CELLS:
                                raise SweepError(src, "", _too_many(len(cells), exact=False))
    _check_plans(cells, src)
    return Sweep(path=src, name=name, description=description, axes={"scenarios": files, **axes}, set=given,
                 cells=cells)


def _too_many(n: int, exact: bool = True) -> str:
    got = f"{n:,}" if exact else f"more than {MAX_CELLS:,}"
    return (f"expected at most {MAX_CELLS:,} cells (scenarios x schedulers x seeds x churn x profiles x nodes), "
            f"got {got}; split the grid into several sweeps")


def _read(src: str) -> dict:
    try:
        raw = yamlfile.read(src, "sweep spec")
    except yamlfile.YamlFileError as e:
        raise SweepError(src, e.where, "no such sweep spec" if e.expected == "no such file" else e.expected) from None
    if raw is None:
        raise SweepError(src, "",
                         "is empty; expected a sweep spec mapping with at least `scenarios:` (see docs/sweep.md)")
    if not isinstance(raw, dict):
        raise SweepError(src, "", f"expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def _values(value: Any, field: Field, src: str, key: str) -> list:
    """A non-empty list of distinct values, each checked against `field` (a scalar: a list of one)."""
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise SweepError(src, key, "expected at least one value (leave the key out for the scenario's own)")
    out = validate(value, ListOf(field), src, key)
    for i, v in enumerate(out):
        if v in out[:i]:
            raise SweepError(src, f"{key}[{i}]", f"expected each value once, got {v!r} twice")
    return out


def _axis(raw: dict, axis: str, src: str) -> Any:
    if axis not in raw:
        return None
    _, field = AXES[axis]
    value = raw[axis]
    if axis == "seeds" and isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SEEDS:
            raise SweepError(src, "seeds", f"expected a count 1 to {MAX_SEEDS} (each scenario's seed and the next "
                             f"ones) or a list of distinct seeds, got {value}")
        return value
    out = _values(value, field, src, axis)
    if axis == "seeds" and len(out) > MAX_SEEDS:
        raise SweepError(src, "seeds", f"expected at most {MAX_SEEDS} seeds, got {len(out)}")
    return out


def _set(value: Any, axes: dict, src: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SweepError(src, "set",
                         f"expected a mapping of dotted scenario keys to values, got {type(value).__name__}")
    varied = {key: axis for axis, (key, _) in AXES.items() if key and axes[axis] is not None}
    for key in value:
        if not isinstance(key, str):
            raise SweepError(src, "set", f"expected dotted scenario keys, got {type(key).__name__} {key!r}")
        if key in varied or any(key.startswith(k + ".") for k in varied):
            raise SweepError(src, f"set.{_dotted(key)}", f"the {varied.get(key, key)} axis varies it already; "
                             "give its values there")
        if key == "name":
            raise SweepError(src, "set.name",
                             "a cell keeps its scenario's name (name the sweep with the top-level name:)")
    return dict(value)


def _dotted(key: str) -> str:
    return ".".join(names.shown(part) for part in key.split("."))


def _profile(text: str, base: Path, src: str, i: int):
    p = profiles.resolve(text)
    target = text if p.parent == profiles.BUILTIN_DIR or p.is_absolute() else str(base / text)
    try:
        return profiles.load(target)
    except UserError as e:
        raise SweepError(src, f"profiles[{i}]", str(e)) from None


def _scenario_raw(path: str, src: str, i: int) -> dict:
    try:
        raw = yamlfile.read(path)
    except yamlfile.YamlFileError as e:
        if e.expected == "no such file":
            raise SweepError(src, f"scenarios[{i}]", f"no such scenario file {path!r} (paths are relative to the "
                             "spec file)") from None
        raise ScenarioError(path, e.where, e.expected) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScenarioError(path, "", f"expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def _built(raw: dict, path: str, prof, nodes, churn, given: dict, src: str, at: tuple[int, int, int]) -> Scenario:
    """The scenario with the cell's values in place; a value the scenario refuses names the axis."""
    si, ni, ci = at
    overrides = dict(given)
    flags = {key: f"{src}: set.{_dotted(key)}" for key in given}
    for axis, value, i in (("nodes", nodes, ni), ("churn", churn, ci)):
        if value is not None:
            overrides[AXES[axis][0]] = value
            flags[AXES[axis][0]] = f"{src}: {axis}[{i}]"
    try:
        sc = from_dict(raw, path, prof, overrides, flags)
    except ScenarioError as e:
        if str(e).startswith(src + ":"):
            raise
        raise SweepError(src, f"scenarios[{si}]", f"{e} (in the cell {_where(path, prof, nodes, churn)})") from None
    trace = sc.section("workload")["trace"]
    if churn is not None and trace and not is_csv(trace):
        raise SweepError(src, "churn", f"{path} replays the JSONL trace {trace} at its recorded submit times; "
                         "expected no churn axis for it (export the trace again at each churn)")
    return sc


def _where(path: str, prof, nodes, churn, seed=None) -> str:
    parts = [Path(path).name] + ([f"profile {prof.name}"] if prof else []) + ([f"nodes {nodes}"] if nodes else []) \
        + ([f"churn {churn:g}"] if churn else []) + ([f"seed {seed}"] if seed is not None else [])
    return ", ".join(parts)


def _seeds(axis, first: int) -> list[int]:
    if axis is None:
        return [first]
    if isinstance(axis, int):
        return [first + k for k in range(axis)]
    return list(axis)


def fingerprint(scenario: Scenario, scheduler: str) -> str:
    """Every input that decides a cell's results: the validated scenario (profile values resolved),
    the scheduler and the backend. A changed scenario or profile gives another fingerprint."""
    doc = json.dumps({"data": scenario.data, "scheduler": scheduler, "backend": BACKEND}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(text: str, limit: int = 40) -> str:
    """A name as part of a folder name: letters, digits, '.', '_', '-' (output/paths.py's policy)."""
    return SAFE.sub("-", str(text)).strip(".-")[:limit].strip(".-") or "x"


def _cell(index: int, sc: Scenario, scheduler: str, profile: str) -> Cell:
    churn = float(sc.section("workload")["churn_multiplier"])
    nodes = int(sc.section("fleet")["nodes"])
    name = f"{index:04d}-{_slug(sc.name)}-{_slug(scheduler)}-x{churn:g}-s{sc.seed}-{_slug(Path(profile).stem)}-n{nodes}"
    return Cell(index=index, name=name, scenario=sc, scheduler=scheduler, seed=sc.seed, churn=churn, profile=profile,
                nodes=nodes, fingerprint=fingerprint(sc, scheduler))


def _check_plans(cells: list[Cell], src: str) -> None:
    """Each distinct scenario of the grid planned once (the scheduler does not change the plan)."""
    seen: set[str] = set()
    for c in cells:
        key = fingerprint(c.scenario, "")
        if key in seen:
            continue
        seen.add(key)
        try:
            plan_run(c.scenario)
        except UserError as e:
            where = _where(c.scenario.path, c.scenario.profile, c.nodes, c.churn, c.seed)
            raise SweepError(src, "scenarios", f"{e} (in the cell {where})") from None
