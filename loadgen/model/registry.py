"""Which class implements (scheduler, backend): a table callers extend without overwriting.

Entries are "module:Class" strings imported on first use, so a simulated run never imports ray or
kubernetes. The built-in backends follow one convention (fakes/<name>/sim.py and
fakes/<name>/target.py); anything else (a benchmark's no-op target, a user's own backend)
calls register() with a backend name of its own instead of posing as a built-in.
"""
from __future__ import annotations

import importlib

from loadgen.model.target import Target

SCHEDULERS = ("kube", "volcano", "ray", "slurm", "kube-gang", "coscheduling", "kueue")
_CLASS = {"kube": "Kube", "volcano": "Volcano", "ray": "Ray", "slurm": "Slurm", "kube-gang": "KubeGang",
          "coscheduling": "Coscheduling", "kueue": "Kueue"}
# A scheduler's folder under fakes/ when its name is no Python module name.
_MODULE = {"kube-gang": "kubegang"}

REGISTRY: dict[tuple[str, str], str] = {}


def register(name: str, backend: str, spec: str) -> None:
    """Add `spec` ("module:Class") for (name, backend); refuses to replace a different entry."""
    key = (name, backend)
    if REGISTRY.get(key, spec) != spec:
        raise ValueError(f"{name}/{backend} is already registered as {REGISTRY[key]}")
    REGISTRY[key] = spec


for _name in SCHEDULERS:
    _mod = _MODULE.get(_name, _name)
    register(_name, "sim", f"fakes.{_mod}.sim:Sim{_CLASS[_name]}")
    register(_name, "real", f"fakes.{_mod}.target:Real{_CLASS[_name]}")


def backends() -> list[str]:
    """sim and real first, then any backend a caller registered."""
    return ["sim", "real"] + sorted({b for _, b in REGISTRY} - {"sim", "real"})


def target_class(name: str, backend: str) -> type[Target]:
    try:
        spec = REGISTRY[(name, backend)]
    except KeyError:
        raise KeyError(f"no {backend} target for scheduler {name!r}") from None
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)


# `gangstorm cluster up|down|status BACKEND`: one launcher module per built-in scheduler,
# fakes/<name>/launch.py, with up(fleet, workdir, name) -> state, down(state) -> leftovers,
# status(state) -> figures (see loadgen/cli/cluster.py for the contract).
def launcher(name: str):
    if name not in SCHEDULERS:
        raise KeyError(f"no cluster launcher for {name!r}")
    return importlib.import_module(f"fakes.{_MODULE.get(name, name)}.launch")


# Fake-fleet components the driver uses without importing fakes/ (the one-way package map):
# the DCGM exporter's renderer and the Prometheus server it and gangstorm are scraped by.
COMPONENTS = {"dcgm": "fakes.dcgm.exporter", "prometheus": "fakes.prom"}


def component(name: str):
    return importlib.import_module(COMPONENTS[name])
