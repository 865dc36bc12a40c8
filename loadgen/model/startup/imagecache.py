"""Placement-to-ready: the training image on each node, pulled from one shared registry. Pure.

A node holds the image (warm) or not (cold). A member placed on a cold node pulls it; members
placed on a node whose pull is in flight wait for that pull (containerd shares layers). Pulls
started together share the registry's egress with every pull in flight: each gets
min(node_pull_gbps, registry_gbps / pulls in flight) for its whole length (the share is fixed when
the pull starts, so the ready time is known at placement, which is what a KWOK Stage delay, a
Slurm prolog or a Ray actor's start needs). The container starts `container_start_s` after the
image lands. A pre-pull DaemonSet starts a pull on every cold node at t=0, through the same
registry, so the first gangs can find their nodes still pulling.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable
from math import isnan

import numpy as np

from loadgen.model.startup.spec import ImageSpec

GBIT = 8.0          # gigabits per gigabyte


class ImageCache:
    def __init__(self, spec: ImageSpec, nodes: int, seed: int):
        self.spec = spec
        self.warm = np.zeros(nodes, dtype=bool)
        self.landing = np.full(nodes, np.nan)      # an in-flight pull lands at this time
        self._flows: list[float] = []              # landing times of pulls in flight (registry share)
        self.pulls = 0
        self.gb_pulled = 0.0
        if not spec.pulls:
            self.warm[:] = True
            self._cold: set[int] = set()
            return
        k = int(round(spec.warm_fraction * nodes))
        if k:
            self.warm[np.random.default_rng([seed, 0x1A6E]).choice(nodes, size=k, replace=False)] = True
        # the nodes not warm yet, as a set: a placement looks each of its nodes up (a node never cools)
        self._cold = set(np.flatnonzero(~self.warm).tolist())
        if spec.prepull:
            self._pull(0.0, np.flatnonzero(~self.warm).tolist())

    def _in_flight(self, t: float) -> int:
        while self._flows and self._flows[0] <= t:
            heapq.heappop(self._flows)
        return len(self._flows)

    def _pull(self, t: float, nodes: list[int]) -> None:
        if not nodes:
            return
        share = self.spec.registry_gbps / (self._in_flight(t) + len(nodes))
        done = t + self.spec.image_gb * GBIT / min(self.spec.node_pull_gbps, share)
        for n in nodes:
            self.landing[n] = done
            heapq.heappush(self._flows, done)
        self.pulls += len(nodes)
        self.gb_pulled += self.spec.image_gb * len(nodes)

    def _settle(self, t: float, nodes: Iterable[int]) -> None:
        cold = self._cold
        for n in nodes:
            if n in cold and self.landing[n] <= t:
                self.warm[n] = True
                self.landing[n] = np.nan
                cold.discard(n)

    def ready_at(self, t: float, nodes: Iterable[int]) -> dict[int, float]:
        """Members placed at t on `nodes` (repeats allowed): when each node's container runs."""
        uniq = sorted(set(map(int, nodes)))
        cold = self._cold
        self._settle(t, uniq)
        self._pull(t, [n for n in uniq if n in cold and isnan(self.landing[n])])
        start = self.spec.container_start_s
        return {n: float(self.landing[n]) + start if n in cold else t + start for n in uniq}

    def gang_ready_at(self, t: float, nodes: Iterable[int]) -> float:
        """The last member's container runs at this time (t itself for a gang with no nodes)."""
        nodes = tuple(nodes)
        if self._cold.isdisjoint(nodes):   # every node of the gang holds the image: nothing to settle or pull
            return t + self.spec.container_start_s if nodes else t
        return max(self.ready_at(t, nodes).values(), default=t)

    def figures(self, t: float | None = None) -> dict[str, float]:
        """Pulls so far; nodes_warm counts the pulls landed by t (by the last placement without t)."""
        if t is not None:
            self._settle(t, np.flatnonzero(~np.isnan(self.landing)).tolist())
        return {"image_pulls": self.pulls, "image_gb_pulled": round(self.gb_pulled, 3),
                "nodes_warm": int(self.warm.sum())}
