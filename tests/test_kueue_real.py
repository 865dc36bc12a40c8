"""Real Kueue (kueue-manager v0.19.2, kube-scheduler binding) on a small KWOK cluster.

The @pytest.mark.real tests need `make k8s-bins kueue-bins` and fail (never skip) when a binary is
missing. One cluster for the module (4 nodes, 32 GPUs, two leaves); each test uses its own tenants
and waits for its jobs by events, not by wall time. The unmarked tests check what the adapter writes.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.target import ChaosAction, TargetContext
from support.walldriver import Driver, gang

NODES, LEAF = 4, 2
KUEUE_PROCS = ("kueue-manager", "kwok-controller")
CONFIG = {"queues": {"nominal_gpus": {"lender": 16, "borrower": 16, "evict": 16}}, "api_qps": 100, "api_burst": 200}


@pytest.fixture(scope="module")
def kueue(tmp_path_factory):
    from fakes.kueue.target import RealKueue
    run_dir = tmp_path_factory.mktemp("kueue-real")
    ctx = TargetContext(fleet=Fleet(nodes=NODES, leaf_size=LEAF, leaves_per_spine=2), seed=7, run_dir=run_dir,
                        config=CONFIG, control_plane={"etcd_quota_bytes": 512 * 1024**2})
    target = RealKueue(ctx)
    try:
        target.start()   # raises with `make k8s-bins` / `make kueue-bins` when binaries are missing
        yield target, run_dir
    finally:
        target.stop()


@pytest.mark.real
def test_a_tenant_borrows_idle_quota_from_the_cohort_and_every_gang_is_admitted_whole(kueue):
    """'lender' (16 GPUs nominal) runs one short job and goes idle; 'borrower' (16 nominal) then
    submits three 2 x 8-GPU gangs: two run at once (the second on 16 GPUs borrowed from lender's
    idle quota), the third waits for quota, not for a partial placement."""
    target, _ = kueue
    d = Driver(target)
    d.submit(gang(1, "lender", members=1, gpus=8, duration_s=1, submit_s=d.now()))
    d.until(lambda: d.finished(1), 90, "lender's job finished")
    ids = (2, 3, 4)
    for i in ids:
        d.submit(gang(i, "borrower", members=2, gpus=8, duration_s=4, submit_s=d.now()))
    d.until(lambda: d.finished(*ids), 120, "borrower's gangs finished")

    for i in ids:
        bound = d.of(i, Kind.BOUND)
        assert max(e.members for e in bound) == 2 and d.of(i, Kind.ADMITTED)[0].members == 2
    first_two_done = sorted(d.of(i, Kind.FINISHED)[0].t for i in ids)[0]
    admitted = sorted(d.of(i, Kind.ADMITTED)[0].t for i in ids)
    assert admitted[1] < first_two_done <= admitted[2] + 0.5, "exactly two of 32 GPUs' worth ran at once"
    third = [i for i in ids if d.of(i, Kind.ADMITTED)[0].t == admitted[2]][0]
    assert min(e.t for e in d.of(third, Kind.BOUND)) >= first_two_done - 0.5, "the third gang had a member bound early"
    assert target.snapshot(d.now()).partial_gangs == 0

    queues = target.kueue_figures()["queues"]
    assert queues["q-borrower"]["nominal_gpus"] == 16 and queues["q-borrower"]["borrowed_gpus_max"] == 16, queues
    assert queues["q-borrower"]["workloads_admitted"] == 3 and queues["q-lender"]["borrowed_gpus_max"] == 0
    assert queues["q-borrower"]["admission_s"]["n"] == 3
    # the pods go only once Kueue finished each Workload, so no quota stays reserved for a gang
    # that is gone (KWOK strips Kueue's finalizer from a deleted pod)
    d.until(lambda: target.book.reserved.get("q-borrower") == 0 == target.book.reserved.get("q-lender"), 60,
            "quota released")
    assert "deleted_before_workload_finished" not in target.figures


@pytest.mark.real
def test_an_evicted_member_is_replaced_without_requeueing_the_workload(kueue):
    """Kueue keeps a pod group's Workload admitted when one member is evicted: its quota stays
    reserved, the replacement the adapter creates is ungated at once and only it is bound again."""
    target, _ = kueue
    d = Driver(target)
    d.submit(gang(11, "evict", members=2, gpus=8, duration_s=8, submit_s=d.now()))
    d.until(lambda: d.of(11, Kind.ADMITTED), 90, "gang 11 admitted")
    d.events += target.chaos(ChaosAction(t=d.now(), kind="evict", params={"members": 1}), d.now())
    d.until(lambda: d.of(11, Kind.REQUEUED), 60, "gang 11 lost a member")
    d.until(lambda: len(d.of(11, Kind.ADMITTED)) >= 2, 60, "gang 11 admitted again")
    assert d.of(11, Kind.EVICTED)[0].members == 1, "the other member kept its node"
    wl = target.book.workloads["g11"]
    assert wl.evictions == 0 and len(wl.admissions) == 1, "Kueue did not requeue the Workload"
    d.until(lambda: d.finished(11), 90, "gang 11 finished")


@pytest.mark.real
def test_stop_leaves_no_process(kueue):
    from fakes.kube.cluster import COMPONENT_NAMES, leftover_processes
    target, run_dir = kueue
    assert target.kueue is not None and target.kueue.proc.alive()
    target.stop()
    assert leftover_processes(COMPONENT_NAMES + KUEUE_PROCS, under=Path(run_dir)) == []


SCENARIO = """
name: kueue-ci
seed: 3
duration_h: 0.05
drain_h: 1.0
warmup_h: 0
sample_every_s: 30
schedulers_enabled: [kueue]
fleet: {nodes: 4, leaf_size: 2, leaves_per_spine: 2}
workload:
  target_allocation: 0.9
  churn_multiplier: 8
  tenants: 2
  classes:
    small:
      share: 0.5
      shapes: [{members: 1, gpus: 8, weight: 1.0}]
      duration_s: {median: 120, sigma: 0.3, max: 300}
    large:
      share: 0.5
      shapes: [{members: 2, gpus: 8, weight: 1.0}]
      duration_s: {median: 240, sigma: 0.3, max: 600}
