"""The kube twin's node score when GPUs go through DRA: nodes list no nvidia.com/gpu and pods request
none, so NodeResourcesFit and BalancedAllocation see cpu and memory only (resource_allocation.go
skips a resource the pod does not request, and its weight), exact integers. BalancedAllocation is
1.36's: the change the pod makes to the node's balance, 50 + (50 + with - without) // 2."""
import numpy as np

from fakes.kube.gpuapi import choose_api
from fakes.kube.sim import PodState, Scorer
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing

FLEET = Fleet(nodes=2, gpus_per_node=8)


def scores(mode, gpus_scored, free_gpus):
    s = PodState(FLEET)
    cpn, mem = s.cpn, s.mem
    scorer = Scorer(mode, 3, s, 1, 12, gpus_scored)
    return scorer(np.array(free_gpus), np.array([cpn - 24, cpn - 24]), np.array([mem - 2, mem - 2])), cpn, mem


def balance(cpus, mem_gib, cpn, mem):
    return int((1 - abs(cpus / cpn - mem_gib / mem) / 2) * 100)


def balanced(cpn, mem):
    """The 12-cpu, 1 GiB pod on a node already holding 24 cpus and 2 GiB."""
    return 50 + (50 + balance(36, 3, cpn, mem) - balance(24, 2, cpn, mem)) // 2


def test_under_dra_the_free_gpus_do_not_move_the_score():
    got, cpn, mem = scores("least_allocated", False, [8, 1])
    cpu = (cpn - 36) * 100 // cpn
    memory = (mem - 3) * 100 // mem
    assert got.tolist() == [(cpu + memory) // 2 + balanced(cpn, mem)] * 2


def test_with_gpu_resources_the_emptier_node_wins_as_before():
    got, cpn, mem = scores("least_allocated", True, [8, 1])
    cpu, memory = (cpn - 36) * 100 // cpn, (mem - 3) * 100 // mem
    assert got.tolist() == [(cpu + memory + 3 * (7 * 100 // 8)) // 5 + balanced(cpn, mem),
                            (cpu + memory + 3 * 0) // 5 + balanced(cpn, mem)]


def test_balanced_allocation_alone_under_dra_is_over_cpu_and_memory():
    got, cpn, mem = scores("balanced_allocation", False, [8, 1])
    assert got.tolist() == [balanced(cpn, mem)] * 2


def test_the_twin_scores_gpus_unless_the_fleet_resolves_to_dra():
    pools = Fleet(nodes=2, gpus_per_node=8, pools=(NodePool("frac", 2, "v100m32", Sharing("fraction")),))
    assert choose_api({"gpu_api": "dra"}, pools, existing=False) == "dra"
    assert choose_api({"gpu_api": "auto"}, pools, existing=False) == "dra"        # fractions: no device plugin
    assert choose_api({"gpu_api": "dra"}, FLEET, existing=False) == ""            # no pools: nvidia.com/gpu
