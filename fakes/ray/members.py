"""A gang's member processes on the real Ray backend: one actor per bundle. Driver side (imports ray).

Once a gang's placement group is CREATED and the target has computed, from its image model, when
each member's container runs (fakes/ray/readiness.py), the driver starts one `Member` actor in
every bundle (PlacementGroupSchedulingStrategy with placement_group_bundle_index). Ray starts a
fresh Python worker process for each actor on the bundle's node (worker prestart is off,
fleet.RAY_ENV): that is the real start-up cost. The actor's __init__ sleeps until the model's
ready time, so a member is up at the later of the model's time and its process start. The gang is
ready when every member's ready() call has returned.

The actor asks for nothing (num_cpus=0, no GPU): it fits any bundle ({GPU, CPU} or GPU alone), and
Ray still keeps it inside its bundle (a zero-resource task in a placement group is bound to the
bundle's own resource). Actors are named <group name>-<placement>-<bundle>, so a survey of the
cluster can tell them apart, and are killed before their group is removed.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any


class Member:
    """One member's process. Pickled by value (see Members): an attached cluster's workers need not
    have gangstorm installed."""

    def __init__(self, ready_epoch: float):
        self.entered = time.time()
        time.sleep(max(0.0, ready_epoch - time.time()))

    def ready(self) -> tuple[float, int, str]:
        import ray
        return self.entered, os.getpid(), ray.get_runtime_context().get_node_id()


class Members:
    """The live member actors of every gang, by group id. `report(gid, placement, index, t, future)`
    is called on a Ray thread when a member's ready() resolves; the driver's loop then calls done()."""

    def __init__(self, ray, prefix: str, report: Callable[..., None]):
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.ray, self.prefix, self.report = ray, prefix, report
        self._in_bundle = PlacementGroupSchedulingStrategy
        self._actor = ray.remote(num_cpus=0, max_restarts=0)(Member)
        self.gangs: dict[int, dict[str, Any]] = {}

    def start(self, gid: int, placement: int, pg, ready_at: list[float]) -> None:
        """One actor per bundle; ready_at[i] is bundle i's ready time (time.monotonic() seconds)."""
        self.kill(gid)
        to_epoch = time.time() - time.monotonic()
        created = time.monotonic()
        actors = [self._actor.options(scheduling_strategy=self._in_bundle(pg, placement_group_bundle_index=i),
                                      name=f"{self.prefix}{gid}-{placement}-{i}").remote(at + to_epoch)
                  for i, at in enumerate(ready_at)]
        self.gangs[gid] = {"placement": placement, "actors": actors, "created": created, "left": len(actors),
                           "entered": [0.0] * len(actors), "pids": [0] * len(actors), "nodes": [""] * len(actors)}
        for i, a in enumerate(actors):
            a.ready.remote().future().add_done_callback(
                lambda f, i=i: self.report(gid, placement, i, time.monotonic(), f))

    def done(self, gid: int, placement: int, i: int, fut) -> dict[str, Any] | None:
        """Member i of gid answered. The gang's figures once its last member did, else None.
        Raises RuntimeError (and forgets the gang) when a member of the current placement failed."""
        g = self.gangs.get(gid)
        if g is None or g["placement"] != placement:
            return None
        if fut.exception() is not None:
            self.kill(gid)
            raise RuntimeError(f"member {i} of {self.prefix}{gid} (placement {placement}): {fut.exception()!r}"[:300])
        entered, pid, node = fut.result()
        g["entered"][i] = entered - (time.time() - time.monotonic())
        g["pids"][i], g["nodes"][i] = pid, node
        g["left"] -= 1
        if g["left"]:
            return None
        return {"created": g["created"], "start_s": [round(e - g["created"], 4) for e in g["entered"]],
                "pids": g["pids"], "nodes": g["nodes"]}

    def kill(self, gid: int) -> None:
        g = self.gangs.pop(gid, None)
        for a in g["actors"] if g else ():
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead (its node died, its group went)
                pass

    def kill_all(self) -> None:
        for gid in list(self.gangs):
            self.kill(gid)
