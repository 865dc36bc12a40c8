"""Placement quality from where gangs were put: leaves spanned per multi-node gang, the share of
large gangs held inside one leaf, and the GPU-hours of runs whose members cross leaves or spines
(all-reduce traffic over the spine). Pure: a Recorder's placements and the fleet's topology in."""
from __future__ import annotations

import numpy as np

from loadgen.measure.recorder import Recorder
from loadgen.measure.statistics import latency_stats
from loadgen.model.fleet import Fleet


def quality(rec: Recorder, fleet: Fleet) -> dict:
    leaf, spine = fleet.leaf_of, fleet.spine_of
    spans, large_one_leaf, large = [], 0, 0
    for i, nodes in rec.first_nodes.items():
        if rec.members[i] < 2:
            continue
        leaves = len(set(leaf[list(nodes)].tolist()))
        spans.append(leaves)
        if rec.jobs[i].cls == "large":
            large += 1
            large_one_leaf += leaves == 1
    cross_leaf = cross_spine = 0.0
    for i, nodes, seconds in rec.runs:
        if len(nodes) < 2:
            continue
        gpu_s = seconds * int(rec.members[i]) * rec.gpm[i].item()
        if len(set(leaf[list(nodes)].tolist())) > 1:
            cross_leaf += gpu_s
        if len(set(spine[list(nodes)].tolist())) > 1:
            cross_spine += gpu_s
    stats = latency_stats(np.array(spans, dtype=float)) if spans else None
    return {
        "gangs_placed": len(spans),
        "leaves_spanned": None if stats is None else {k: stats[k] for k in ("count", "mean", "p50", "p99", "max")},
        "large_gangs_placed": large,
        "large_in_one_leaf_share": round(large_one_leaf / large, 6) if large else None,
        "cross_leaf_gpu_hours": round(cross_leaf / 3600.0, 6),
        "cross_spine_gpu_hours": round(cross_spine / 3600.0, 6),
    }
