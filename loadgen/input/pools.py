"""Node pools from a scenario: `fleet.pools` (fractions of the fleet with a GPU model and sharing
mode each) or `fleet.nodes_from` (an openb node list: 1,213 nodes of mixed models, shared by
fraction), validated into loadgen.model.fleet.NodePool values, and the job classes' `gpu_share`
checked against them. Errors are one line naming the file and the field (exit status 2).
"""
from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from loadgen.input import files
from loadgen.model.errors import UserError
from loadgen.model.fleet import NodePool
from loadgen.model.gpushare import GpuShare, Sharing, fits_mode, gpu_model, parse_share

# The shared traces folder (read-only, CC BY 4.0): $GANGSTORM_TRACES, else ../shared/traces from the
# working directory (the repository root of the main checkout).
TRACES_ENV = "GANGSTORM_TRACES"
OPENB_NODES = "openb_node_list_gpu_node.csv"
OPENB_PODS = "openb_pod_list_default.csv"


def shared_traces() -> Path:
    return Path(os.environ.get(TRACES_ENV) or "../shared/traces")


def trace_path(trace: str) -> str:
    """workload.trace "openb" is the shared openb default pod list; anything else is a path."""
    return str(shared_traces() / OPENB_PODS) if trace == "openb" else trace
NODE_COLUMNS = {"sn", "gpu", "model"}
MAX_NODE_LIST_BYTES = 64 * files.MIB


class PoolError(UserError):
    def __init__(self, source: str, field: str, expected: str):
        super().__init__(f"{source}: {field}: {expected}")


def node_list_path(nodes_from: str) -> Path:
    """"openb" is the shared openb node list; anything else is a path."""
    return shared_traces() / OPENB_NODES if nodes_from == "openb" else Path(nodes_from)


def openb_node_pools(path: str | Path, gpus_per_node: int) -> tuple[NodePool, ...]:
    """An openb node CSV (sn, cpu_milli, memory_mib, gpu, model) as pools: one per GPU model and
    GPU count, in order of first appearance, shared by fraction.
    Nodes without a GPU are left out (the list is of GPU nodes)."""
    src = str(path)
    try:
        text = files.read_text(path, MAX_NODE_LIST_BYTES, "node list").lstrip("\ufeff")
    except files.FileError as e:
        raise PoolError(src, "file", "no such node list" if e.expected == "no such file" else e.expected) from None
    reader = csv.DictReader(text.splitlines())
    missing = NODE_COLUMNS - set(reader.fieldnames or [])
    if missing:
        raise PoolError(src, "header", f"expected openb node columns (sn, gpu, model), missing {sorted(missing)[0]!r}")
    runs: dict[tuple[str, int], int] = {}      # (model, gpus) -> nodes, in order of first appearance
    for lineno, row in enumerate(reader, 2):
        try:
            gpus = int(row["gpu"])
        except (TypeError, ValueError):
            raise PoolError(src, f"line {lineno}: gpu", f"expected a whole number, got {row['gpu']!r}") from None
        if gpus == 0:
            continue
        if not 0 < gpus <= gpus_per_node:
            raise PoolError(src, f"line {lineno}: gpu", f"expected 1 to fleet.gpus_per_node ({gpus_per_node}), "
                            f"got {gpus}")
        model = gpu_model(row["model"] or "", f"{src}: line {lineno}: model").name
        runs[(model, gpus)] = runs.get((model, gpus), 0) + 1
    if not runs:
        raise PoolError(src, "file", "expected at least one GPU node")
    return tuple(NodePool(f"{m}-{g}gpu", n, m, Sharing("fraction"), g) for (m, g), n in runs.items())


def scenario_pools(fleet: dict, src: str) -> tuple[NodePool, ...]:
    """The scenario's node pools (validated), or () for a fleet of whole GPUs without pools."""
    if fleet["nodes_from"] is not None:
        if fleet["pools"]:
            raise PoolError(src, "fleet.nodes_from", "expected either fleet.pools or fleet.nodes_from, not both")
        return openb_node_pools(node_list_path(fleet["nodes_from"]), fleet["gpus_per_node"])
    pools = fleet["pools"]
    if not pools:
        return ()
    total = sum(p["fraction"] for p in pools.values())
    if abs(total - 1.0) > 1e-6:
        raise PoolError(src, "fleet.pools", f"expected pool fractions summing to 1, got {total:g}")
    nodes, out, given = fleet["nodes"], [], 0
    for i, (name, p) in enumerate(pools.items()):
        where = f"fleet.pools.{name}"
        model = gpu_model(p["gpu_model"], f"{src}: {where}.gpu_model")
        gpn = p["gpus_per_node"] or fleet["gpus_per_node"]
        if gpn > fleet["gpus_per_node"]:
            raise PoolError(src, f"{where}.gpus_per_node", f"expected <= fleet.gpus_per_node "
                            f"({fleet['gpus_per_node']}), got {gpn}")
        sharing = Sharing(p["sharing"], tuple(p["mig_layout"]), p["shards_per_gpu"])
        sharing.check(model, f"{src}: {where}", layout_field="mig_layout")
        n = nodes - given if i == len(pools) - 1 else int(math.floor(p["fraction"] * nodes + 0.5))
        if n < 1:
            raise PoolError(src, f"{where}.fraction", f"expected at least one of fleet.nodes ({nodes:,}) in "
                            f"the pool, got {p['fraction']:g} x {nodes:,}")
        given += n
        out.append(NodePool(name, n, model.name, sharing, gpn))
    return tuple(out)


def holders(share: GpuShare, pools: tuple[NodePool, ...]) -> list[NodePool]:
    """The pools whose GPUs can ever hold `share` (mode, model and layout allow it)."""
    out = []
    for pool in pools:
        if not fits_mode(share, pool.sharing):
            continue
        try:
            share.check(pool.model(), pool.sharing)
        except UserError:
            continue
        out.append(pool)
    return out


def check_class_shares(classes: dict, pools: tuple[NodePool, ...], src: str) -> None:
    """Every class's gpu_share parses, asks 1 GPU per member, and some pool can hold it."""
    for name, c in classes.items():
        where = f"workload.classes.{name}.gpu_share"
        share = parse_share(c["gpu_share"], f"{src}: {where}")
        if share.is_whole:
            continue
        for i, s in enumerate(c["shapes"]):
            if s["gpus"] != 1:
                raise PoolError(src, f"workload.classes.{name}.shapes[{i}].gpus",
                                f"a member with gpu_share {share.text!r} takes one slice of one GPU; expected 1, "
                                f"got {s['gpus']}")
        if not pools:
            raise PoolError(src, where, f"{share.text!r} needs a pool that shares GPUs; expected fleet.pools "
                            "with sharing mig, fraction or shards (or fleet.nodes_from)")
        if not holders(share, pools):
            raise PoolError(src, where, _why_not(share, pools))


def _why_not(share: GpuShare, pools: tuple[NodePool, ...]) -> str:
    """Why no pool holds `share`, from the first pool of the right mode (else the mode)."""
    for pool in pools:
        if fits_mode(share, pool.sharing):
            try:
                share.check(pool.model(), pool.sharing, f"pool {pool.name}")
            except UserError as e:
                return str(e)
    return f"no pool can hold {share.text!r}: expected a pool with sharing " \
           f"{ {'milli': 'fraction', 'mig': 'mig', 'shards': 'shards'}[share.kind] }"
