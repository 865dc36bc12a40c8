"""Test helpers: run hand-made jobs through one simulated scheduler."""
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
