"""`gangstorm soak` against a `gangstorm cluster up kube` cluster, with the project's Prometheus
evaluating the shipped rules: windows of 20 s until SIGINT.

What must hold: every closed window is a line in results/index.jsonl and a folder that verifies;
Prometheus answers the rolling-p99 recording rule while the soak runs; SIGINT keeps the current
window partial, deletes everything labelled with the soak, and leaves no process the soak started.
Bounded by counts (windows closed), never by wall time, so a loaded machine only makes it slower.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes.kube.cluster import COMPONENT_NAMES, BinariesMissing, leftover_processes, require_binaries
from fakes.prom import PromClient
from loadgen.output import index
from loadgen.output.storage import verify
from support.paths import ROOT

pytestmark = pytest.mark.real

SCENARIO = ROOT / "tests/data/soak-small.yaml"
RUN_LABEL = "gangstorm.io/run"
WAIT_S = 600          # only a machine stalled for minutes reaches these


def gangstorm(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def kube_cluster(tmp_path):
    try:
        require_binaries()
    except BinariesMissing as e:
        pytest.fail(str(e), pytrace=False)
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp_path / "clusters"), "PYTHONPATH": str(ROOT)}
    up = gangstorm("cluster", "up", "kube", "--nodes", "4", "--scenario", str(SCENARIO), "--json", env=env)
    if up.returncode != 0:
        gangstorm("cluster", "down", "kube", env=env)
        pytest.fail(f"cluster up kube failed: {up.stderr[-2000:]}", pytrace=False)
    state = json.loads(up.stdout)
    try:
        yield state, env
    finally:
        down = gangstorm("cluster", "down", "kube", env=env)
        assert down.returncode == 0, down.stderr
        assert leftover_processes(COMPONENT_NAMES, under=state["folder"]) == []


def labelled(kubeconfig: str) -> dict[str, int]:
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.proxy = None
    api = client.CoreV1Api(client.ApiClient(cfg))
    return {kind: len(call(label_selector=RUN_LABEL).items)
            for kind, call in (("pods", api.list_pod_for_all_namespaces), ("namespaces", api.list_namespace),
                               ("nodes", api.list_node), ("configmaps", api.list_config_map_for_all_namespaces))}


def soak_json(results: Path) -> dict | None:
    found = sorted(results.glob("*/soak.json"))
    if not found:
        return None
    try:
        return json.loads(found[0].read_text())
    except ValueError:            # never half written (atomic), but be safe
        return None


def processes_mentioning(text: str) -> list[str]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out.append(f"{p.name}: {cmd[:200]}")
    return out


def test_a_soak_on_a_cluster_up_kube_cluster_indexes_windows_feeds_the_rules_and_leaves_nothing_after_sigint(
        kube_cluster, tmp_path):
    state, env = kube_cluster
    kubeconfig = state["connect"]["--kubeconfig"]
    work = tmp_path / "work"
    work.mkdir()
    log = open(tmp_path / "soak.err", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli.main", "soak", str(SCENARIO), "--kubeconfig", kubeconfig,
         "--node-selector", state["node_selector"], "--etcd-endpoint", state["kube"]["etcd_url"],
         "--time-scale", "1", "--window-s", "20", "--windows", "50", "--prometheus"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        # two windows closed: Prometheus has scraped the soak for at least 40 s by then
        deadline = time.monotonic() + WAIT_S
        head = None
        while not (head and len(head["windows"]) >= 2):
            assert proc.poll() is None, (tmp_path / "soak.err").read_text()[-3000:]
            assert time.monotonic() < deadline, "two windows did not close"
            time.sleep(1)
            head = soak_json(work / "results")
        prom = PromClient(head["prometheus"]["url"])
        p99 = prom.query("scheduler_class:gangstorm_admission_seconds:p99_rate5m")
        assert {r["metric"]["class"] for r in p99} == {"small", "large"}
        assert all(r["metric"]["scheduler"] == "kube" for r in p99)
        assert any(math.isfinite(float(r["value"][1])) and float(r["value"][1]) > 0 for r in p99), p99
        assert prom.query("ALERTS") is not None          # the alerting rules are loaded and evaluated
        assert "admission_p99_rate5m" in head["windows"][1]["prometheus"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT_S) == 130, (tmp_path / "soak.err").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    err = (tmp_path / "soak.err").read_text()
    assert "gangstorm: soak interrupted after" in err and "everything labelled deleted" in err, err[-2000:]
    head = soak_json(work / "results")
    folder = work / "results" / head["dir"]
    rows = head["windows"]
    assert head["ended_by"] == "signal" and head["complete"] is False
    assert len(rows) >= 3 and [r["complete"] for r in rows] == [True] * (len(rows) - 1) + [False]
    assert [r["window"] for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:
        assert verify(folder / "windows" / f"{r['window']:04d}") == []
        assert r["etcd_db_bytes"]["kube"] > 0
    assert [e for e in index.entries(work / "results") if e.get("kind") == "soak"] == rows
    assert (folder / "report.html").is_file()
    assert head["left_behind"] == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    assert labelled(kubeconfig) == {"pods": 0, "namespaces": 0, "nodes": 0, "configmaps": 0}
    assert processes_mentioning(str(folder)) == []          # the soak's Prometheus and kwok controller
