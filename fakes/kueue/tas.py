"""Kueue's topology-aware placement (TAS, BestFit, v0.19.2) of one pod group over spine, leaf and
node, as pkg/cache/scheduler/tas_flavor_snapshot.go findTopologyAssignment does it for the
Topology gangstorm creates (levels spine, leaf, hostname). Pure: capacities in, nodes out.

- A domain's capacity is how many of the group's pods fit in it: per node the fewest of free GPUs,
  free CPUs and free memory over one pod's request (fillInCounts), summed up the tree.
- At the requested level (leaf), domains are sorted by capacity descending, then by name
  (sortedDomainsWithLeader); if the largest fits the group, the best fit is taken: the first
  domain with the smallest capacity that still fits (findBestFitDomain). If none fits, a
  `required` request fails and a `preferred` one tries the level above (spine); at the top level
  the group is spread greedily over the largest domains, the last one by best fit.
- Going down, each chosen domain's children are sorted the same way (sortedDomains: capacity
  descending, then name) and filled greedily, the last one by best fit
  (updateCountsToMinimumGeneric).
"""
from __future__ import annotations

import numpy as np


def _fill(domains: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """(domain, pods) from (domain, capacity) sorted by capacity descending then domain: whole
    domains in order until the rest fits in one, which is the best fit among those left."""
    out, left = [], count
    for i, (d, cap) in enumerate(domains):
        if cap <= 0:
            break
        if cap >= left:
            fits = [(c, j) for j, (_, c) in enumerate(domains[i:]) if c >= left]
            best = domains[i + min(fits)[1]][0]
            out.append((best, left))
            return out
        out.append((d, cap))
        left -= cap
    return []


def _fill_nodes(per_node: np.ndarray, count: int) -> list[tuple[int, int]]:
    """_fill(_sorted(every node with room), count) without building and sorting a 10,000-entry
    list per pod group: the same order (capacity descending, then node) from one lexsort, the
    same greedy prefix and the same best fit (tests/test_sim_shortcuts.py checks it)."""
    if count == 1:
        # the best fit for one pod: the lowest-numbered node among those with the least room
        room = per_node[per_node > 0]
        if not len(room):
            return []
        return [(int(np.argmax(per_node == room.min())), 1)]
    ids = np.flatnonzero(per_node > 0)
    caps = per_node[ids]
    order = np.lexsort((ids, -caps))
    ids, caps = ids[order], caps[order]
    before = count - np.concatenate(([0], np.cumsum(caps)[:-1]))     # pods left before each domain
    last = np.flatnonzero(caps >= before)
    if not len(last):
        return []
    i = int(last[0])
    left = int(before[i])
    # caps descend, so those that fit the rest are a run from i; the best fit is the first domain
    # with the smallest of their capacities
    fit = caps[i:][caps[i:] >= left]
    best = i + int(np.flatnonzero(caps[i:] == fit[-1])[0])
    return [(int(d), int(c)) for d, c in zip(ids[:i], caps[:i])] + [(int(ids[best]), left)]


def _sorted(caps: dict[int, int]) -> list[tuple[int, int]]:
    return sorted(caps.items(), key=lambda kv: (-kv[1], kv[0]))


def place(per_node: np.ndarray, leaf_of: np.ndarray, spine_of: np.ndarray, count: int,
          mode: str = "preferred") -> list[int] | None:
    """The node of each of `count` pods (sorted), or None when the group does not fit.
    per_node[i]: how many of the group's pods node i can take now; mode: preferred | required |
    none (no topology request: the hostname level, spread greedily like the top level)."""
    if int(per_node.sum()) < count:
        return None
    if mode == "none":                  # no request: straight to the nodes, no domain sums
        return sorted(node for node, n in _fill_nodes(per_node, count) for _ in range(n))
    leaves = {int(lf): int(c) for lf, c in zip(*_sums(per_node, leaf_of))}
    spine_caps = {int(s): int(c) for s, c in zip(*_sums(per_node, spine_of))}
    chosen: list[tuple[str, int, int]] | None = None       # (level, domain, pods)
    if mode in ("preferred", "required"):
        by_leaf = _sorted(leaves)
        if by_leaf[0][1] >= count:
            chosen = [("leaf", _fill(by_leaf, count)[0][0], count)]
        elif mode == "required":
            return None
    if chosen is None:
        by_spine = _sorted(spine_caps)
        if by_spine[0][1] >= count:
            chosen = [("spine", _fill(by_spine, count)[0][0], count)]
        else:
            chosen = [("spine", s, n) for s, n in _fill(by_spine, count)]
    nodes: list[int] = []
    spine_of_leaf = None
    for level, dom, n in chosen:
        if level == "spine":
            if spine_of_leaf is None:
                first = np.unique(leaf_of, return_index=True)
                spine_of_leaf = dict(zip(first[0].tolist(), spine_of[first[1]].tolist()))
            kids = _sorted({lf: c for lf, c in leaves.items() if spine_of_leaf[lf] == dom})
            leaf_parts = _fill(kids, n)
        else:
            leaf_parts = [(dom, n)]
        for leaf, k in leaf_parts:
            members = np.flatnonzero(leaf_of == leaf)
            for node, m in _fill(_sorted({int(i): int(per_node[i]) for i in members if per_node[i] > 0}), k):
                nodes += [node] * m
    return sorted(nodes)


def _sums(per_node: np.ndarray, group_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups present (ascending, as np.unique gives them) and each one's total; bincount
    instead of np.unique's sort, once per pod group."""
    groups = np.flatnonzero(np.bincount(group_of))
    return groups, np.bincount(group_of, weights=per_node)[groups].astype(np.int64)
