"""The kube client's pace for the `local` profile: read from the bursts of the create path the
adapters use (the `--burst-only --client new` files), the old client's curve files only without them."""
import json

from loadgen.calibration.kube_curve import client_pace, pace_files


def _burst(nodes: int, created_per_s: float, client: str | None = None) -> dict:
    doc = {"nodes": nodes, "metrics": {"kwok": {"burst": {"created_per_s": created_per_s, "threads": 16}}}}
    if client:
        doc["client"] = client
    return doc


def test_the_pace_is_the_mean_of_one_over_each_bursts_create_rate():
    ms, source = client_pace([_burst(2000, 400.0, "new"), _burst(10_000, 250.0, "new")])["client_create_ms"]
    assert ms == 3.25          # (1000/400 + 1000/250) / 2
    assert "fakes/kube/poster.py" in source and "2,000, 10,000 nodes (400/s, 250/s" in source


def test_the_new_create_paths_bursts_replace_the_curve_files(tmp_path):
    (tmp_path / "curve-500n.json").write_text(json.dumps(_burst(500, 100.0)))
    curves, source = pace_files(tmp_path)
    assert [c["nodes"] for c in curves] == [500] and source.endswith("/curve-*n.json")
    assert client_pace(curves)["client_create_ms"][0] == 10.0
    (tmp_path / "burst-2000n-new.json").write_text(json.dumps(_burst(2000, 500.0, "new")))
    (tmp_path / "burst-2000n-old.json").write_text(json.dumps(_burst(2000, 90.0, "old")))
    curves, source = pace_files(tmp_path)
    assert [c["nodes"] for c in curves] == [2000] and source.endswith("/burst-*n-new.json")
    assert client_pace(curves, source)["client_create_ms"][0] == 2.0


def test_no_burst_gives_no_pace():
    assert client_pace([{"nodes": 500, "metrics": {"kwok": {}}}]) == {}
