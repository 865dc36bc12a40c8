"""Ray, your own cluster: `gangstorm cluster up ray` in one process, `gangstorm run --ray-address` in
another, next to a placement group gangstorm did not create (all on 127.0.0.1).

One 4-node cluster serves the module (booting raylets is the slow part). Its finalizer runs
`gangstorm cluster down ray` even when a test fails, and checks that no raylet or gcs_server naming
the cluster's RAY_TMPDIR is left.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fakes.ray.fleet import RAY_ENV, ray_processes
from fakes.ray.survey import PG_PREFIX, survey
from fakes.real.procfs import listeners
from fakes.real.procs import alive, session_pids
from support.paths import ROOT as REPO
from support.ray_cluster import NODES, cluster_down, cluster_up, gangstorm, run, write_scenario
from support.ray_fleet import ray_or_fail
from support.tails import assert_merged_tails_are_the_per_job_ones

pytestmark = pytest.mark.real

FOREIGN = "user-training"
# A user's workload: a detached placement group that outlives the process that made it.
MAKE_FOREIGN = f"""
import sys, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1], log_to_driver=False, include_dashboard=False)
pg = placement_group([{{"GPU": 1}}], name={FOREIGN!r}, lifetime="detached")
ray.get(pg.ready(), timeout=120)
print(pg.id.hex())
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray_or_fail()
    home = tmp_path_factory.mktemp("clusters")
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(home)}
    state: dict = {}
    try:
        cluster_up(["--nodes", str(NODES)], env, state)
        address = state["connect"]["--ray-address"]
        made = run([sys.executable, "-c", MAKE_FOREIGN, address], {**os.environ, **RAY_ENV}, 180)
        assert made.returncode == 0, f"could not create the foreign placement group: {made.stderr[-2000:]}"
        yield {"env": env, "state": state, "address": address, "home": home,
               "foreign_id": made.stdout.strip().splitlines()[-1]}
    finally:
        left = cluster_down(env, state)
        assert not left, f"left running after `cluster down ray`: {left}"


