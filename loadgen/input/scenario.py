"""Scenario files: YAML in, a validated Scenario with every default filled in out.

Overrides (dotted keys such as `fleet.nodes`, from command-line flags or from code) replace the
file's values in its raw data before the one validation pass, so an overridden value is checked
exactly as the file's own would be. Errors are one line naming the file, the field and what was
expected; an error in a value a flag gave names the flag instead (`--nodes: expected <= 1000000,
got 2000000 (fleet.nodes)`). The CLI turns them into exit status 2; nothing here prints or exits.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.input import names, pools, yamlfile
from loadgen.input import profile as profiles
from loadgen.input.profile import Profile, ProfileError
from loadgen.input.schema import DEFAULT_CLASSES, PROFILE, REQUIRED, SCENARIO, Field, ListOf, MapOf
from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet
from loadgen.model.startup.spec import StartupSpec


class ScenarioError(UserError):
    """A user error in a scenario file or an override: one line, file + field + expectation."""

    def __init__(self, source: str, field: str, expected: str):
        self.source, self.field, self.expected = source, field, expected
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {expected}")


MAX_MAGNITUDE = 1e12        # any unbounded numeric field: far beyond sense, well inside float and int64
MAX_STRING = 4096


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _yaml_number(text: str) -> str:
    """1e3 -> 1.0e+3: the spelling YAML 1.1 (PyYAML) reads as a number."""
    mant, _, exp = text.lower().partition("e")
    if not exp:
        return text
    mant = mant if "." in mant else mant + ".0"
    return f"{mant}e{exp if exp[0] in '+-' else '+' + exp}"


def _type_name(t) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if isinstance(t, tuple):
        return "a number" if set(t) == {int, float} else " or ".join(names.get(x, x.__name__) for x in t)
    return names.get(t, t.__name__)


def _leaf(value: Any, spec: Field, src: str, path: str) -> Any:
    if value is PROFILE and spec.default is PROFILE:
        return value
    if value is None:
        if spec.nullable:
            return None
        raise ScenarioError(src, path, f"expected {_type_name(spec.type)}, got null")
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    # bool is an int in Python; a YAML `true` is never a valid number here.
    if isinstance(value, bool) and bool not in types:
        raise ScenarioError(src, path, f"expected {_type_name(spec.type)}, got {value!r}")
    if not isinstance(value, types):
        if float in types and isinstance(value, int):
            value = float(value)
        elif (float in types or int in types) and isinstance(value, str) and _looks_numeric(value):
            raise ScenarioError(src, path, f"expected {_type_name(spec.type)}, got the text {value!r} (YAML reads "
                                f"{value} as text; write {_yaml_number(value)} or the plain number)")
        else:
            raise ScenarioError(src, path, f"expected {_type_name(spec.type)}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(src, path, f"expected a finite number, got {value!r}")
    if isinstance(value, (int, float)) and abs(value) > MAX_MAGNITUDE and spec.hi is None:
        raise ScenarioError(src, path, f"expected a number of magnitude at most {MAX_MAGNITUDE:g}, got {value!r}")
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise ScenarioError(src, path, f"expected a string of at most {MAX_STRING} characters, got {len(value):,}")
    if spec.choices is not None and value not in spec.choices:
        raise ScenarioError(src, path, f"expected one of {', '.join(map(str, spec.choices))}, got {value!r}")
    if spec.lo is not None and value < spec.lo:
        raise ScenarioError(src, path, f"expected >= {spec.lo}, got {value!r}")
    if spec.hi is not None and value > spec.hi:
        raise ScenarioError(src, path, f"expected <= {spec.hi}, got {value!r}")
    return value


def _default(spec: Any, src: str, path: str) -> Any:
    if isinstance(spec, Field):
        if spec.default is REQUIRED:
            raise ScenarioError(src, path, "is required")
        return copy.deepcopy(spec.default)
    if isinstance(spec, (MapOf, ListOf)):
        return copy.deepcopy(spec.default)
    return validate({}, spec, src, path)


def validate(value: Any, spec: Any, src: str, path: str = "") -> Any:
    """Check `value` against `spec`, filling defaults; raise ScenarioError on the first problem."""
    if isinstance(spec, Field):
        return _leaf(value, spec, src, path)
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ScenarioError(src, path, f"expected a list, got {type(value).__name__}")
        return [validate(v, spec.item, src, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise ScenarioError(src, path, f"expected a mapping, got {type(value).__name__}")
        return {str(k): validate(v, spec.item, src, f"{path}.{names.shown(k)}") for k, v in value.items()}
    if not isinstance(value, dict):
        raise ScenarioError(src, path, f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(map(str, set(value) - set(spec)))
    if unknown:
        where = f"{path}.{names.shown(unknown[0])}" if path else names.shown(unknown[0])
        raise ScenarioError(src, where, f"unknown key (known: {', '.join(sorted(spec))})")
    out = {}
    for key, sub in spec.items():
        here = f"{path}.{key}" if path else key
        out[key] = validate(value[key], sub, src, here) if key in value else _default(sub, src, here)
    return out


def _check_mix(data: dict, src: str) -> None:
    if data["name"] is not None and (why := names.problem(data["name"])):
        raise ScenarioError(src, "name", why)
    if not data["schedulers_enabled"]:
        raise ScenarioError(src, "schedulers_enabled", "expected at least one scheduler (a run with none measures "
                            "nothing)")
    classes = data["workload"]["classes"]
    if not classes:
        raise ScenarioError(src, "workload.classes", "expected at least one job class")
    for name in classes:
        if why := names.class_problem(name):
            raise ScenarioError(src, f"workload.classes.{names.shown(name)}", why)
    total = sum(c["share"] for c in classes.values())
    if abs(total - 1.0) > 1e-6:
        raise ScenarioError(src, "workload.classes", f"expected class shares summing to 1, got {total:g}")
    gpn = data["fleet"]["gpus_per_node"]
    for name, c in classes.items():
        if not c["shapes"]:
            raise ScenarioError(src, f"workload.classes.{name}.shapes", "expected at least one shape")
        for i, s in enumerate(c["shapes"]):
            if s["gpus"] > gpn:
                raise ScenarioError(src, f"workload.classes.{name}.shapes[{i}].gpus",
                                    f"expected <= fleet.gpus_per_node ({gpn}), got {s['gpus']}")
    if not data["fleet"]["gpu_models"] or sum(data["fleet"]["gpu_models"].values()) <= 0:
        raise ScenarioError(src, "fleet.gpu_models", "expected at least one model with a positive weight")
    for name, c in classes.items():
        if c["shapes"] and sum(s["weight"] for s in c["shapes"]) <= 0:
            raise ScenarioError(src, f"workload.classes.{name}.shapes",
                                "expected at least one shape with a positive weight")
        d = c["duration_s"]
        if d["max"] is not None and d["max"] < d["median"]:
            raise ScenarioError(src, f"workload.classes.{name}.duration_s.max",
                                f"expected >= median ({d['median']:g}), got {d['max']:g}")
    nodes = data["fleet"]["nodes"]
    for i, e in enumerate(data["chaos"]):
        if e["until_s"] is not None and e["until_s"] < e["at_s"]:
            raise ScenarioError(src, f"chaos[{i}].until_s", f"expected >= at_s ({e['at_s']:g}), got {e['until_s']:g}")
        if e["kind"] == "node_failure" and e["nodes"] > nodes:
            raise ScenarioError(src, f"chaos[{i}].nodes", f"expected <= fleet.nodes ({nodes:,}), got {e['nodes']:,}")
        if e["kind"] == "fragmentation_prefill" and e["gpus_per_node"] > gpn:
            raise ScenarioError(src, f"chaos[{i}].gpus_per_node", f"expected <= fleet.gpus_per_node ({gpn}), "
                                f"got {e['gpus_per_node']}")


@dataclass
class Scenario:
    path: str
    data: dict[str, Any]                    # validated, defaults filled, profile values resolved
    raw: dict[str, Any]                     # what the file (plus overrides) said
    profile: Profile
    from_scenario: tuple[str, ...] = ()     # profile parameters the scenario set itself
    pools: tuple = ()                       # loadgen.model.fleet.NodePool values (fleet.pools / nodes_from)

    @property
    def name(self) -> str:
        return self.data["name"] or Path(self.path).stem

    @property
    def seed(self) -> int:
        return self.data["seed"]

    def section(self, key: str) -> dict[str, Any]:
        return self.data[key]

    def scheduler_config(self, name: str) -> dict[str, Any]:
        return self.data["schedulers"][name]

    def fleet(self) -> Fleet:
        f = self.data["fleet"]
        nodes = sum(p.nodes for p in self.pools) if self.pools else f["nodes"]
        return Fleet(nodes=nodes, gpus_per_node=f["gpus_per_node"], cpus_per_node=f["cpus_per_node"],
                     memory_gib_per_node=f["memory_gib_per_node"], leaf_size=f["leaf_size"],
                     leaves_per_spine=f["leaves_per_spine"],
                     gpu_models=tuple(sorted(f["gpu_models"].items())), seed=self.seed, pools=self.pools)

    @property
    def total_gpus(self) -> int:
        """GPUs in the fleet (pools may hold fewer per node than gpus_per_node)."""
        if self.pools:
            return sum(p.nodes * (p.gpus_per_node or self.data["fleet"]["gpus_per_node"]) for p in self.pools)
        return self.data["fleet"]["nodes"] * self.data["fleet"]["gpus_per_node"]

    def startup(self) -> StartupSpec:
        """Image pull, rendezvous and GPU activity as the scenario describes them (virtual seconds)."""
        st = self.data["startup"]
        return StartupSpec.from_sections(st["image"],
                                         {**st["rendezvous"], "restart": dict(st["rendezvous"]["restart"])},
                                         self.data["activity"])

    def model_status(self, scheduler: str) -> dict[str, Any]:
        """Which profile produced a simulated result, whether it is calibrated, what the scenario changed."""
        own = [k for k in self.from_scenario if k.startswith(("control_plane.", f"schedulers.{scheduler}."))]
        return {**self.profile.status(scheduler), **({"set_by_scenario": own} if own else {})}

    def with_overrides(self, **dotted: Any) -> Scenario:
        """This scenario again with dotted keys replaced (e.g. {"fleet.nodes": 1000}), validated
        from its raw data as a file saying so would be (for code that varies a built scenario; the
        CLI's flags go to load() instead)."""
        return from_dict(self.raw, self.path, self.profile, overrides=dotted)


def with_keys(raw: dict[str, Any], dotted: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Raw scenario data with dotted keys replaced; only the mappings on each key's path are
    copied, so `raw` itself is left as it was."""
    out = dict(raw)
    for key, value in dotted.items():
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            child = node.get(p, {})
            if not isinstance(child, dict):
                raise ScenarioError(source, key, f"cannot override inside a {type(child).__name__}")
            node[p] = dict(child)
            node = node[p]
        node[leaf] = value
    return out


def from_dict(raw: Any, source: str = "<scenario>", profile: Profile | str | None = None,
              overrides: Mapping[str, Any] | None = None, flags: Mapping[str, str] | None = None) -> Scenario:
    """Validate raw scenario data, with `overrides` (dotted key -> value) in place of its own
    values. `flags` (dotted key -> flag) names the flag that gave a key: an error in that key
    names the flag. The profile is, in order: `profile` given here, the scenario's own `profile:`
    key, the default (loadgen.input.profile.DEFAULT)."""
    try:
        return _build({} if raw is None else raw, source, profile, overrides or {})
    except ScenarioError as e:
        flag = next((f for key, f in (flags or {}).items()
                     if e.field == key or e.field.startswith((f"{key}.", f"{key}["))), None)
        if flag is None:
            raise
        raise ScenarioError(flag, "", f"{e.expected} ({e.field})") from None


def _build(raw: Any, source: str, profile: Profile | str | None, overrides: Mapping[str, Any]) -> Scenario:
    if overrides and isinstance(raw, dict):      # anything else: validate() says what was expected
        raw = with_keys(raw, overrides, source)
    data = validate(raw, SCENARIO, source)
    if data["workload"]["classes"] is None:
        data["workload"]["classes"] = validate(DEFAULT_CLASSES, MapOf(SCENARIO["workload"]["classes"].item),
                                               source, "workload.classes")
    _check_mix(data, source)
    node_pools = pools.scenario_pools(data["fleet"], source)
    if node_pools and data["fleet"]["nodes_from"] is not None:
        data["fleet"]["nodes"] = sum(p.nodes for p in node_pools)    # the node list sets the fleet's size
    pools.check_class_shares(data["workload"]["classes"], node_pools, source)
    if not isinstance(profile, Profile):
        try:
            profile = profiles.load(profile or data["profile"])
        except ProfileError as e:
            raise ScenarioError(source, "profile", str(e)) from None
    own = _resolve(data, SCENARIO, profile, source)
    for section, keys, what in profiles.NOT_ALL_ZERO:
        values = data["schedulers"][section] if section in data["schedulers"] else data[section]
        if not any(values[k] for k in keys):
            raise ScenarioError(source, f"schedulers.{section}", f"expected {what} (one of {', '.join(keys)} above 0; "
                                "from the scenario or its profile), got 0 for all of them")
    return Scenario(path=source, data=data, raw=raw, profile=profile, from_scenario=tuple(own), pools=node_pools)


def _resolve(data: dict, spec: dict, profile: Profile, source: str, path: str = "") -> list[str]:
    """Replace PROFILE markers by the profile's values in place; returns the dotted keys of profile
    parameters the scenario set itself."""
    own = []
    for key, sub in spec.items():
        dotted = f"{path}.{key}" if path else key
        if isinstance(sub, dict) and isinstance(data.get(key), dict):
            own += _resolve(data[key], sub, profile, source, dotted)
        elif isinstance(sub, Field) and sub.default is PROFILE:
            if data[key] is PROFILE:
                section, _, param = dotted.removeprefix("schedulers.").partition(".")
                try:
                    data[key] = profile.value(section, param)
                except ProfileError as e:
                    if sub.fallback is None:
                        raise ScenarioError(source, dotted, f"no value: {e}") from None
                    data[key] = sub.fallback
            else:
                own.append(dotted)
    return own


def load(path: str | Path, profile: Profile | str | None = None, overrides: Mapping[str, Any] | None = None,
         flags: Mapping[str, str] | None = None) -> Scenario:
    """The scenario file at `path`, validated once with `overrides` and `flags` (see from_dict)."""
    src = str(path)
    try:
        raw = yamlfile.read(path)
    except yamlfile.YamlFileError as e:
        raise ScenarioError(src, e.where,
                            "no such scenario file" if e.expected == "no such file" else e.expected) from None
    if raw is None:
        raise ScenarioError(src, "", "is empty; expected a scenario mapping (`{}` runs every default; see scenarios/)")
    if not isinstance(raw, dict):
        raise ScenarioError(src, "", f"expected a mapping at the top level, got {type(raw).__name__}")
    return from_dict(raw, src, profile, overrides, flags)
