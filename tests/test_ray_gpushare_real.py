"""Fractional GPU bundles on real raylets and on fakelets: the same groups, the same outcome.

Four nodes of two GPUs (three in a fraction pool, one in a whole-GPU pool) on Ray's real GCS, first
with real raylets and then with fakelets. One plan (fakes/ray/slicecheck.py) creates single- and
multi-bundle groups of GPU fractions under PACK, STRICT_PACK and STRICT_SPREAD, some pinned to a
node by its node resource, and removes one. What each kind must show, exactly (the raylet's rules:
fakes/ray/fakelets/book.py):
- a fraction sits on one GPU, the best-fitting one (0.25 fills the GPU with 0.25 left, not the
  first GPU with room), lowest index on ties;
- a group whose fraction fits the node's free sum but no single GPU stays PENDING (0.5 when each
  GPU has 0.4 left), and is placed once a removal frees a GPU; a younger group that fits (0.4)
  waits behind it on the GCS's queue, placed only after it (both kinds show this: it is the GCS's);
- a fraction asked for with the fraction pool's label never lands on the whole-GPU node, even when
  only that node has room; a whole-GPU group does;
- no GPU holds more than 1.0.
On raylets the GPU of each bundle is read back from a task run inside it (ray.get_gpu_ids()); on
fakelets from the fakelets' books. The two kinds must agree group by group.

Then GPU models and the run's gpu_sharing block, through `gangstorm run --backend real` on each
kind: four nodes of two GPUs, two t4 and two v100m32 (both fraction pools, so only the model keeps
a job off a node), and five jobs held for the whole run (MODEL_JOBS). Jobs of one model ask for
Ray's accelerator type, the job of two models for a label selector in(); each must land only on its
models' nodes, the last must wait, and summary.json's gpu_sharing must be the figures worked out
by hand beside EXPECTED_SHARING.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from fakes.ray.fleet import REPO, RayFleet, node_resource
from fakes.real.procs import session_pids
from loadgen.input.traces import export_jsonl
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.job import Job
from support.ray_cluster import _started_here, gangstorm, run
from support.ray_fleet import ray_or_fail

pytestmark = pytest.mark.real

FLEET = Fleet(nodes=4, gpus_per_node=2, cpus_per_node=2, leaf_size=4,
              pools=(NodePool("frac", 3, "t4", Sharing("fraction")), NodePool("whole", 1, "t4")))
FRACTION_NODES = {"gangstorm.io/gpu-sharing": "fraction"}     # what RealRay adds on a mixed fleet


def on(node: int, gpu: float) -> dict[str, float]:
    """A bundle of `gpu` pinned to `node` by the custom resource only that node declares."""
    return {"GPU": gpu, node_resource(node): 0.001}


PLAN = {"wait_s": 4.0, "steps": [
    # node 0: two 0.6 slices take a GPU each; 0.5 then fits the 0.8 free sum but no GPU
    {"create": "a", "bundles": [on(0, 0.6)]},
    {"create": "b", "bundles": [on(0, 0.6)]},
    {"create": "c", "bundles": [on(0, 0.5)]},
    {"create": "d", "bundles": [on(0, 0.4)]},                 # would fit either GPU, but waits behind c
    {"remove": "a"},                                          # GPU 0 is free: c there, d fills GPU 1
    # node 1: best fit, not first fit
    {"create": "e", "bundles": [on(1, 0.5)]},
    {"create": "f", "bundles": [on(1, 0.75)]},
    {"create": "g", "bundles": [on(1, 0.25)]},                # fills GPU 1 (0.25 left) rather than GPU 0
    {"create": "h", "bundles": [on(1, 0.5)]},                 # so GPU 0 still has room
    # unpinned, across the fraction pool's nodes (node 3 is a whole-GPU pool's)
    {"create": "s", "bundles": [{"GPU": 0.3}, {"GPU": 0.3}], "strategy": "STRICT_SPREAD", "labels": FRACTION_NODES},
    {"create": "t", "bundles": [{"GPU": 0.5}] * 3, "strategy": "STRICT_PACK", "labels": FRACTION_NODES},
    {"create": "u", "bundles": [{"GPU": 0.6}], "strategy": "PACK", "labels": FRACTION_NODES},  # only node 3 has room
    {"create": "w", "bundles": [{"GPU": 1.0}] * 2, "strategy": "STRICT_PACK"},             # whole GPUs: node 3
]}

# group -> sorted (node, gpu, amount) per bundle; None: not placed
EXPECTED = {
    "b": [(0, 1, 0.6)], "c": [(0, 0, 0.5)], "d": [(0, 1, 0.4)],
    "e": [(1, 0, 0.5)], "f": [(1, 1, 0.75)], "g": [(1, 1, 0.25)], "h": [(1, 0, 0.5)],
    "s": [(0, 0, 0.3), (2, 0, 0.3)],
    "t": [(2, 0, 0.5), (2, 1, 0.5), (2, 1, 0.5)],
    "u": None,
    "w": [(3, 0, 1.0), (3, 1, 1.0)],
}


def run_plan(kind: str, tmp_path) -> dict[str, list | None]:
    fleet = RayFleet(FLEET, workdir=tmp_path / kind, kind=kind, boot_timeout_s=180)
    sessions: list[int] = []
    try:
        fleet.start()
        sessions = [fleet.pgid, *(fleet.fakelets.pids() if fleet.fakelets else [])]
        index = {n["node_id"]: n["index"] for n in fleet.nodes}
        plan = tmp_path / f"{kind}-plan.json"
        plan.write_text(json.dumps(PLAN))
        args = [sys.executable, "-m", "fakes.ray.slicecheck", fleet.address, str(plan), "--hold"]
        log = tmp_path / f"{kind}-slicecheck.log"
        with open(log, "w") as err:
            probe = subprocess.Popen(args + (["--gpu-ids"] if kind == "raylet" else []), cwd=REPO, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     env={**os.environ, **fleet.env()})
        try:
            line = " "
            while line and not line.startswith('{"groups"'):
                line = probe.stdout.readline()       # the plan is done; its groups stand until we answer
            assert line, log.read_text()[-3000:]
            groups = json.loads(line)["groups"]
            slices = fleet.fakelets.gpu_slices() if fleet.fakelets else []
            probe.stdin.write("\n")
            probe.stdin.flush()
            assert probe.wait(timeout=60) == 0, log.read_text()[-3000:]
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait()
    finally:
        fleet.stop()
        left = [p for s in sessions if s for p in session_pids(s)]
        assert not left, f"processes left after stop: {left}"
    assert groups["a"]["state"] == "REMOVED"
    assert groups["c"]["after_step"] == 4, "c must wait for a's removal"
    # and so does d, which fits a GPU of node 0 the whole time: the GCS retries the older group c
    # (refused at Prepare) first and places nothing behind it until c fits
    assert groups["d"]["after_step"] == 4, "d waits behind c"
    return {name: placed(g, index, slices) for name, g in groups.items() if name != "a"}


def placed(g: dict, index: dict[str, int], slices: list[dict]) -> list | None:
    if g["state"] != "CREATED":
        return None
    out = []
    for i, (node_id, bundle) in enumerate(zip(g["nodes"], g["bundles"])):
        if "gpu_ids" in g:
            ids = g["gpu_ids"][i]
        else:
            ids = [int(k) for s in slices if s["pg"] == g["pg"] and s["bundle"] == i for k in s["instances"]]
        assert len(ids) == 1, f"a fraction on more than one GPU: {g} bundle {i}: {ids}"
        out.append((index[node_id], ids[0], bundle["GPU"]))
    return sorted(out)


def no_gpu_over_one(result: dict[str, list | None]) -> dict[tuple[int, int], float]:
    per: dict[tuple[int, int], float] = defaultdict(float)
    for bundles in result.values():
        for node, gpu, amount in bundles or ():
            per[(node, gpu)] += amount
    per = {k: round(v, 4) for k, v in per.items()}
    assert all(v <= 1.0 for v in per.values()), per
    return per


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    ray_or_fail()
    tmp = tmp_path_factory.mktemp("gpushare")
    return {kind: run_plan(kind, tmp) for kind in ("raylet", "fakelet")}


def test_real_raylets_place_fractions_on_one_best_fitting_gpu(results):
    assert results["raylet"] == EXPECTED
    assert no_gpu_over_one(results["raylet"]) == {(0, 0): 0.8, (0, 1): 1.0, (1, 0): 1.0,
                                                  (1, 1): 1.0, (2, 0): 0.8, (2, 1): 1.0, (3, 0): 1.0, (3, 1): 1.0}


def test_fakelets_place_every_group_as_the_raylets_did(results):
    assert results["fakelet"] == results["raylet"]
    no_gpu_over_one(results["fakelet"])


# -- GPU models and the gpu_sharing block of a whole run --------------------------------------------
MODEL_SCENARIO = """\
name: ray-gpu-models
seed: 1
warmup_h: {warmup_h}
drain_h: {drain_h}
sample_every_s: 1
fleet:
  nodes: 4
  gpus_per_node: 2
  cpus_per_node: 2
  leaf_size: 4
  pools:
    t4: {{fraction: 0.5, gpu_model: t4, sharing: fraction}}
    v100: {{fraction: 0.5, gpu_model: v100m32, sharing: fraction}}
