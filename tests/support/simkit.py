"""Test helpers: run hand-made jobs through one simulated scheduler."""
import numpy as np

from loadgen.drive.runner import run_virtual
from loadgen.input.scenario import from_dict
from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext
from support.recording import Recording


def job(i, members, gpus=8, t=0.0, dur=100.0, tenant="a", cls=None):
    return Job(id=i, tenant=tenant, queue=f"q-{tenant}", cls=cls or ("large" if members >= 8 else "small"),
               members=members, gpus_per_member=gpus, duration_s=dur, submit_s=t, min_available=members,
               cpus_per_member=gpus * 12)


def sim(name, jobs, nodes=16, end=10_000.0, chaos=(), overrides=None, leaf_size=4):
    """The started target, its Recording and every event in order, after a virtual-time run to `end`."""
    over = {"fleet.nodes": nodes, "fleet.leaf_size": leaf_size, **(overrides or {})}
    sc = from_dict({}).with_overrides(**over)
    ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config(name),
                        control_plane=sc.section("control_plane"), seed=1)
    target = target_class(name, "sim")(ctx)
    rec = Recording(jobs)
    target.start()
    run_virtual(target, jobs, list(chaos), end, 10.0, rec)
    return target, rec, rec.events


def small_kube(memory_gib: int, nodes: int = 120):
    """A simulated kube on `nodes` nodes of `memory_gib` GiB, scoring 20% of them (never started)."""
    from fakes.kube.sim import SimKube
    sc = from_dict({}).with_overrides(**{"fleet.nodes": nodes, "fleet.memory_gib_per_node": memory_gib,
                                         "schedulers.kube.percentage_of_nodes_to_score": 20})
    return SimKube(TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("kube"),
                                 control_plane=sc.section("control_plane"), seed=1))


def scramble(state, rng, step: int, empty_share: float, memory_takes: int) -> None:
    """A random fleet for step `step`: every holding returned, free GPUs (`empty_share` of nodes
    none) and CPUs drawn, some nodes down (none on every third step), and on three steps of four
    `memory_takes` draws of a node that loses 1 GiB of memory."""
    n = len(state.free_gpus)
    for owner in list(state.holdings):
        state.give_back(owner)
    state.free_gpus[:] = np.where(rng.random(n) < empty_share, 0, rng.integers(0, 9, n))
    state.free_cpus[:] = rng.integers(0, 97, n)
    for v in range(n):
        state.set_up(v, step % 3 == 0 or bool(rng.random() < 0.9))
    if step % 4:
        for v in rng.integers(0, n, memory_takes).tolist():
            if state.free_mem[v] > 0:
                state.take(1000 + v, v, 0, 0)
