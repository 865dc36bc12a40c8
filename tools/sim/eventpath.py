"""CPU per job of the shared event path alone: a stream of one-member jobs through the virtual
runner, the lifecycle (rendezvous on every start), SimTarget's timers and observed events, and the
recorder, with a scheduler that does nothing but place each job 0.37 s after it arrives
(docs/performance.md, "Fourth pass"). Independent of the fleet's size.

    PYTHONPATH=TREE python tools/sim/eventpath.py [--jobs N] [--repeat R]

Prints the CPU microseconds per job of each repeat (process time: run it beside the tree to
compare, alternating, as the whole-run measurements are).
"""
from __future__ import annotations

import argparse
import time

from fakes.sim.base import SimTarget
from loadgen.drive.lifecycle import Lifecycle
from loadgen.drive.runner import run_virtual
from loadgen.input.scenario import from_dict
from loadgen.measure.recorder import Recorder
from loadgen.model.job import Job
from loadgen.model.startup.spec import RendezvousSpec, StartupSpec
from loadgen.model.target import TargetContext


class PlaceAtOnce(SimTarget):
    """Every job on node (id mod nodes), 0.37 s after it reaches the scheduler."""
    name = "eventpath"

    def _enqueue(self, js, t):
        self._at(t + 0.37, self._place, js)

    def _place(self, t, js):
        self.state.take(js.job.id, js.job.id % self.fleet.nodes, 1, 1)
        self._bind(js, t, js.job.members)

    def _requeue(self, js, t, members):
        self._enqueue(js, t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 64, "schedulers.kube.observe_ms": 250})
    jobs = [Job(id=i, tenant="a", queue="q", cls="small", members=1, gpus_per_member=1, duration_s=30.0 + i % 7,
                submit_s=i * 1.3, min_available=1, cpus_per_member=1) for i in range(args.jobs)]
    startup = StartupSpec(rendezvous=RendezvousSpec(base_s=3.0, per_member_s=0.5))
    for _ in range(args.repeat):
        ctx = TargetContext(fleet=sc.fleet(), config=dict(sc.scheduler_config("kube")),
                            control_plane=sc.section("control_plane"), seed=1, startup=startup)
        target = Lifecycle(PlaceAtOnce(ctx), startup, ctx.fleet, seed=1)
        rec = Recorder(jobs)
        t0 = time.process_time()
        run_virtual(target, jobs, [], args.jobs * 1.3 + 100, 10.0, rec)
        took = time.process_time() - t0
        done = int((rec.finish == rec.finish).sum())
        print(f"{took / args.jobs * 1e6:.1f} us per job ({done} of {args.jobs} finished)")


if __name__ == "__main__":
    main()
