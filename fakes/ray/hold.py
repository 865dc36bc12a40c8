"""`python -m fakes.ray.hold SPEC.json READY.json`: a fakelet fleet that outlives the command
(`gangstorm cluster up ray` with schedulers.ray.nodes: fakelet, fakes/ray/launch.py).

The fleet a run starts (RayFleet, kind fakelet): the head launcher (fakes/ray/serve.py) and the
fakelet shards, each in its own session with the cluster's RAY_TMPDIR in its environment. This
process only holds them: it writes the ready (or error) message to READY.json (atomically, by
rename), then waits for SIGTERM/SIGINT/SIGHUP and stops the fleet (the shards unregister their
nodes, the head shuts down). If it is SIGKILLed, the head launcher and the shards see EOF on their
stdin and stop on their own; launch.down() kills whatever still carries the tmpdir. Never imports ray.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from fakes.ray.detached import run_detached
from fakes.ray.fleet import RayFleet
from loadgen.model.fleet import Fleet, NodePool


def fleet_fields(fleet: Fleet) -> dict[str, Any]:
    """The Fleet model as JSON (what hold.py rebuilds it from)."""
    out = {f.name: getattr(fleet, f.name) for f in fields(Fleet) if f.init}
    out["pools"] = [p.to_dict() for p in fleet.pools]
    return out


def fleet_from(spec: dict[str, Any]) -> Fleet:
    model = dict(spec)
    model["gpu_models"] = tuple(tuple(m) for m in model["gpu_models"])
    model["pools"] = tuple(NodePool.from_dict(p) for p in model.get("pools") or ())
    return Fleet(**model)


def hold(spec_path: str, ready_path: str) -> int:
    fleet = None

    def boot() -> dict[str, Any]:
        nonlocal fleet
        spec = json.loads(Path(spec_path).read_text())
        fleet = RayFleet(fleet_from(spec["fleet"]), workdir=Path(spec["workdir"]), kind="fakelet",
                         syncer=spec["syncer"], per_process=spec["per_process"], gcs_config=spec["gcs_config"],
                         ray_tmpdir=os.environ["RAY_TMPDIR"], boot_timeout_s=spec["boot_timeout_s"],
                         front=spec.get("front"))
        fleet.start()
        return {"event": "ready", "address": fleet.address, "shard_pids": fleet.fakelets.pids(),
                "head_boot_s": round(fleet.head_boot_s, 1), "boot_s": round(fleet.boot_s, 1),
                "nodes": [{"index": n["index"], "name": n["name"], "node_id": n["node_id"]} for n in fleet.nodes]}

    def shutdown() -> None:
        if fleet is not None:
            fleet.stop()
        print("ray_fakelet_hold: stopped", file=sys.stderr)
    return run_detached(ready_path, boot, shutdown)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m fakes.ray.hold SPEC.json READY.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(hold(sys.argv[1], sys.argv[2]))
