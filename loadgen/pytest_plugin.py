"""pytest plugin (entry point `gangstorm`): latency SLOs as ordinary assertions.

    @pytest.mark.gangstorm("scenarios/fragmentation.yaml", nodes=2000, schedulers="kube,volcano")
    def test_gang_tail(gangstorm_summary):
        assert gangstorm_summary["schedulers"]["volcano"]["admission_s"]["p999"] < 30

Each distinct (scenario, overrides) runs once per test session on the embedded simulated
fleet and is shared by every test that asks for it. `gangstorm_run(path, **overrides)` is the
same cache as a callable, for tests that compare several variants.

Over several seeds (as `gangstorm run --seeds`, docs/seeds.md): `seeds=10` runs the scenario's seed
and the next 9, `seeds=[1, 5, 9]` those seeds, each a complete run in parallel processes (at most
`parallel=J` at once, default the CPU count). The summary keeps the one-seed layout with every number
the median over the seeds, so an assertion written for one seed applies to the median:

    @pytest.mark.gangstorm("scenarios/fragmentation.yaml", nodes=2000, seeds=10)
    def test_gang_tail_median(gangstorm_summary):
        volcano = gangstorm_summary["schedulers"]["volcano"]
        assert volcano["admission_s"]["p999"] < 30                     # the median over 10 seeds
        assert volcano["spread"]["admission_p999"]["high"] < 60        # and its 95% interval's upper end

Each figure's interval, per-seed values and coverage are under `spread` (per class under
`by_class.<class>.spread`); `significance` holds the head-to-head tests.

Against a stored baseline (as pytest-benchmark's --benchmark-save / --benchmark-compare):

    def test_no_regression(gangstorm_summary, gangstorm_baseline):
        gangstorm_baseline(gangstorm_summary, "fragmentation-2000", tolerance=0.10)

fails with `gangstorm compare`'s table when a metric got worse beyond tolerance. The baseline is
<--gangstorm-baselines, default tests/baselines>/<name>.json; `pytest --gangstorm-save-baselines`
writes the current summaries there instead of comparing.
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
    group.addoption("--gangstorm-baselines", default="tests/baselines",
                    help="folder of baseline summaries for gangstorm_baseline (default tests/baselines)")
    group.addoption("--gangstorm-save-baselines", action="store_true",
                    help="write each gangstorm_baseline summary as the new baseline instead of comparing")


@pytest.fixture(scope="session")
def gangstorm_run(tmp_path_factory, pytestconfig):
    """Callable: run a scenario (cached per arguments for the session) and return summary.json."""
    from loadgen.drive.comparative import RunOptions, run
    from loadgen.input.scenario import load
    from loadgen.model.errors import UserError
    from loadgen.output.storage import fresh_run_dir

    cache: dict = {}
    root = pytestconfig.getoption("--gangstorm-results")

    def _run(scenario: str, schedulers: str | None = None, profile: str | None = None, seeds=None,
             parallel: int | None = None, **overrides) -> dict:
        key = (scenario, schedulers, profile, tuple(seeds) if isinstance(seeds, (list, tuple)) else seeds,
               tuple(sorted(overrides.items())))
        if key not in cache:
            check_schedulers(schedulers)
            try:        # an error in a value the marker gave names the marker's argument (`nodez=: unknown key`)
                sc = load(scenario, profile, overrides={OVERRIDE_KEYS.get(k, k): v for k, v in overrides.items()},
                          flags={OVERRIDE_KEYS.get(k, k): f"{k}=" for k in overrides})
            except UserError as e:
                sc, refused = None, str(e)
            if sc is None:              # the CLI's one line, as a failed test without a traceback
                pytest.fail(f"gangstorm: {refused}", pytrace=False)
            names = schedulers.split(",") if schedulers else list(sc.data["schedulers_enabled"])
            out = fresh_run_dir(root, f"run-{len(cache)}") if root else tmp_path_factory.mktemp("gangstorm")
            if seeds is not None:
                summary = _over_seeds(sc, names, out, seeds, parallel, "seed" in overrides)
            else:
                summary = run(sc, RunOptions(schedulers=names, out_dir=out))
            cache[key] = json.loads((out / "summary.json").read_text())
            cache[key]["_dir"] = summary["_dir"]
        return cache[key]

    return _run


def check_schedulers(schedulers: str | None) -> None:
    """The marker's (or gangstorm_run's) schedulers= as the CLI checks --schedulers: a scheduler
    named twice would run every job twice."""
    from loadgen.model.registry import SCHEDULERS
    if schedulers is None:
        return
    names = [n.strip() for n in str(schedulers).split(",") if n.strip()]
    bad = [n for n in names if n not in SCHEDULERS]
    if bad or not names:
        pytest.fail(f"gangstorm: schedulers=: expected a comma-separated list of {', '.join(SCHEDULERS)}, got "
                    f"{schedulers!r}", pytrace=False)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        pytest.fail(f"gangstorm: schedulers=: expected each scheduler once, got {', '.join(twice)} twice in "
                    f"{schedulers!r}", pytrace=False)


def _over_seeds(sc, names: list[str], out, seeds, parallel, seed_given: bool) -> dict:
    """The run over the seeds the marker names (one seed: a plain run of that seed)."""
    from loadgen.drive.comparative import RunOptions, run
    from loadgen.drive.seeds import SeedsError, parse_parallel, parse_seeds, run_seeds, seeds_rule
    try:
        if seed_given:
            raise SeedsError("seeds=: not used with seed= (seeds=N runs the scenario's seed and the next N-1)")
        chosen = parse_seeds(seeds, sc.seed, "seeds=")
        at_once = parse_parallel(parallel, "sim", len(chosen), "parallel=")
    except SeedsError as e:
        pytest.fail(f"gangstorm: {e}", pytrace=False)
    if len(chosen) == 1:
        return run(sc.with_overrides(seed=chosen[0]), RunOptions(schedulers=names, out_dir=out))
    rule = seeds_rule(chosen, sc.seed, not isinstance(seeds, (list, tuple)))
    return run_seeds(sc, chosen, RunOptions(schedulers=names, out_dir=out), at_once, rule)


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


@pytest.fixture
def gangstorm_baseline(pytestconfig):
    """Callable (summary, name, tolerance=0.10, per_metric=None): assert no metric of summary got
    worse than baseline <name> beyond tolerance (or save it, with --gangstorm-save-baselines)."""
    from loadgen.cli.compare import CompareError, load_run
    from loadgen.output.compare import compare, render

    folder = Path(pytestconfig.getoption("--gangstorm-baselines"))
    if not folder.is_absolute():
        folder = Path(pytestconfig.rootpath) / folder
    save = pytestconfig.getoption("--gangstorm-save-baselines")

    def _check(summary: dict, name: str, tolerance: float = 0.10, per_metric: dict | None = None) -> None:
        from loadgen.output.paths import component
        safe = component(name, "baseline")
        if safe != name:         # a name is one file inside the baselines folder, never a path out of it
            pytest.fail(f"gangstorm_baseline: name {name!r}: expected a file name (letters, digits, '.', '_', '-'; "
                        f"e.g. {safe!r})", pytrace=False)
        path = folder / f"{name}.json"
        current = {k: v for k, v in summary.items() if not k.startswith("_")}
        if save:
            from loadgen.output.paths import OutputPathError, check_output_file
            from loadgen.output.storage import OutputError, atomic_write
            try:
                check_output_file(path, "--gangstorm-save-baselines")
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, json.dumps(current, indent=2, sort_keys=True, allow_nan=False) + "\n")
            except (OutputPathError, OutputError) as e:
                pytest.fail(f"gangstorm_baseline: {e}", pytrace=False)
            return
        if not path.is_file():
            pytest.fail(f"no baseline {path}: run pytest with --gangstorm-save-baselines to write it")
        try:
            _, baseline = load_run(str(path), "results")
        except CompareError as e:
            pytest.fail(f"baseline {e}", pytrace=False)
        result = compare(baseline, current, tolerance, per_metric)
        if result.regressions:
            pytest.fail(f"regression against baseline {path}:\n{render(result)}", pytrace=False)

    return _check
