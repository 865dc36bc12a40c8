"""The at-scale calibration tools stopped by Ctrl-C (python -m loadgen.calibration.scale_check /
heldout_at_scale): one line and exit status 130, not a traceback; the real run's partial folder is
kept by the run itself (loadgen/drive/comparative.py) and redone by the next call."""
import pytest

from loadgen.calibration import heldout_at_scale, scale_check


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("tool, entry, argv", [
    (scale_check, "check", ["--scheduler", "slurm", "--nodes", "2000"]),
    (heldout_at_scale, "run", ["--scheduler", "volcano", "--scenario", "scenarios/calibrate-steady.yaml",
                               "--nodes", "2000"]),
])
def test_an_interrupt_ends_with_one_line_and_status_130(tool, entry, argv, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(tool, entry, _interrupted)
    assert tool.main([*argv, "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("interrupted; a real run cut short is kept in its folder, "
                                             "marked partial, and redone by the next call")
