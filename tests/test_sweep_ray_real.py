"""gangstorm sweep --ray-address: the same grid on local cores and as Ray tasks on a two-worker Ray
cluster (two raylets of one CPU each on 127.0.0.1, started and stopped here by `gangstorm cluster
up/down ray`) gives every cell the same results digest, and nothing is left running afterwards."""
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from loadgen.output.sweep import cell_problems, read_index
from support.paths import ROOT
from support.ray_cluster import cluster_down, cluster_up, gangstorm, run
from support.ray_fleet import ray_or_fail

pytestmark = pytest.mark.real

SPEC = (f"name: ray-vs-local\nscenarios: [{ROOT / 'scenarios' / 'baseline-3x.yaml'}]\nschedulers: [kube, slurm]\n"
        "churn: [3, 6]\nseeds: 2\nnodes: [300]\nset: {duration_h: 1}\n")


def test_a_sweep_on_a_two_worker_ray_cluster_gives_the_local_results_cell_for_cell(tmp_path):
    ray_or_fail()
    home = tmp_path / "clusters"
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(home),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    (tmp_path / "sw.yaml").write_text(SPEC)
    state: dict = {}
    try:
        cluster_up(["--nodes", "2", "--scenario", str(ROOT / "tests/data/sweep/ray-two-workers.yaml"),
                    "--name", "sweep"], env, state)
        address = state["connect"]["--ray-address"]
        assert address.startswith("127.0.0.1:")
        local = run(gangstorm() + ["sweep", str(tmp_path / "sw.yaml"), "--out", str(tmp_path / "local"),
                                   "--jobs", "2"], env, 300)
        assert local.returncode == 0, local.stderr
        ray = run(gangstorm() + ["sweep", str(tmp_path / "sw.yaml"), "--out", str(tmp_path / "ray"),
                                 "--ray-address", address], env, 600)
        assert ray.returncode == 0, ray.stderr + (tmp_path / "ray" / "ray-driver.log").read_text()
        assert "Ray cluster: 2 CPUs on 3 nodes" in ray.stderr         # the head has none
        a, b = read_index(tmp_path / "local"), read_index(tmp_path / "ray")
        assert len(a) == len(b) == 8 and {e["status"] for e in a + b} == {"done"}
        assert [(e["dir"], e["digest"]) for e in a] == [(e["dir"], e["digest"]) for e in b]
        assert {e["executor"] for e in a} == {"local"}
        assert all(e["executor"].startswith(f"ray {address} node ") for e in b)
        for name in ("jobs.csv", "timeseries.csv"):
            assert [(tmp_path / "local" / e["dir"] / name).read_bytes() for e in a] == \
                   [(tmp_path / "ray" / e["dir"] / name).read_bytes() for e in b]
        sa, sb = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("local", "ray"))
        assert sa["groups"] == sb["groups"] and sb["executor"] == {"kind": "ray", "detail": f"--ray-address {address}"}
        # a rerun on Ray finds every cell complete and runs none
        again = run(gangstorm() + ["sweep", str(tmp_path / "sw.yaml"), "--out", str(tmp_path / "ray"),
                                   "--ray-address", address], env, 300)
        assert again.returncode == 0 and "8 complete from before, 0 to run" in again.stderr, again.stderr
        interrupted_then_resumed(tmp_path, address, env)
    finally:
        left = cluster_down(env, state, "sweep") if state else []
    assert left == []


BIGGER = (f"name: ray-interrupted\nscenarios: [{ROOT / 'scenarios' / 'baseline-3x.yaml'}]\nschedulers: [kube, slurm]\n"
          "churn: [3, 6]\nseeds: 4\nnodes: [400]\nset: {duration_h: 1.5}\n")


def _drivers(home: Path) -> list[int]:
    """Live sweep drivers started under this test's GANGSTORM_CLUSTERS_DIR."""
    mark = f"GANGSTORM_CLUSTERS_DIR={home}\0".encode()
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and b"loadgen.drive.sweep_ray" in Path(f"/proc/{d}/cmdline").read_bytes() \
                    and mark in Path(f"/proc/{d}/environ").read_bytes() + b"\0":
                found.append(int(d))
        except OSError:
            continue
    return found


def interrupted_then_resumed(tmp_path: Path, address: str, env: dict) -> None:
    """SIGTERM to gangstorm mid-sweep: exit 130, the driver and its tasks stopped, the summary
    partial; the same command again finishes the grid, keeping what was done."""
    (tmp_path / "big.yaml").write_text(BIGGER)
    out = tmp_path / "interrupted"
    argv = [*gangstorm(), "sweep", str(tmp_path / "big.yaml"), "--out", str(out), "--ray-address", address]
    before = _cell_folders()
    p = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            try:
                if sum(e["status"] == "done" for e in read_index(out)) >= 2:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert f"partial results kept in {out}" in err
    assert _drivers(Path(env["GANGSTORM_CLUSTERS_DIR"])) == []
    assert _cell_folders() - before == set()        # the cancelled tasks removed their temporary folders
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and 2 <= summary["cells"]["done"] < 16
    done = sum(not cell_problems(out / e["dir"], e["fingerprint"]) for e in read_index(out))   # from the folders
    r = run(argv, env, 600)
    assert r.returncode == 0, r.stderr
    assert f"16 cells; {done} complete from before, {16 - done} to run" in r.stderr
    assert {e["status"] for e in read_index(out)} == {"done"}


def _cell_folders() -> set[str]:
    """The temporary folders Ray tasks produce cells in (drive/sweep_cell.run_archived)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob("gangstorm-cell-*")}
