"""The kube twin against the real kube-scheduler 1.36.1 under DRA, pod by pod: the placements and
per-plugin node scores tools/k8s/dra_placement_probe.py recorded (tests/data/kube/dra-probe.json,
its `command` says how) on 2 KWOK nodes of 8 V100s shared by fraction, exact numbers."""
import json

import numpy as np
import pytest

from fakes.kube import placementprobe as pp
from fakes.kube.sim import PodState, Scorer, balanced_allocation
from loadgen.input.scenario import load
from loadgen.model.fleet import Fleet
from loadgen.model.target import TargetContext
from support.paths import ROOT

RECORDED = json.loads((ROOT / "tests/data/kube/dra-probe.json").read_text())
STEPS = tuple(pp.Step(s["share"], s["gpus"], s["cpus"]) for s in RECORDED["steps"])
REAL = [None if r is None else pp.Placement(r["node"], tuple(r["gpus"])) for r in RECORDED["real"]]
NODE_OF = {r["node_name"]: r["node"] for r in RECORDED["real"] if r is not None}


def ctx(seed: int = 1) -> TargetContext:
    sc = load(ROOT / "results/gpushare/kube/openb-slice.yaml", overrides={"fleet.nodes": RECORDED["fleet"]["nodes"]})
    return TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("kube"),
                         control_plane=sc.section("control_plane"), seed=seed)


def test_the_recording_is_the_probe_sequence_on_the_scenario_fleet():
    assert STEPS == pp.SEQUENCE
    f = ctx().fleet
    assert RECORDED["fleet"] == {"nodes": f.nodes, "gpus_per_node": f.gpus_per_node,
                                 "cpus_per_node": f.cpus_per_node, "memory_gib_per_node": f.memory_gib_per_node}
    assert RECORDED["kube_scheduler"] == "Kubernetes v1.36.1"
    assert REAL[-1] is None                       # the eight-GPU pod: no node is empty


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_twin_places_every_pod_where_the_real_scheduler_did(seed):
    twin = pp.twin_placements(ctx(seed), STEPS)
    assert pp.first_divergence(STEPS, REAL, twin, 2) is None
    assert pp.layouts(STEPS, twin, 2) == pp.layouts(STEPS, REAL, 2)


def test_the_twin_scores_every_node_as_the_real_scheduler_logged():
    # NodeResourcesFit and BalancedAllocation of every node at every step (-v=10 "Plugin scored
    # node for pod"), the fleet holding what the real scheduler had placed before that step
    twin = pp.twin_scores(ctx(), STEPS, REAL)
    compared = 0
    for step, (logged, mine) in enumerate(zip(RECORDED["scores"], twin)):
        for node, parts in logged.items():
            for plugin in ("NodeResourcesFit", "NodeResourcesBalancedAllocation"):
                assert (step, node, plugin, mine[NODE_OF[node]][plugin]) == (step, node, plugin, parts[plugin])
                compared += 1
            # DynamicResources scores 0 for `exactly` requests; the rest is the same on every node
            assert parts["DynamicResources"] == 0 and parts["TaintToleration"] == 300 and parts["ImageLocality"] == 0
    assert compared == 72


def test_balanced_allocation_scores_the_change_in_balance_as_1_36_does():
    # A 12-cpu, 1 GiB pod on an empty 96-cpu, 1024 GiB node: with it, std = (12/96 - 1/1024) / 2,
    # int((1 - std) * 100) = 93; without it 100; 50 + (50 + 93 - 100) // 2 = 71 (logged at step 2)
    assert int(balanced_allocation([np.array(12 / 96), np.array(1 / 1024)], [np.array(0.0), np.array(0.0)])) == 71
    state = PodState(Fleet(nodes=1, gpus_per_node=8))
    parts = Scorer("least_allocated", 3, state, 1, 12, gpus_scored=False).plugins(
        np.array([8]), np.array([96]), np.array([1024]))
    assert {k: v.tolist() for k, v in parts.items()} == {"NodeResourcesBalancedAllocation": [71],
                                                          "NodeResourcesFit": [(87 + 99) // 2]}
    assert RECORDED["scores"][2]["gpu-00000"]["NodeResourcesBalancedAllocation"] == 71


def scored(step: int, plugin: str) -> dict[str, int]:
    return {n: parts[plugin] for n, parts in RECORDED["scores"][step].items()}


def test_step_1_a_second_milli_pod_joins_the_first_because_1_36_scores_the_change_in_balance():
    # gpu-00001 holds milli:300 (1 cpu, 1 GiB). A 1-cpu pod there keeps its balance at 99 (75);
    # on the empty node it takes the balance from 100 to 99 (50 + 49 // 2 = 74). 1.34's formula
    # scored both 99, a tie.
    assert REAL[0].node == NODE_OF["gpu-00001"] and REAL[1].node == NODE_OF["gpu-00001"]
    assert scored(1, "NodeResourcesBalancedAllocation") == {"gpu-00000": 74, "gpu-00001": 75}
    assert scored(1, "NodeResourcesFit") == {"gpu-00000": 98, "gpu-00001": 98}


def test_step_2_the_whole_gpu_avoids_the_milli_node_because_a_milli_pod_asks_one_cpu():
    # the adapter asks max(cpus, 1): two milli pods hold 2 cpus, so (96 - 14) * 100 // 96 = 85 and
    # (85 + 99) // 2 = 92 against the empty node's (87 + 99) // 2 = 93; at 0 cpus both were 93
    assert scored(2, "NodeResourcesFit") == {"gpu-00000": 93, "gpu-00001": 92}
    assert REAL[2] == pp.Placement(NODE_OF["gpu-00000"], (0,))
    assert [s.cpus for s in STEPS[:2]] == [0, 0]
