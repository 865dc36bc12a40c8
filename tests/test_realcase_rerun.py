"""A real case run again (`tools/gangs/fidelity.py --rerun`) replaces its stored run instead of
refusing the folder it left; an unfinished run is run again the same way; a finished one is reused."""
import json

from loadgen.calibration import realcase


def _fake_backend(calls):
    def real_run(scenario, name, out_dir, time_scale):
        # what the real run's RunStore insists on: a new or empty folder
        assert not out_dir.exists() or not any(out_dir.iterdir()), sorted(p.name for p in out_dir.iterdir())
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "jobs.csv").write_text("id\n")
        calls.append(out_dir.name)
        return {"complete": True, "schedulers": {name: {"jobs": {"admitted": len(calls)}}}}
    return real_run


def _stored(path, complete):
    path.mkdir(parents=True)
    (path / "jobs.csv").write_text("id\nold\n")
    (path / "summary.json").write_text(json.dumps({"complete": complete,
                                                   "schedulers": {"kube-gang": {"jobs": {"admitted": 99}}}}))


def test_rerun_replaces_the_stored_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(realcase, "real_run", _fake_backend(calls))
    _stored(tmp_path / "run1", complete=True)
    results = realcase.real_runs(None, "kube-gang", tmp_path, 20.0, 1, reuse=False)
    assert calls == ["run1"]
    assert results[0]["jobs"]["admitted"] == 1
    assert (tmp_path / "run1" / "jobs.csv").read_text() == "id\n"
    assert json.loads((tmp_path / "run1" / "summary.json").read_text())["schedulers"]["kube-gang"]["jobs"] == {
        "admitted": 1}


def test_an_unfinished_run_is_run_again_and_a_finished_one_reused(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(realcase, "real_run", _fake_backend(calls))
    _stored(tmp_path / "run1", complete=True)
    _stored(tmp_path / "run2", complete=False)
    results = realcase.real_runs(None, "kube-gang", tmp_path, 20.0, 2)
    assert calls == ["run2"]
    assert [r["jobs"]["admitted"] for r in results] == [99, 1]
