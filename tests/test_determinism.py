"""Same scenario + seed = identical simulated results."""
import json

from loadgen.drive.comparative import RunOptions, run
from loadgen.input.scenario import load
from support.paths import ROOT

VOLATILE = {"run_id", "wall_s", "_dir"}


def strip(summary):
    out = {k: v for k, v in summary.items() if k not in VOLATILE}
    out["schedulers"] = {n: {k: v for k, v in s.items() if k != "wall_s"} for n, s in summary["schedulers"].items()}
    return out


def test_same_seed_twice_gives_identical_numbers(tmp_path):
    sc = load(ROOT / "scenarios" / "evictions.yaml").with_overrides(**{"fleet.nodes": 500, "duration_h": 1.5})
    a = run(sc, RunOptions(schedulers=["kube", "volcano", "ray", "slurm"], out_dir=tmp_path / "a"))
    b = run(sc, RunOptions(schedulers=["kube", "volcano", "ray", "slurm"], out_dir=tmp_path / "b"))
    assert json.dumps(strip(a), sort_keys=True) == json.dumps(strip(b), sort_keys=True)
    for name in ("jobs.csv", "timeseries.csv"):          # timeseries with its control-plane columns
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    c = run(sc.with_overrides(seed=99), RunOptions(schedulers=["kube"], out_dir=tmp_path / "c"))
    assert c["schedulers"]["kube"]["admission_s"] != a["schedulers"]["kube"]["admission_s"]
