"""Chaos plan: the scenario's chaos entries expanded into timed ChaosActions, seeded.

The same plan is applied to every scheduler in a comparative run, so each sees the same
evictions, failed nodes, etcd pressure and prefill at the same (virtual) times.
"""
from __future__ import annotations

import numpy as np

from loadgen.model.target import ChaosAction


def plan(entries: list[dict], nodes: int, gpus_per_node: int, horizon_s: float, seed: int) -> list[ChaosAction]:
    rng = np.random.default_rng([seed, 0xC4A05])
    actions: list[ChaosAction] = []
    for e in entries:
        at = float(e["at_s"])
        until = float(e["until_s"]) if e["until_s"] is not None else horizon_s
        kind = e["kind"]
        if kind == "evictions":
            rate = e["rate_per_h"] / 3600.0
            t = at
            while rate > 0:
                t += rng.exponential(1.0 / rate)
                if t >= until:
                    break
                actions.append(ChaosAction(t, "evict", {"members": 1}))
        elif kind == "node_failure":
            picked = sorted(int(n) for n in rng.choice(nodes, size=min(e["nodes"], nodes), replace=False))
            actions.append(ChaosAction(at, "node_fail", {"nodes": picked}))
            if e["recover_after_s"] is not None:
                actions.append(ChaosAction(at + e["recover_after_s"], "node_recover", {"nodes": picked}))
        elif kind == "etcd_pressure":
            actions.append(ChaosAction(at, "etcd_fill", {"bytes": e["bytes"], "object_bytes": e["object_bytes"]}))
            if e["recover_after_s"] is not None:
                actions.append(ChaosAction(at + e["recover_after_s"], "etcd_recover", {}))
        elif kind == "fragmentation_prefill":
            count = int(round(e["fill_fraction"] * nodes))
            picked = sorted(int(n) for n in rng.choice(nodes, size=count, replace=False))
            g = min(e["gpus_per_node"], gpus_per_node)
            actions.append(ChaosAction(at, "prefill", {"placements": [[n, g] for n in picked],
                                                       "duration_s": e["duration_s"]}))
    actions.sort(key=lambda a: a.t)
    return actions

