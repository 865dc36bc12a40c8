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
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from fakes.ray.fleet import REPO, RayFleet, node_resource
from fakes.real.procs import session_pids
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
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
