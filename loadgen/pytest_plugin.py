"""pytest plugin (entry point `gangstorm`): latency SLOs as ordinary assertions.

    @pytest.mark.gangstorm("scenarios/fragmentation.yaml", nodes=2000, schedulers="kube,volcano")
    def test_gang_tail(gangstorm_summary):
        assert gangstorm_summary["schedulers"]["volcano"]["admission_s"]["p999"] < 30

Each distinct (scenario, overrides) runs once per test session on the embedded simulated
fleet and is shared by every test that asks for it. `gangstorm_run(path, **overrides)` is the
same cache as a callable, for tests that compare several variants.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

OVERRIDE_KEYS = {"nodes": "fleet.nodes", "seed": "seed", "churn": "workload.churn_multiplier",
                 "duration_h": "duration_h"}


def pytest_configure(config):
    config.addinivalue_line("markers", "gangstorm(scenario, **overrides): the scenario gangstorm_summary runs")


def pytest_addoption(parser):
    group = parser.getgroup("gangstorm")
    group.addoption("--gangstorm-scenario", default=None, help="default scenario for gangstorm_summary")
    group.addoption("--gangstorm-results", default=None,
                    help="keep run results under this directory (default: pytest's tmp dir)")


@pytest.fixture(scope="session")
def gangstorm_run(tmp_path_factory, pytestconfig):
    """Callable: run a scenario (cached per arguments for the session) and return summary.json."""
    from loadgen.comparative import RunOptions, run
    from loadgen.scenario import load
    from loadgen.storage import fresh_run_dir

    cache: dict = {}
    root = pytestconfig.getoption("--gangstorm-results")

    def _run(scenario: str, schedulers: str | None = None, profile: str | None = None, **overrides) -> dict:
        key = (scenario, schedulers, profile, tuple(sorted(overrides.items())))
        if key not in cache:
            sc = load(scenario, profile)
            dotted = {OVERRIDE_KEYS.get(k, k): v for k, v in overrides.items()}
            if dotted:
                sc = sc.with_overrides(**dotted)
            names = schedulers.split(",") if schedulers else list(sc.data["schedulers_enabled"])
            out = fresh_run_dir(root, f"run-{len(cache)}") if root else tmp_path_factory.mktemp("gangstorm")
            summary = run(sc, RunOptions(schedulers=names, out_dir=out))
            cache[key] = json.loads((out / "summary.json").read_text())
            cache[key]["_dir"] = summary["_dir"]
        return cache[key]

    return _run


@pytest.fixture
def gangstorm_summary(request, gangstorm_run):
    marker = request.node.get_closest_marker("gangstorm")
    if marker is not None:
        scenario = marker.args[0] if marker.args else marker.kwargs.pop("scenario")
        return gangstorm_run(scenario, **marker.kwargs)
    scenario = request.config.getoption("--gangstorm-scenario")
    if scenario is None:
        pytest.fail("gangstorm_summary needs @pytest.mark.gangstorm('scenario.yaml', ...) or --gangstorm-scenario")
    return gangstorm_run(scenario)
