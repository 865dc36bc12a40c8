"""Ray with fakelets, your own cluster: `gangstorm cluster up ray --ray-nodes fakelet` leaves a real
head (GCS) and fakelet shards running, `gangstorm run --ray-address` drives it from another process,
and `cluster down ray` stops every process, also after the holder was SIGKILLed (all on 127.0.0.1).
"""
from __future__ import annotations

import json
import os
import signal

import pytest

from fakes.ray.launch import marked_processes
from fakes.ray.survey import survey
from fakes.real.procfs import listeners
from fakes.real.procs import alive
from support.ray_cluster import NODES, SCENARIO, cluster_down, cluster_up, gangstorm, run, write_scenario
from support.ray_fleet import ray_or_fail

pytestmark = pytest.mark.real

FLEET = 16      # two shards of 8: the fleet a run would split the same way with fakelets_per_process 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray_or_fail()
    home = tmp_path_factory.mktemp("clusters")
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(home)}
    state: dict = {}
    try:
        scenario = home / "shards.yaml"
        scenario.write_text(SCENARIO + "schedulers:\n  ray: {fakelets_per_process: 8}\n")
        cluster_up(["--ray-nodes", "fakelet", "--nodes", str(FLEET), "--scenario", str(scenario)], env, state, 300)
        yield {"env": env, "state": state, "address": state["connect"]["--ray-address"], "home": home}
    finally:
        left = cluster_down(env, state)
        assert not left, f"left running after `cluster down ray`: {left}"


def test_cluster_up_starts_fakelet_shards_on_loopback(cluster):
    state = cluster["state"]
    assert state["nodes_kind"] == "fakelet" and len(state["shard_pids"]) == 2 and len(state["fleet"]) == FLEET
    assert state["fakelets"] == {"syncer": "node", "per_process": 8, "gcs_load_poll_ms": 1000, "front": "python"}
    print(f"cluster up: {FLEET} fakelets in {state['up_s']} s")
    pids = marked_processes(state["ray_tmpdir"])
    assert set(state["shard_pids"]) <= set(pids) and alive(state["launcher_pid"])
    socks = listeners(pids)
    assert socks and {a for a, _, _ in socks} == {"127.0.0.1"}, f"non-loopback listeners: {socks}"
    r = run(gangstorm() + ["cluster", "status", "ray"], cluster["env"], 120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fakelet shard 0: running" in r.stdout and "fakelet shard 1: running" in r.stdout, r.stdout
    assert "nodes_alive: 16" in r.stdout and "gpus_alive: 128" in r.stdout, r.stdout


def test_a_run_drives_the_fakelet_cluster_and_leaves_it_as_it_found_it(cluster, tmp_path):
    out = tmp_path / "run"
    r = run(gangstorm() + ["run", str(write_scenario(tmp_path)), "--schedulers", "ray", "--ray-address",
                           cluster["address"], "--nodes", str(NODES), "--quiet", "--out", str(out)],
            cluster["env"], 300)
    assert r.returncode == 0, r.stderr[-3000:]
    ray = json.loads((out / "summary.json").read_text())["schedulers"]["ray"]
    assert ray["jobs"]["admitted"] == ray["jobs"]["submitted"] >= 50, ray["jobs"]
    assert ray["chaos_applied"]["evict"]["applied"] > 0
    assert ray["control_plane"]["left_behind"] == {"placement_groups": 0}
    found = survey(cluster["address"])
    assert found["placement_groups"] == [] or all(pg["state"] == "REMOVED" for pg in found["placement_groups"])
    assert sum(1 for n in found["nodes"] if n["alive"] and n["gpus"] > 0) == FLEET


def test_members_are_not_started_on_attached_fakelets(cluster, tmp_path):
    sc = tmp_path / "startup.yaml"
    sc.write_text(SCENARIO + "startup:\n  image: {image_gb: 4, node_pull_gbps: 0.5, registry_gbps: 1}\n")
    r = run(gangstorm() + ["run", str(sc), "--schedulers", "ray", "--ray-address", cluster["address"],
                           "--nodes", str(NODES), "--dry-run", "--out", str(tmp_path / "out")], cluster["env"], 180)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"gangstorm: error: ray at {cluster['address']}: {NODES} of the {NODES} nodes the run uses are fakelets "
        f"(gpu-00000, ...), where no member can start; drop startup.image or attach to real raylets"), r.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_uses_of_ray_nodes_are_one_line(tmp_path):
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp_path)}
    for argv, expected in ((["up", "kube", "--ray-nodes", "fakelet"],
                            "gangstorm: error: --ray-nodes: only used with `cluster up ray`, got `cluster up kube`"),
                           (["status", "ray", "--ray-nodes", "fakelet"],
                            "gangstorm: error: --nodes/--scenario/--ray-nodes: only used with `cluster up`, "
                            "got `cluster status`")):
        r = run(gangstorm() + ["cluster", *argv], env, 60)
        assert (r.returncode, r.stderr.strip()) == (2, expected)
    r = run(gangstorm() + ["cluster", "up", "ray", "--ray-nodes", "x"], env, 60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) <= 2 and "fakelet" in r.stderr
    assert not list(tmp_path.iterdir()), "a refused `cluster up` must not leave a folder"


def test_cluster_down_after_the_holder_was_killed(tmp_path):
    # SIGKILL of the holder: the head launcher and the shards see EOF on their stdin and stop;
    # down finds anything left by the RAY_TMPDIR they inherited.
    ray_or_fail()
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp_path)}
    state: dict = {}
    try:
        cluster_up(["--ray-nodes", "fakelet", "--nodes", "4", "--name", "crashed"], env, state, 300)
        os.kill(state["launcher_pid"], signal.SIGKILL)
        r = run(gangstorm() + ["cluster", "status", "ray", "--name", "crashed"], env, 120)
        assert r.returncode == 3 and "DOWN" in r.stdout and "launcher: exited" in r.stdout, r.stdout
        r = run(gangstorm() + ["cluster", "down", "ray", "--name", "crashed"], env, 180)
        assert r.returncode == 0, r.stderr
        assert not marked_processes(state["ray_tmpdir"]) and not os.path.exists(state["ray_tmpdir"])
    finally:
        left = cluster_down(env, state, "crashed")
        assert not left, f"processes of the killed cluster left: {left}"