schedulers_enabled: [ray]
schedulers:
  ray: {{nodes: {kind}, single_node_strategy: PACK, multi_node_strategy: STRICT_SPREAD}}
workload:
  trace: {trace}
  classes:      # not used (the trace replaces the generator), but checked against the fleet
    c: {{share: 1.0, shapes: [{{members: 1, gpus: 1}}], duration_s: {{median: 60}}}}
"""
T4, V100 = {0, 1}, {2, 3}                # node indices of each pool
# The window is [warm-up, the last arrival] (loadgen/input/plan.py RunPlan.window): jobs 0-4 arrive in
# the first 4 s and are placed (or wait) before it opens at 10 s; job 5 only closes it at 20.5 s,
# after the last sample in it (20 s), and waits too.
WARMUP_S, LAST_S, DRAIN_S = 10.0, 20.5, 1.5


def model_job(i: int, members: int, gpus: int, share: str, spec: str, at: float | None = None) -> Job:
    return Job(id=i, tenant="t", queue="q", cls="c", members=members, gpus_per_member=gpus, duration_s=3600.0,
               submit_s=float(i) if at is None else at, min_available=members, share=share, gpu_spec=spec)


MODEL_JOBS = [
    model_job(0, 2, 2, "", "v100m32"),            # a gang of two 2-GPU members: both v100 nodes, whole
    model_job(1, 1, 1, "milli:500", "t4"),        # half a t4 GPU
    model_job(2, 1, 1, "milli:500", "t4"),        # the other t4 node (the GCS takes the emptiest)
    model_job(3, 1, 1, "", "v100m32|t4"),         # either model: the v100s are full, so a t4's idle GPU
    model_job(4, 1, 1, "milli:300", "v100m32"),   # fits the free t4 capacity, but not its model: waits
    model_job(5, 1, 1, "milli:100", "v100m32", at=LAST_S),   # the end of the window; waits as well
]
# By hand, with E the node of job 3 and O the other t4 node (the same figures either way round):
# held: 4 whole v100 GPUs + 0.5 + 0.5 + 1 whole t4 GPU = 6 of 8 GPUs, a fraction's memory = its compute.
# free: E 0.5 (GPU 0, beside job 1 or 2; GPU 1 is job 3's), O 1.5 (0.5 on GPU 0, GPU 1 idle); v100s 0.
# fragmentation (ATC '23, the five arrived shapes, 1/5 each, jobs 1 and 2 being one shape of 2/5):
#   ("", 2 GPUs, v100m32): no v100 has two idle GPUs, all 2.0 free is unusable    -> 2.0
#   (milli:500, t4): fits every free t4 GPU                                        -> 0
#   ("", 1 GPU, v100m32|t4): O's idle GPU serves, its GPU 0's 0.5 and E's 0.5 do not -> 1.0
#   (milli:300, v100m32): no free v100, all 2.0 unusable                           -> 2.0
#   (2.0 + 0 + 1.0 + 2.0) / 5 = 1.0 GPU of 8
# stranded: the partly used GPUs' free part no pending member (job 4: v100 only) can use: 0.5 + 0.5
EXPECTED_SHARING = {"allocation_ratio": 0.75, "allocation_ratio_memory": 0.75, "fragmentation_ratio": 0.125,
                    "stranded_ratio": 0.125, "whole_gpus_ratio": 0.625}


def write_model_scenario(tmp, kind: str):
    trace = tmp / "trace.jsonl"
    export_jsonl(MODEL_JOBS, trace)
    scenario = tmp / "scenario.yaml"
    scenario.write_text(MODEL_SCENARIO.format(kind=kind, trace=trace, warmup_h=WARMUP_S / 3600,
                                              drain_h=DRAIN_S / 3600))
    return scenario


@pytest.fixture(scope="module", params=["raylet", "fakelet"])
def model_run(request, tmp_path_factory):
    ray_or_fail()
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"models-{kind}")
    scenario = write_model_scenario(tmp, kind)
    out = tmp / "run"
    env = {**os.environ, "GANGSTORM_CLUSTERS_DIR": str(tmp)}      # marks every process the run starts
    try:
        r = run(gangstorm() + ["run", str(scenario), "--backend", "real", "--schedulers", "ray", "--time-scale", "1",
                               "--quiet", "--out", str(out)], env, 400)
    finally:
        left = _started_here(tmp)
    assert not left, f"processes left after the run: {left}"
    assert r.returncode == 0, r.stderr[-3000:]
    return kind, out


def test_jobs_of_a_gpu_model_land_only_on_its_nodes(model_run):
    kind, out = model_run
    rows = [json.loads(line) for line in (out / "ray-real" / "gpu-slices.jsonl").read_text().splitlines()]
    placed = defaultdict(list)
    for r in rows:
        placed[r["id"]].append((r["node"], tuple(r["gpus"])))
    assert sorted(placed[0]) == [(2, (0, 1)), (3, (0, 1))]             # job 0: both v100s, two GPUs each
    (n1, g1), (n2, g2) = placed[1] + placed[2]
    assert {n1, n2} == T4 and g1 == g2 == (0,)                          # t4 only, one apiece, GPU 0
    ((n3, g3),) = placed[3]
    assert n3 in T4 and g3 == (1,)                                      # either model: a t4 node's idle GPU
    assert 4 not in placed and 5 not in placed                         # their model has no room
    with open(out / "jobs.csv") as f:
        admitted = {int(r["job_id"]): r["admitted_s"] for r in csv.DictReader(f)}
    assert [bool(admitted[i]) for i in range(6)] == [True, True, True, True, False, False]


def test_summary_reports_gpu_sharing_as_worked_out_by_hand(model_run):
    kind, out = model_run
    ray = json.loads((out / "summary.json").read_text())["schedulers"]["ray"]
    sharing = ray["gpu_sharing"]
    print(f"{kind}: gpu_sharing {json.dumps(sharing)}")
    assert sharing["samples"] >= 10
    assert {k: sharing[k] for k in EXPECTED_SHARING} == EXPECTED_SHARING
    assert ray["control_plane"]["gpu_slices"] == {"bundles": 5, "conflicts": 0}
    if kind == "fakelet":       # the fakelets' books hold what the ledger says: 6 GPUs in bundles
        with open(out / "timeseries.csv") as f:
            held = [float(r["cp_slice_gpus_held"]) for r in csv.DictReader(f)
                    if WARMUP_S <= float(r["t"]) <= LAST_S and r.get("cp_slice_gpus_held")]
        assert held and set(held) == {6.0}


def test_the_twin_reads_gpu_spec_alike_and_reports_the_same_figures(tmp_path):
    """The simulated Ray (fakes/ray/sim.py) on the same scenario: any listed model, the same block."""
    r = run(gangstorm() + ["run", str(write_model_scenario(tmp_path, "raylet")), "--backend", "sim",
                           "--schedulers", "ray", "--quiet", "--out", str(tmp_path / "run")], dict(os.environ), 120)
    assert r.returncode == 0, r.stderr[-3000:]
    ray = json.loads((tmp_path / "run" / "summary.json").read_text())["schedulers"]["ray"]
    assert {k: ray["gpu_sharing"][k] for k in EXPECTED_SHARING} == EXPECTED_SHARING
    assert ray["jobs"]["admitted"] == 4 and ray["jobs"]["pending_at_end"] == 2