schedulers:
  kueue:
    queues: {default_nominal_share: 0.375}     # 12 GPUs each of 32: a 2 x 8 gang borrows 4
"""


@pytest.mark.real
@pytest.mark.bench      # in CI, tests/test_kube_gang_real.py's one run of the three gang schedulers covers this
def test_a_run_admits_every_gang_through_kueue_and_reports_each_queue(tmp_path):
    """`gangstorm run --backend real --schedulers kueue` on 4 KWOK nodes: every job admitted and
    finished, the rows agree with the summary, each queue's admission and borrowing is reported.
    Partial-gang GPU-hours are not exactly 0: Kueue admits the group whole (quota and nodes), then
    kube-scheduler binds its pods one after another, ~12 ms apart (tools/kueue/measure.py), and a
    gang with some members bound counts as partial until the last one is."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", "s.yaml", "--backend", "real",
                        "--time-scale", "30", "--out", str(out), "--quiet"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())["schedulers"]["kueue"]
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    jobs = s["jobs"]
    assert jobs["submitted"] == len(rows) >= 4 and jobs["finished"] == jobs["admitted"] == len(rows), jobs
    assert {r["outcome"] for r in rows} == {"finished"} and s["admission_s"]["count"] == len(rows)
    assert s["admission_s"]["max"] == pytest.approx(max(float(r["admission_s"]) for r in rows), abs=1e-5)
    multi = [r for r in rows if int(r["members"]) > 1]
    assert multi and s["partial_gang_gpu_hours"] < 0.002, s["partial_gang_gpu_hours"]
    queues = s["control_plane"]["queues"]
    assert len(queues) == 2 and sum(q["workloads_admitted"] for q in queues.values()) >= len(rows)
    assert all(q["nominal_gpus"] == 12 for q in queues.values())
    assert max(q["borrowed_gpus_max"] for q in queues.values()) >= 4      # a 16-GPU gang borrowed
    assert "queue q-" in (out / "summary.md").read_text()


def test_a_missing_kueue_manager_fails_with_how_to_build_it(tmp_path, monkeypatch):
    from fakes.kueue import controlplane
    monkeypatch.setenv("GANGSTORM_BIN_DIR", str(tmp_path))
    with pytest.raises(controlplane.KueueMissing, match="make kueue-bins"):
        controlplane.require_binaries()


def test_a_gang_is_one_gated_pod_group_in_its_tenants_local_queue():
    from fakes.kueue.pods import as_group_member
    pod = {"metadata": {"name": "j5-m0", "labels": {"a": "b"}}, "spec": {"containers": [{"name": "main"}]}}
    out = as_group_member(pod, 5, 3, "team", ("kueue.x-k8s.io/podset-preferred-topology", "gangstorm.io/leaf"))
    meta = out["metadata"]
    assert meta["labels"] == {"a": "b", "kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/pod-group-name": "g5",
                              "kueue.x-k8s.io/managed": "true"}
    assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
    assert meta["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == "gangstorm.io/leaf"
    assert len(meta["annotations"]["kueue.x-k8s.io/role-hash"]) == 8
    assert meta["finalizers"] == ["kueue.x-k8s.io/managed"]
    gates = [g["name"] for g in out["spec"]["schedulingGates"]]
    assert gates == ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]


def test_every_cluster_queue_shares_one_cohort_and_the_topology_flavor():
    from fakes.kueue.controlplane import queue_objects
    objs = queue_objects({"gangstorm.io/run": "r"}, "ns", {"a": 16, "b": 8}, {}, prefix="p-")
    kinds = [(plural, body["metadata"]["name"]) for plural, body in objs]
    assert kinds == [("topologies", "p-fleet"), ("resourceflavors", "p-gpu"), ("clusterqueues", "p-a"),
                     ("localqueues", "a"), ("clusterqueues", "p-b"), ("localqueues", "b")]
    cqs = [b for p, b in objs if p == "clusterqueues"]
    assert {b["spec"]["cohortName"] for b in cqs} == {"p-gangstorm"}
    gpu = [r for r in cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu"]
    assert gpu == [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]
    assert all(b["metadata"]["labels"] == {"gangstorm.io/run": "r"} for _, b in objs)
