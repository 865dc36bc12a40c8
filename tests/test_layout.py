"""The package map stays one-way: fakes/ (the backends) imports only the shared vocabulary in
loadgen/model, and loadgen/ (driver, measurement, CLI) never imports a backend directly: it finds
targets through the registry. In tests/, what modules share lives in tests/support, and a module
with real-backend tests says so in its name."""
import ast

from loadgen.model.registry import REGISTRY, SCHEDULERS
from support.paths import ROOT


def imports(package: str) -> dict[str, set[str]]:
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


def test_backends_import_only_the_shared_model_from_loadgen():
    bad = {f: sorted(n for n in names if n.startswith("loadgen") and not n.startswith("loadgen.model"))
           for f, names in imports("fakes").items()}
    assert {f: n for f, n in bad.items() if n} == {}


def test_loadgen_never_imports_a_backend():
    bad = {f: sorted(n for n in names if n.split(".")[0] == "fakes") for f, names in imports("loadgen").items()}
    assert {f: n for f, n in bad.items() if n} == {}


def test_the_model_imports_nothing_of_the_rest():
    bad = {f: sorted(n for n in names if n.split(".")[0] in ("fakes", "loadgen") and not n.startswith("loadgen.model"))
           for f, names in imports("loadgen/model").items()}
    assert {f: n for f, n in bad.items() if n} == {}


def test_every_builtin_target_is_registered_and_importable():
    from loadgen.model.registry import target_class
    for name in SCHEDULERS:
        for backend in ("sim", "real"):
            cls = target_class(name, backend)
            assert (cls.name, cls.backend) == (name, backend), REGISTRY[(name, backend)]


STAGES = ("model", "input", "measure", "output", "live", "drive")


def test_each_stage_imports_only_itself_and_the_stages_before_it():
    """loadgen/ reads as the pipeline: model <- input <- measure <- output <- live <- drive; the
    entry points (cli, locust, calibration, bench, the pytest plugin) sit on top and may use any."""
    bad = {}
    for f, names in imports("loadgen").items():
        stage = f.split("/")[1].removesuffix(".py")
        if stage not in STAGES:
            continue
        later = sorted(n for n in names if n.startswith("loadgen.")
                       and n.split(".")[1] not in STAGES[:STAGES.index(stage) + 1])
        if later:
            bad[f] = later
    assert bad == {}


def test_no_test_module_imports_another_test_module_or_conftest():
    """Shared helpers, constants and fixtures are tests/support's: no module under tests/ imports a
    test module (a test imported from one is collected again under the importer's name) or conftest."""
    bad = {f: sorted(n for n in names if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest")
           for f, names in imports("tests").items()}
    assert {f: n for f, n in bad.items() if n} == {}


def marked_real(tree: ast.Module) -> bool:
    """Whether a module uses pytest.mark.real anywhere: pytestmark, a decorator, a param's marks."""
    return any(isinstance(n, ast.Attribute) and n.attr == "real" and isinstance(n.value, ast.Attribute)
               and n.value.attr == "mark" for n in ast.walk(tree))


def test_modules_with_real_backend_tests_and_only_those_end_in_real():
    """tests/test_*_real.py holds tests marked `real` (beside unmarked ones, possibly); no other
    test module has any, so the file name tells what a module needs before it is opened."""
    wrong = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        marked, named = marked_real(ast.parse(path.read_text())), path.name.endswith("_real.py")
        if marked != named:
            wrong[str(path.relative_to(ROOT))] = ("marked real, not named *_real.py" if marked
                                                  else "named *_real.py, no real mark")
    assert wrong == {}


def test_the_shared_real_code_imports_no_backend():
    """fakes/real holds what all real backends share; a backend's own base lives in its folder."""
    backends = {f"fakes.{n}" for n in SCHEDULERS}
    bad = {f: sorted(n for n in names if ".".join(n.split(".")[:2]) in backends)
           for f, names in imports("fakes/real").items()}
    assert {f: n for f, n in bad.items() if n} == {}


def test_loadgen_never_branches_on_a_scheduler_name():
    """What differs per scheduler is declared by its targets (Target.topology, prometheus_queries,
    shares_one_watch, fleet_kind; fakes/<name>/traits.py), so a new scheduler needs no edit here.
    The one exception: the flags named after a scheduler's own tool (--ray-nodes, --slurm-conf and
    $SLURM_CONF, --ray-address) check that they go with that scheduler."""
    names = set(SCHEDULERS)
    flags = {"loadgen/cli/cluster.py", "loadgen/cli/existing.py"}
    found = []
    for path in sorted((ROOT / "loadgen").rglob("*.py")):
        if str(path.relative_to(ROOT)) in flags:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                consts = [c for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in names]
                if consts:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_every_project_module_a_module_imports_exists():
    """A module moved without its importers fails here, not when a benchmark first imports it
    (fakes/kube/costcurve.py imported fakes.real.kubefamily for a while after it had moved)."""
    import importlib.util
    missing = {f: sorted(n for n in names if n.split(".")[0] in ("loadgen", "fakes", "support")
                         and importlib.util.find_spec(n) is None)
               for package in ("loadgen", "fakes", "tests") for f, names in imports(package).items()}
    assert {f: n for f, n in missing.items() if n} == {}
