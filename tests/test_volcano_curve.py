"""Volcano's session costs fitted from its cost curve, and the twin's figures beside them (issue 32):
loadgen/calibration/volcano_curve.py on curve files made from known costs (tests/support/volcano_curve.py)."""
import json

import pytest

from loadgen.calibration.volcano_curve import (
    fill,
    fit,
    fit_running,
    load_curves,
    load_running,
    running_table,
    table,
    to_find,
    write_profile,
)
from loadgen.input.profile import Param
from loadgen.input.profile import load as load_profile
from support.paths import ROOT
from support.volcano_curve import curve, running

COSTS = {"base_ms": 2.0, "per_node_us": 5.0, "per_task_us": 100.0, "reject_us": 0.5, "feasible_us": 10.0}


def test_volcano_looks_for_as_many_feasible_nodes_as_kube_scheduler():
    assert [to_find(n) for n in (50, 100, 500, 2000, 5000, 10_000)] == [50, 100, 230, 680, 500, 500]


def test_the_fit_recovers_the_costs_that_made_the_curve_and_ignores_a_held_out_size():
    curves = [curve(500, **COSTS), curve(2000, **COSTS), curve(5000, 50.0, 50.0, 1000.0, 5.0, 100.0)]
    vals, used = fit(curves, hold_out={5000})
    assert vals == pytest.approx({"session_base_ms": 2.0, "session_per_node_us": 5.0, "session_per_task_us": 100.0,
                                  "reject_per_node_us": 0.5, "feasible_per_node_us": 10.0}, rel=1e-6)
    assert used == {"idle": [500, 2000], "pending": [500, 2000], "light": [500, 2000]}


def test_the_twin_on_the_fitted_costs_gives_back_the_curve(tmp_path):
    # 200 nodes: an idle session is 2 + 200 x 5 us = 3 ms; 10 / 30 tasks that fit nowhere add
    # 10 x (100 us + 200 x 0.5 us) = 2 ms and 6 ms, of which the walk is 1 and 3 ms; a job placed on
    # the empty fleet walks 100 feasible nodes at 10 us: 1 ms.
    c = curve(200, **COSTS, pending=(10, 30), light_jobs=6)
    (tmp_path / "curve-200n.json").write_text(json.dumps(c))
    prof = load_profile(str(ROOT / "fakes/profiles/local.yaml"))
    for key, v in (("session_base_ms", 2.0), ("session_per_node_us", 5.0), ("session_per_task_us", 100.0),
                   ("reject_per_node_us", 0.5), ("feasible_per_node_us", 10.0)):
        prof.params["volcano"][key] = Param(v, "us", "measured", "test", "test")
    curves = fill(load_curves(tmp_path), prof)
    sim = json.loads((tmp_path / "curve-200n.json").read_text())["sim"]
    assert sim["idle"]["session_ms"] == pytest.approx(3.0)
    assert sim["light"]["place_ms"] == pytest.approx(1.0)
    assert [(p["e2e_ms"], p["walk_ms"]) for p in sim["pending"]] == [pytest.approx((5.0, 1.0)),
                                                                      pytest.approx((9.0, 3.0))]
    rows = table(curves, set()).splitlines()
    assert rows[2] == "| 200 | idle session (e2e scheduling latency) | 3 | 3 | 1.0 |"
    assert all(r.endswith("| 1.0 |") for r in rows[2:])


def test_the_running_fit_recovers_the_cost_of_a_task_left_running_at_every_size():
    files = [running(500, 6.0, 80.0), running(2000, 22.0, 80.0, counts=(500, 1000, 1500))]
    per, sizes = fit_running(files)
    assert per == pytest.approx(80.0, rel=1e-6)
    assert sizes == [500, 2000]


def test_a_running_file_without_an_idle_session_gives_nothing_to_fit():
    r = running(2000, 22.0, 80.0)
    del r["metrics"]["idle"]
    assert fit_running([r]) == (None, [])


def test_the_running_table_puts_the_twins_session_beside_each_count(tmp_path):
    # twin: 2 ms + 2,000 x 5 us = 12 ms idle; 80 us per running task: 500 -> 52 ms, 1,500 -> 132 ms;
    # the real file's idle is 22 ms and its tasks cost 80 us each
    (tmp_path / "running-2000n.json").write_text(json.dumps(running(2000, 22.0, 80.0)))
    prof = load_profile(str(ROOT / "fakes/profiles/local.yaml"))
    for key, v in (("session_base_ms", 2.0), ("session_per_node_us", 5.0), ("session_per_running_task_us", 80.0)):
        prof.params["volcano"][key] = Param(v, "us", "measured", "test", "test")
    rows = running_table(load_running(tmp_path), prof).splitlines()
    assert rows[2:] == ["| 2,000 | idle session (e2e scheduling latency) | 22 | 12 | 1.833 |",
                        "| 2,000 | session, 500 one-pod jobs running, nothing to place (e2e) | 62 | 52 | 1.192 |",
                        "| 2,000 | session, 1,500 one-pod jobs running, nothing to place (e2e) | 142 | 132 | 1.076 |"]


def test_writing_the_running_cost_names_its_files_and_the_command_that_made_them(tmp_path):
    prof_path = tmp_path / "p.yaml"
    prof_path.write_text((ROOT / "fakes/profiles/local.yaml").read_text())
    files = [running(2000, 22.0, 80.0)]
    write_profile(prof_path, {"session_per_running_task_us": 80.0}, {"running": [2000]}, set(), "python -m x",
                  [curve(500, **COSTS)], files)
    p = load_profile(str(prof_path)).params["volcano"]["session_per_running_task_us"]
    assert (p.value, p.unit, p.provenance) == (80.0, "us", "measured")
    assert "running-*n.json" in p.source and "over 2,000 nodes" in p.source
    assert p.command == "synthetic running; python -m x"
