"""heldout_at_scale judged again against stored real runs (a refitted profile, no backend started)
keeps when those runs ran and the load around them, and adds when it evaluated them; a call that
runs a real run records its own start."""
import json

from loadgen.calibration import heldout_at_scale


def test_a_call_without_real_runs_keeps_the_runs_own_record(tmp_path):
    runs_record = {"started": "2026-12-06T18:01:46+00:00",
                   "load_avg": {"before": [10.63, 5.94, 2.71], "after": [1.48, 2.91, 2.51]}}
    (tmp_path / "heldout.json").write_text(json.dumps(runs_record))
    when = heldout_at_scale._when(tmp_path / "heldout.json", False, "2026-12-06T19:02:25+00:00", [0.5, 0.4, 0.3])
    assert when == {"started": "2026-12-06T18:01:46+00:00",
                    "load_avg": {"before": [10.63, 5.94, 2.71], "after": [1.48, 2.91, 2.51]},
                    "evaluated": "2026-12-06T19:02:25+00:00"}


def test_a_call_that_ran_a_real_run_records_its_own_start(tmp_path):
    (tmp_path / "heldout.json").write_text(json.dumps({"started": "old", "load_avg": {"before": [9, 9, 9]}}))
    when = heldout_at_scale._when(tmp_path / "heldout.json", True, "2026-12-06T19:02:25+00:00", [0.5, 0.4, 0.3])
    assert when["started"] == "2026-12-06T19:02:25+00:00" and when["load_avg"]["before"] == [0.5, 0.4, 0.3]
    assert "evaluated" not in when


def test_the_first_call_records_its_own_start(tmp_path):
    when = heldout_at_scale._when(tmp_path / "heldout.json", False, "2026-12-06T19:02:25+00:00", [0.5, 0.4, 0.3])
    assert when["started"] == "2026-12-06T19:02:25+00:00" and "evaluated" not in when
