import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("support")

from support.paths import ROOT  # noqa: E402 (after the rewrite hook, so support's asserts explain themselves)


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
