"""The runs a calibration needs: fitting cases at two or more scales and scenarios, and held-out
cases (a larger scale and a chaos scenario) that the fit never sees; each repeated."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    scenario: str          # scenario YAML path
    nodes: int
    role: str              # "fit" or "held_out"

    @property
    def label(self) -> str:
        return f"{Path(self.scenario).stem}-{self.nodes}n"


def matrix(scenarios: list[str], scales: list[int], held_out_scale: int, held_out_scenario: str) -> list[Case]:
    """Fit on every scenario x scale; hold out the first scenario at held_out_scale and the chaos
    scenario at the largest fitting scale."""
    if len(scenarios) < 2 or len(scales) < 2:
        raise ValueError("a fit needs at least two scenarios and two scales")
    if held_out_scale in scales or held_out_scenario in scenarios:
        raise ValueError("held-out cases must differ from every fitting case")
    cases = [Case(s, n, "fit") for s in scenarios for n in sorted(scales)]
    cases += [Case(scenarios[0], held_out_scale, "held_out"), Case(held_out_scenario, max(scales), "held_out")]
    return cases
