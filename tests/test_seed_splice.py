"""tools/seed_splice.py: a stored --seeds run with one scheduler's figures replaced by a rerun's."""
import importlib.util
import json

import pytest

from support.paths import ROOT

spec = importlib.util.spec_from_file_location("seed_splice", ROOT / "tools" / "seed_splice.py")
seed_splice = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed_splice)


def _run(path, seeds, schedulers, run_id):
    for s in seeds:
        (path / "seeds" / str(s)).mkdir(parents=True)
        (path / "seeds" / str(s) / "summary.json").write_text(json.dumps(
            {"run_id": run_id, "seed": s, "schedulers": {n: {"p50": v + s} for n, v in schedulers.items()}}))


def test_the_named_schedulers_are_replaced_and_the_others_kept(tmp_path):
    _run(tmp_path / "base", (1, 2), {"kube": 10.0, "volcano": 20.0}, "old")
    _run(tmp_path / "part", (1, 2), {"volcano": 30.0}, "new")
    assert seed_splice.splice(tmp_path / "base", tmp_path / "part", tmp_path / "out") == [1, 2]
    doc = json.loads((tmp_path / "out" / "seeds" / "2" / "summary.json").read_text())
    assert doc["schedulers"] == {"kube": {"p50": 12.0}, "volcano": {"p50": 32.0}}
    assert doc["spliced"] == {"run_id": "new", "seed": 2, "schedulers": ["volcano"]}


def test_runs_of_different_seeds_are_refused(tmp_path):
    _run(tmp_path / "base", (1, 2), {"kube": 10.0}, "old")
    _run(tmp_path / "part", (1, 3), {"kube": 30.0}, "new")
    with pytest.raises(SystemExit, match="has seeds"):
        seed_splice.splice(tmp_path / "base", tmp_path / "part", tmp_path / "out")
    assert not (tmp_path / "out").exists()
