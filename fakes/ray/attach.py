"""RealRay on a Ray cluster gangstorm did not start (`--ray-address`): which nodes it drives, what
it refuses, and what its chaos may touch. Pure functions over a survey (fakes/ray/survey.py).

Node mapping: the nodes the GCS reports alive, not draining and declaring GPUs, sorted by node
name; scenario node i is the i-th. Refused (ClusterRefused, one line) with fewer such nodes than
the scenario's fleet or fewer GPUs on one of them; refused (ForeignWorkloads) while the cluster
holds placement groups, actors or jobs gangstorm did not create, unless --allow-foreign-workloads.

Blast radius: the run creates only placement groups named gs-<run label>-<id> (and, with a startup
section, one member actor per bundle named gs-<run label>-<id>-...) and removes all of them at
stop; evict removes and recreates its own groups; prefill pins its own groups with the node's
ray.io/node-id label. node_fail and node_recover are not run (ChaosUnsupported,
NODE_CHAOS_UNSUPPORTED says why).
"""
from __future__ import annotations

from typing import Any

from fakes.ray.survey import classify, describe, gpu_nodes
from loadgen.model.fleet import Fleet
from loadgen.model.target import ClusterRefused, Existing, ForeignWorkloads

# Measured on ray 2.60.0 against a `gangstorm cluster up ray` fleet: the GCS accepts DrainNode
# (DRAIN_NODE_REASON_PREEMPTION) and stops placing new groups on the node, but it reschedules
# nothing held there, and the raylet exits for good as soon as the node is idle; Ray has no undrain.
NODE_CHAOS_UNSUPPORTED = (
    "ray on an attached cluster (--ray-address): gangstorm does not own the raylets, so it does not fail "
    "nodes; Ray's DrainNode would only stop new placements, reschedules nothing, and makes the raylet "
    "exit for good once the node is idle (there is no undrain)")


def fleet_nodes(found: dict[str, Any], existing: Existing, fleet: Fleet) -> list[dict[str, Any]]:
    """The cluster nodes scenario nodes 0..fleet.nodes-1 map to; ClusterRefused if too few or too small."""
    where = f"ray at {existing.ray_address}"
    nodes = gpu_nodes(found)
    if len(nodes) < fleet.nodes:
        raise ClusterRefused(f"{where}: {len(nodes)} alive nodes with GPUs, the scenario needs {fleet.nodes} "
                             f"(pass --nodes {len(nodes)} or fewer)" if nodes else
                             f"{where}: no alive node declares GPUs, the scenario needs {fleet.nodes}")
    small = [n for n in nodes[:fleet.nodes] if n["gpus"] < fleet.gpus_per_node]
    if small:
        raise ClusterRefused(f"{where}: node {small[0]['name'] or small[0]['node_id'][:12]} has {small[0]['gpus']:g} "
                             f"GPUs, the scenario's nodes have {fleet.gpus_per_node} ({len(small)} such nodes)")
    return nodes[:fleet.nodes]


def members_check(nodes: list[dict[str, Any]], existing: Existing, starts_members: bool) -> None:
    """ClusterRefused when the run would start member actors (startup.image) on fakelets, where
    no worker can run (fakes/ray/fakelets/)."""
    fake = [n for n in nodes if n.get("fakelet")]
    if starts_members and fake:
        raise ClusterRefused(f"ray at {existing.ray_address}: {len(fake)} of the {len(nodes)} nodes the run uses are "
                             f"fakelets ({fake[0]['name'] or fake[0]['node_id'][:12]}, ...), where no member can "
                             f"start; drop startup.image or attach to real raylets")


def foreign_check(found: dict[str, Any], existing: Existing, label: str) -> dict[str, list[dict[str, Any]]]:
    """The survey split by owner; ForeignWorkloads when foreign ones exist and are not allowed."""
    split = classify(found, label)
    foreign = split["foreign"]
    if foreign and not existing.allow_foreign:
        raise ForeignWorkloads(f"ray at {existing.ray_address}: {_count(foreign)} gangstorm did not create "
                               f"({_few(foreign)}): pass --allow-foreign-workloads to run next to them "
                               f"(they are never touched)")
    return split


def found_lines(found: dict[str, Any], existing: Existing, nodes: list[dict[str, Any]],
                split: dict[str, list[dict[str, Any]]]) -> list[str]:
    """What preflight says it found (and what the run would leave alone)."""
    gpus = sorted({n["gpus"] for n in nodes})
    each = f"{gpus[0]:g} GPUs each" if len(gpus) == 1 else f"{gpus[0]:g}-{gpus[-1]:g} GPUs"
    alive = len(gpu_nodes(found))
    lines = [f"ray {found['ray_version']} at {existing.ray_address}: {alive} alive nodes with GPUs; the run uses "
             f"{len(nodes)} with {each} ({_names(nodes)})",
             f"{_count(split['foreign']) if split['foreign'] else '0 placement groups'} gangstorm did not create"
             + (f" ({_few(split['foreign'])}; allowed, never touched)" if split["foreign"] else "")]
    if split["gangstorm"]:
        lines.append(f"{_count(split['gangstorm'])} of other gangstorm runs "
                     f"({_few(split['gangstorm'])}; never touched)")
    lines.append("node_fail / node_recover: not run here: " + NODE_CHAOS_UNSUPPORTED.split(": ", 1)[1])
    return lines


def _count(items: list[dict[str, Any]]) -> str:
    kinds: dict[str, int] = {}
    for w in items:
        kinds[w["kind"]] = kinds.get(w["kind"], 0) + 1
    parts = [f"{n} {k}{'s' if n != 1 else ''}" for k, n in kinds.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _few(items: list[dict[str, Any]], k: int = 3) -> str:
    shown = ", ".join(describe(w) for w in items[:k])
    return shown + (f", ... {len(items) - k} more" if len(items) > k else "")


def _names(nodes: list[dict[str, Any]]) -> str:
    name = lambda n: n["name"] or n["node_id"][:12]  # noqa: E731
    return name(nodes[0]) if len(nodes) == 1 else f"{name(nodes[0])} .. {name(nodes[-1])}"
