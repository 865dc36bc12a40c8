"""What a pytest session runs: a timing-sensitive file runs beside the CPU hog when the session
selects the hog test (tests/test_under_load*.py, marker `beside_hog`), not bare as well; alone,
or in a session without the hog test, it runs bare (tests/conftest.py)."""
from __future__ import annotations

import os
import subprocess
import sys

from support.paths import ROOT


def collected(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_a_session_with_the_hog_test_leaves_out_the_files_it_reruns_and_only_those():
    ids = collected("-m", "not bench and not real", "tests/test_under_load.py", "tests/test_interrupts.py",
                    "tests/test_cli.py")
    assert ids and not [i for i in ids if i.startswith("tests/test_interrupts.py::")]
    assert [i for i in ids if i.startswith("tests/test_cli.py::")]
    assert ids.count("tests/test_under_load.py::test_the_timing_sensitive_tests_pass_beside_a_cpu_hog[pinned]") == 1


def test_without_the_hog_test_the_timing_sensitive_files_run_bare():
    alone = collected("tests/test_interrupts.py")
    assert len(alone) == 6
    fast = collected("-m", "not real and not browser and not slow", "tests/test_under_load.py",
                     "tests/test_interrupts.py")
    assert [i for i in fast if i.startswith("tests/test_interrupts.py::")] and not [
        i for i in fast if i.startswith("tests/test_under_load.py::")]


def test_the_real_hog_test_leaves_out_only_the_real_tests_of_its_files():
    ids = collected("-m", "not bench", "tests/test_under_load_real.py", "tests/test_interrupts_real.py",
                    "tests/test_interrupts.py")
    assert not [i for i in ids if i.startswith("tests/test_interrupts_real.py::")]
    assert len([i for i in ids if i.startswith("tests/test_interrupts.py::")]) == 6   # not real: still run bare
