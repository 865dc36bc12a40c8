"""kube-gang and coscheduling start their cluster with the DRA gates and the resourceclaim-controller
when the fleet's GPUs go through DRA, on top of their own options (no cluster started)."""
import pytest

from fakes.kube.cluster import merge_cluster_options
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.target import TargetContext
from support.kube import KUBE_DEFAULTS

POOLS = Fleet(nodes=2, gpus_per_node=2, pools=(NodePool("frac", 2, "v100m32", Sharing("fraction")),))
DRA = "DRAPartitionableDevices=true,DRAConsumableCapacity=true"


def target(cls, fleet, gpu_api):
    return cls(TargetContext(fleet=fleet, config={**KUBE_DEFAULTS, "gpu_api": gpu_api},
                             control_plane={}, seed=1, run_dir=None))


def test_kube_gang_under_dra_has_both_gate_sets_and_both_controllers():
    from fakes.kubegang.target import RealKubeGang
    assert target(RealKubeGang, POOLS, "dra").cluster_options() == {
        "feature_gates": DRA + ",GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true",
        "runtime_config": "scheduling.k8s.io/v1alpha2=true",
        "controller_manager_args": {"controllers": "resourceclaim-controller,podgroup-protection-controller"}}


def test_kube_gang_without_pools_keeps_its_own_options():
    from fakes.kubegang.target import RealKubeGang, cluster_options
    assert target(RealKubeGang, Fleet(nodes=2), "dra").cluster_options() == cluster_options()


def test_coscheduling_under_dra_adds_the_gates_to_its_scheduler_binary():
    from fakes.coscheduling import controlplane as sp
    from fakes.coscheduling.target import RealCoscheduling
    try:
        binary = sp.require_binaries()[sp.BINARY]
    except sp.SchedulerPluginsMissing:
        pytest.skip("scheduler-plugins not built")
    assert target(RealCoscheduling, POOLS, "dra").cluster_options() == {
        "scheduler_binary": binary, "feature_gates": DRA,
        "controller_manager_args": {"controllers": "resourceclaim-controller"}}


def test_merging_joins_list_flags_and_refuses_two_binaries():
    same = {"feature_gates": "A=true"}
    assert merge_cluster_options(same, dict(same)) == {"feature_gates": "A=true"}
    assert merge_cluster_options({"controller_manager_args": {"controllers": "a", "v": "2"}},
                                 {"controller_manager_args": {"controllers": "b"}}) == \
        {"controller_manager_args": {"controllers": "a,b", "v": "2"}}
    with pytest.raises(ValueError, match="scheduler_binary"):
        merge_cluster_options({"scheduler_binary": "x"}, {"scheduler_binary": "y"})
