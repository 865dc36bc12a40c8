import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("support")

# After the rewrite hook, so support's asserts explain themselves. The fixtures kept with their helpers in
# tests/support/ are offered here to every test by name (a test module importing one would shadow it).
from support.browser import chromium  # noqa: E402, F401
from support.kube import bins  # noqa: E402, F401
from support.locust_process import run_locust  # noqa: E402, F401
from support.paths import ROOT  # noqa: E402


def pytest_configure(config):
    os.environ.setdefault("GANGSTORM_ROOT", str(ROOT))


@pytest.hookimpl(trylast=True)      # after -m and -k have deselected what they will
def pytest_collection_modifyitems(config, items):
    """A session that runs timing-sensitive files beside a CPU hog (a test marked `beside_hog`,
    tests/test_under_load*.py) does not also run those files' tests bare: the hog run is the
    stronger check, and running both cost about 5 minutes of CI's hour."""
    rerun = [m for item in items for m in item.iter_markers("beside_hog")]
    if not rerun:
        return
    covered = {(file, m.kwargs["real"]) for m in rerun for file in m.args[0]}

    def in_hog_run(item) -> bool:
        return (item.nodeid.split("::")[0], item.get_closest_marker("real") is not None) in covered \
            and item.get_closest_marker("browser") is None
    kept = [item for item in items if not in_hog_run(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if in_hog_run(item)])
        items[:] = kept


@pytest.fixture
def scenario_file(tmp_path):
    """Write a scenario YAML body to a temp file and return its path."""
    def _write(body: str, name: str = "s.yaml") -> Path:
        p = tmp_path / name
        p.write_text(body)
        return p
    return _write