def test_attach_modules_do_not_import_ray():
    # `gangstorm run` and `gangstorm cluster` import these; ray stays in the subprocesses.
    code = ("import sys, fakes.ray.target, fakes.ray.launch, fakes.ray.survey, fakes.ray.attach; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_cluster_up_is_detached_and_on_loopback(cluster):
    state = cluster["state"]
    pid = state["launcher_pid"]
    assert alive(pid), "the launcher did not outlive `cluster up`"
    assert state["up_s"] < 180 and len(state["fleet"]) == NODES, state
    print(f"cluster up: {NODES} nodes in {state['up_s']} s")
    pids = session_pids(pid)
    socks = listeners(pids)
    assert socks and {a for a, _, _ in socks} == {"127.0.0.1"}, f"non-loopback listeners: {socks}"
    assert all(p in pids for p, _ in ray_processes(state["ray_tmpdir"])), "a Ray process outside the launcher's session"
    r = run(gangstorm() + ["cluster", "status", "ray", "--json"], cluster["env"], 120)
    st = json.loads(r.stdout)["status"]
    assert r.returncode == 0 and st["up"] and st["nodes_alive"] == NODES and st["gpus_alive"] == 8 * NODES, st


def test_foreign_workloads_refused_and_dry_run_creates_nothing(cluster, tmp_path):
    sc = write_scenario(tmp_path)
    base = gangstorm() + ["run", str(sc), "--schedulers", "ray", "--ray-address", cluster["address"],
                          "--nodes", str(NODES)]
    r = run(base + ["--out", str(tmp_path / "refused")], cluster["env"], 180)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(err) == 1 and err[0].startswith(f"gangstorm: error: ray at {cluster['address']}: 1 placement group "
                                               f"gangstorm did not create (pg {FOREIGN!r}"), err
    assert "--allow-foreign-workloads" in err[0]
    assert not (tmp_path / "refused").exists(), "a refused run must not create its results folder"

    too_many = [a if a != str(NODES) else str(NODES + 1) for a in base]
    r = run(too_many + ["--allow-foreign-workloads", "--out", str(tmp_path / "big")], cluster["env"], 180)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"gangstorm: error: ray at {cluster['address']}: {NODES} alive nodes with GPUs, the scenario needs "
        f"{NODES + 1} (pass --nodes {NODES} or fewer)"), r.stderr[-2000:]
    assert not (tmp_path / "big").exists()

    r = run(base + ["--allow-foreign-workloads", "--dry-run", "--out", str(tmp_path / "dry")], cluster["env"], 180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("dry run: nothing was created"), r.stdout
    assert f"{NODES} alive nodes with GPUs; the run uses {NODES} with 8 GPUs each" in r.stdout, r.stdout
    assert "node_fail / node_recover: not run here" in r.stdout
    assert not (tmp_path / "dry").exists()
    found = survey(cluster["address"])
    assert [pg["name"] for pg in found["placement_groups"]] == [FOREIGN], found["placement_groups"]
    assert found["jobs"] == [] and found["actors"] == [], "the checks must not leave a driver or an actor behind"


def test_run_next_to_foreign_workloads_touches_only_its_own(cluster, tmp_path):
    out = tmp_path / "run"
    r = run(gangstorm() + ["run", str(write_scenario(tmp_path)), "--schedulers", "ray", "--ray-address",
                           cluster["address"], "--nodes", str(NODES), "--allow-foreign-workloads", "--quiet",
                           "--out", str(out)], cluster["env"], 300)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    ray = summary["schedulers"]["ray"]
    cp = ray["control_plane"]
    assert summary["complete"] and ray["backend"] == "real"
    assert ray["jobs"]["rejected"] == 0 and ray["jobs"]["admitted"] >= 50, ray["jobs"]
    # every 2-node gang's placement came back from the backend: 4 nodes, one leaf
    assert (ray["placement"]["gangs_placed"] >= 1 and ray["placement"]["leaves_spanned"]["max"] == 1
            and ray["placement"]["cross_leaf_gpu_hours"] == 0)
    assert ray["chaos_applied"]["evict"]["applied"] > 0 and cp["evicted"] > 0, (ray["chaos_applied"], cp)
    assert ray["chaos_applied"]["node_fail"] == {"applied": 0, "unsupported": 1}, ray["chaos_applied"]
    assert cp["attached"] == cluster["address"] and cp["raylets_alive"] == NODES
    assert cp["left_behind"] == {"placement_groups": 0}, cp
    prefix = cp["placement_group_prefix"]
    assert prefix.startswith(PG_PREFIX)

    found = survey(cluster["address"])
    foreign = [pg for pg in found["placement_groups"] if pg["name"] == FOREIGN]
    assert foreign and foreign[0]["id"] == cluster["foreign_id"] and foreign[0]["state"] == "CREATED", \
        f"the foreign placement group was touched: {found['placement_groups']}"
    ours = [pg for pg in found["placement_groups"] if pg["name"].startswith(prefix)]
    assert not ours, f"placement groups of the run not REMOVED: {ours}"
    assert found["jobs"] == [], f"the run's driver is still connected: {found['jobs']}"
    alive_gpu = [n for n in found["nodes"] if n["alive"] and n["gpus"] > 0]
    assert len(alive_gpu) == NODES, "the run must leave every node of the cluster alive"
    assert ray_processes(cluster["state"]["ray_tmpdir"]), "the run must never stop the cluster"


def test_two_locust_workers_share_one_existing_ray_polled_once_with_exact_merged_tails(cluster, tmp_path):
    """One-target Locust: two workers' drivers only create (hold, remove) their groups, the master's
    driver polls the GCS's placement group table for the whole run; the merged tails are the per-job
    ones, exactly, and nothing of the run is left on the cluster."""
    import csv
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "two-workers"
    t0 = time.monotonic()
    r = run(gangstorm() + ["locust", str(write_scenario(tmp_path)), "--schedulers", "ray", "--ray-address",
                           cluster["address"], "--nodes", str(NODES), "--allow-foreign-workloads",
                           "--processes", "2", "--master-port", str(port), "--headless", "--time-scale", "60",
                           "--out", str(out)], cluster["env"], 400)
    print(f"two-worker locust run: {time.monotonic() - t0:.1f} s wall")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    ray = s["schedulers"]["ray"]
    assert s["complete"] is True and s["locust"]["workers"] == 2 and s["locust"]["mode"] == "one-target"
    assert ray["jobs"]["submitted"] == 156 and ray["jobs"]["rejected"] == 0 and ray["jobs"]["failed"] == 0
    assert ray["jobs"]["admitted"] >= 50, ray["jobs"]
    cp = ray["control_plane"]
    # the master's driver observed (the workers report no control plane) and submitted nothing itself
    assert cp["role"] == "observe" and cp["submitted"] == 0 and cp["groups_ready"] == ray["jobs"]["admitted"], cp
    assert cp["left_behind"] == {"placement_groups": 0}, cp
    # evict is a gang restart by the group's owner: refused in the observer, recorded as unsupported
    assert ray["chaos_applied"]["evict"]["applied"] == 0 and ray["chaos_applied"]["evict"]["unsupported"] >= 1
    assert ray["chaos_applied"]["node_fail"] == {"applied": 0, "unsupported": 1}, ray["chaos_applied"]
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert len(rows) == 156
    admitted = [float(row["admission_s"]) for row in rows if row["admitted_s"]]
    assert_merged_tails_are_the_per_job_ones(ray["admission_s"], admitted)

    found = survey(cluster["address"])
    foreign = [pg for pg in found["placement_groups"] if pg["name"] == FOREIGN]
    assert foreign and foreign[0]["id"] == cluster["foreign_id"] and foreign[0]["state"] == "CREATED"
    assert [pg for pg in found["placement_groups"] if pg["name"] != FOREIGN] == [], found["placement_groups"]
    assert found["jobs"] == [], f"a driver of the run is still connected: {found['jobs']}"
    assert len([n for n in found["nodes"] if n["alive"] and n["gpus"] > 0]) == NODES


def test_cluster_down_leaves_no_ray_process(cluster):
    state = cluster["state"]
    left = cluster_down(cluster["env"], state)
    assert not left, left
    assert not ray_processes(state["ray_tmpdir"]) and not alive(state["launcher_pid"])
    assert not os.path.exists(state["ray_tmpdir"]), "RAY_TMPDIR not removed"
    assert not (cluster["home"] / "ray-default").exists(), "cluster state folder not removed"


def test_cluster_down_after_the_launcher_was_killed(tmp_path):
    # SIGKILL of the launcher takes its raylets with it, but not their agents (which rename
    # themselves ray::DashboardAgent): down finds them by the RAY_TMPDIR they inherited.
    ray_or_fail()
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp_path)}
    state: dict = {}
    try:
        cluster_up(["--nodes", "2", "--name", "crashed"], env, state)
        os.kill(state["launcher_pid"], signal.SIGKILL)
        r = run(gangstorm() + ["cluster", "status", "ray", "--name", "crashed"], env, 120)
        assert r.returncode == 3 and "DOWN" in r.stdout and "launcher: exited" in r.stdout, r.stdout
        r = run(gangstorm() + ["cluster", "down", "ray", "--name", "crashed"], env, 180)
        assert r.returncode == 0, r.stderr
        assert not os.path.exists(state["ray_tmpdir"])
    finally:
        left = cluster_down(env, state, "crashed")
        assert not left, f"processes of the killed cluster left: {left}"

