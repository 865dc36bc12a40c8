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


@pytest.fixture
def scenario_file(tmp_path):
    """Write a scenario YAML body to a temp file and return its path."""
    def _write(body: str, name: str = "s.yaml") -> Path:
        p = tmp_path / name
        p.write_text(body)
        return p
    return _write
