"""Kubernetes and Volcano clusters gangstorm did not start: `gangstorm cluster up` runs in a process of
its own, then `gangstorm run --kubeconfig` drives the cluster as an existing one, with chaos.

What must hold: a pod somebody else created is refused by default and untouched when allowed;
after the run nothing labelled with a run is left in the cluster; `cluster down` leaves no process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes.kube.cluster import COMPONENT_NAMES, BinariesMissing, leftover_processes, require_binaries
from support.gangfirst import with_a_gang_first
from support.paths import ROOT
from support.tails import assert_merged_tails_are_the_per_job_ones

pytestmark = pytest.mark.real

SCENARIO = ROOT / "tests/data/existing-small.yaml"
RUN_LABEL = "gangstorm.io/run"


def gangstorm(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def start(backend: str, tmp: Path) -> tuple[dict, dict]:
    try:
        require_binaries()
    except BinariesMissing as e:
        pytest.fail(str(e), pytrace=False)
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp / "clusters")}
    up = gangstorm("cluster", "up", backend, "--nodes", "4", "--json", env=env)
    if up.returncode != 0:
        gangstorm("cluster", "down", backend, env=env)
        pytest.fail(f"cluster up {backend} failed: {up.stderr[-2000:]}", pytrace=False)
    return json.loads(up.stdout), env


def stop(backend: str, state: dict, env: dict) -> None:
    down = gangstorm("cluster", "down", backend, env=env)
    assert down.returncode == 0, down.stderr
    assert "no process left" in down.stdout
    assert leftover_processes(COMPONENT_NAMES, under=state["folder"]) == []


@pytest.fixture(scope="module")
def kube_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("existing-kube")
    state, env = start("kube", tmp)
    try:
        yield state, env, tmp
    finally:
        stop("kube", state, env)


def core(state: dict):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(config_file=state["connect"]["--kubeconfig"], client_configuration=cfg)
    cfg.proxy = None
    return client.CoreV1Api(client.ApiClient(cfg))


def labelled(api) -> dict[str, int]:
    """Objects carrying any run label, by kind."""
    out = {}
    for kind, call in (("pods", api.list_pod_for_all_namespaces), ("namespaces", api.list_namespace),
                       ("nodes", api.list_node), ("configmaps", api.list_config_map_for_all_namespaces)):
        out[kind] = len(call(label_selector=RUN_LABEL).items)
    return out


@pytest.fixture
def foreign_pod(kube_cluster):
    """A pod gangstorm did not create, bound to one of the cluster's nodes and Running."""
    state, _, _ = kube_cluster
    api = core(state)
    body = {"metadata": {"name": "somebody-elses", "namespace": "default", "labels": {"app": "theirs"}},
            # on gpu-00000: the node the scenario's node_failure picks (seed 5), so chaos must skip it
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-00000"}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "theirs/app",
                                     "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}
    api.create_namespaced_pod("default", body)
    deadline = time.monotonic() + 60
    while api.read_namespaced_pod("somebody-elses", "default").status.phase != "Running":
        assert time.monotonic() < deadline, "the foreign pod never ran"
        time.sleep(0.5)
    pod = api.read_namespaced_pod("somebody-elses", "default")
    try:
        yield pod
    finally:
        api.delete_namespaced_pod("somebody-elses", "default", grace_period_seconds=0)


def test_a_cluster_with_somebody_elses_pod_is_refused_in_one_line_before_anything_is_written(kube_cluster, foreign_pod):
    state, env, tmp = kube_cluster
    out = tmp / "refused"
    r = gangstorm("run", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"], "--out", str(out), env=env)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "1 pods gangstorm did not create (default/somebody-elses)" in line
    assert "--allow-foreign-workloads" in line
    assert not out.exists() and labelled(core(state)) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}


def test_dry_run_reads_the_cluster_and_creates_nothing(kube_cluster):
    state, env, _ = kube_cluster
    r = gangstorm("run", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"],
                  "--node-selector", "type=kwok",
                  "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert "dry run: nothing was created" in r.stdout
    assert "4 Ready nodes match --node-selector type=kwok" in r.stdout
    assert "would disrupt: evict" in r.stdout and "would disrupt: fail 1 of its own fake nodes" in r.stdout
    assert labelled(core(state)) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}


def test_chaos_on_the_clusters_own_nodes_leaves_the_foreign_pod_untouched_and_nothing_labelled(kube_cluster,
                                                                                               foreign_pod):
    state, env, tmp = kube_cluster
    api = core(state)
    out = tmp / "selected"
    # the gang submitted first meets an empty fleet: the placement check below does not rest on timing
    r = gangstorm("run", str(with_a_gang_first(SCENARIO, tmp)), "--kubeconfig", state["connect"]["--kubeconfig"],
                  "--node-selector", "type=kwok",
                  "--allow-foreign-workloads", "--time-scale", "120", "--quiet", "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    kube = json.loads((out / "summary.json").read_text())["schedulers"]["kube"]
    cp = kube["control_plane"]
    assert kube["jobs"]["rejected"] == 0 and kube["jobs"]["admitted"] > 20 and cp["evictions"] >= 1
    # every 2-node gang's placement came back from the backend: 4 nodes, one leaf
    assert (kube["placement"]["gangs_placed"] == kube["by_class"]["large"]["admitted"] >= 1
            and kube["placement"]["leaves_spanned"]["max"] == 1
            and kube["placement"]["cross_leaf_gpu_hours"] == 0)
    assert cp["foreign_pods"] == 1 and cp["left_behind"] == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    after = api.read_namespaced_pod("somebody-elses", "default")
    assert after.metadata.uid == foreign_pod.metadata.uid and after.status.phase == "Running"
    assert after.metadata.deletion_timestamp is None
    node = api.read_node(after.spec.node_name)
    assert not [t for t in node.spec.taints or [] if t.key.startswith("gangstorm.io")]
    assert after.spec.node_name == "gpu-00000" and cp["node_fail_skipped_foreign"] == 1
    assert labelled(api) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    assert len(api.list_node(label_selector="type=kwok").items) == 4


def test_without_a_node_selector_the_run_brings_its_own_kwok_nodes_and_removes_them(kube_cluster):
    state, env, tmp = kube_cluster
    api = core(state)
    out = tmp / "own-nodes"
    r = gangstorm("run", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"], "--time-scale", "120",
                  "--quiet", "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    cp = json.loads((out / "summary.json").read_text())["schedulers"]["kube"]["control_plane"]
    assert cp["nodes"] == 4 and cp["left_behind"] == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    assert cp["evictions"] >= 1 and cp["restarts"] >= 1
    jobs = (out / "jobs.csv").read_text().splitlines()
    assert len(jobs) > 20
    assert labelled(api) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    assert sorted(n.metadata.name for n in api.list_node().items) == [f"gpu-{i:05d}" for i in range(4)]
    assert leftover_processes(("kwok",), under=str(out)) == []      # the run's own kwok is gone


def test_volcano_that_is_not_installed_is_named_as_such(kube_cluster):
    state, env, tmp = kube_cluster
    r = gangstorm("run", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"], "--schedulers", "volcano",
                  "--out", str(tmp / "no-volcano"), env=env)
    assert r.returncode == 2
    assert "Volcano is not installed there (no CRD jobs.batch.volcano.sh" in r.stderr
    assert "gangstorm cluster up volcano" in r.stderr


def test_volcano_on_an_existing_cluster_uses_its_volcano_and_removes_its_queues(tmp_path):
    state, env = start("volcano", tmp_path)
    try:
        out = tmp_path / "run"
        r = gangstorm("run", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"], "--schedulers", "volcano",
                      "--node-selector", "type=kwok", "--time-scale", "120", "--quiet", "--out", str(out), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        vc = json.loads((out / "summary.json").read_text())["schedulers"]["volcano"]
        assert vc["jobs"]["rejected"] == 0, vc["jobs"]          # every tenant's queue was valid and created
        assert vc["jobs"]["admitted"] > 20 and vc["control_plane"]["evictions"] >= 1
        assert vc["control_plane"]["left_behind"] == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0,
                                                      "volcano_jobs": 0, "volcano_queues": 0}
        from kubernetes import client
        custom = client.CustomObjectsApi(core(state).api_client)
        queues = [q["metadata"]["name"] for q in
                  custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")["items"]]
        assert [q for q in queues if q.startswith("gs-")] == []
    finally:
        stop("volcano", state, env)


def test_two_locust_workers_share_one_existing_cluster_observed_once_with_exact_merged_tails(kube_cluster):
    import csv

    state, env, tmp = kube_cluster
    out = tmp / "two-workers"
    r = gangstorm("locust", str(SCENARIO), "--kubeconfig", state["connect"]["--kubeconfig"],
                  "--node-selector", "type=kwok",
                  "--processes", "2", "--headless", "--time-scale", "120", "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    kube = s["schedulers"]["kube"]
    assert s["complete"] is True and s["locust"]["workers"] == 2 and s["locust"]["mode"] == "one-target"
    assert kube["jobs"]["submitted"] == 70 and kube["jobs"]["rejected"] == 0 and kube["jobs"]["admitted"] > 20
    cp = kube["control_plane"]
    assert cp["pod_watches"] == 1 and cp["nodes"] == 4        # one watch, the whole fleet, one scheduler
    assert cp["left_behind"] == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert len(rows) == 70
    admitted = [float(row["admission_s"]) for row in rows if row["admitted_s"]]
    assert_merged_tails_are_the_per_job_ones(kube["admission_s"], admitted)
    assert labelled(core(state)) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
