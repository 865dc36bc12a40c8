"""Fractional-GPU placement groups step by step on a Ray cluster, and where each slice landed.

    python -m fakes.ray.slicecheck ADDRESS PLAN.json [--gpu-ids] [--hold]

Run with the fleet's environment (fleet.RAY_ENV: the node IP stays 127.0.0.1), in its own process
like the driver (never under Locust's gevent). PLAN: {"wait_s": W, "steps": [...]}, each step
  {"create": NAME, "bundles": [{...}], "strategy": S, "labels": {K: V}}
                                                        create a group (every bundle only on nodes
                                                        with those labels, if given), wait up to W s
  {"remove": NAME}                                      remove it, then wait up to W s for every
                                                        group still pending to be placed
Prints one JSON line once the plan is done: {"groups": {NAME: {"pg": hex, "bundles": [...], "state":
"CREATED"|"PENDING"|"REMOVED", "nodes": [node id per bundle], "after_step": k (the step after which
it was first seen CREATED), "gpu_ids": [[ids] per bundle]}}}. With --gpu-ids (real raylets only: a
fakelet runs no worker) one task per bundle of every created group asks for the bundle's own GPU
amount inside it and returns ray.get_gpu_ids(): the GPU the raylet gave the bundle. With --hold the
groups are kept until a line (or EOF) on stdin, so that the caller can read the fakelets' books
while they stand (the GCS removes a job's groups when its driver goes).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def run(address: str, plan: dict[str, Any], gpu_ids: bool, hold: bool) -> dict[str, Any]:
    import ray
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(address=address, log_to_driver=False, logging_level="WARNING", include_dashboard=False)
    gpu_ids_of = ray.remote(max_retries=0)(_gpu_ids)
    wait_s = float(plan.get("wait_s", 5.0))
    groups: dict[str, dict[str, Any]] = {}
    pgs: dict[str, Any] = {}

    def settle(k: int, names: list[str]) -> None:
        deadline = time.monotonic() + wait_s
        for name in names:
            ready, _ = ray.wait([pgs[name].ready()], timeout=max(0.0, deadline - time.monotonic()))
            if ready and groups[name]["after_step"] is None:
                groups[name]["after_step"] = k

    for k, step in enumerate(plan["steps"]):
        if "create" in step:
            name = step["create"]
            labels = {"bundle_label_selector": [step["labels"]] * len(step["bundles"])} if step.get("labels") else {}
            pgs[name] = placement_group(step["bundles"], strategy=step.get("strategy", "PACK"), name=name, **labels)
            groups[name] = {"pg": pgs[name].id.hex(), "bundles": step["bundles"], "after_step": None}
            settle(k, [name])
        else:
            name = step["remove"]
            remove_placement_group(pgs.pop(name))
            groups[name]["removed"] = True
            settle(k, [n for n in pgs if groups[n]["after_step"] is None])

    for name, g in groups.items():
        if g.get("removed"):
            g["state"] = "REMOVED"
            continue
        row = placement_group_table(pgs[name])
        g["state"] = row["state"]
        g["nodes"] = [row["bundles_to_node_id"].get(i) for i in range(len(g["bundles"]))]
        if gpu_ids and row["state"] == "CREATED":
            in_bundle = [PlacementGroupSchedulingStrategy(pgs[name], placement_group_bundle_index=i)
                         for i in range(len(g["bundles"]))]
            g["gpu_ids"] = ray.get([gpu_ids_of.options(num_cpus=0, num_gpus=b.get("GPU", 0), scheduling_strategy=s)
                                    .remote() for b, s in zip(g["bundles"], in_bundle)], timeout=120)
    print(json.dumps({"groups": groups}, separators=(",", ":")), flush=True)
    if hold:
        sys.stdin.readline()
    for pg in pgs.values():
        remove_placement_group(pg)
    ray.shutdown()
    return {"groups": groups}


def _gpu_ids() -> list[int]:
    """Run inside a bundle (pickled by value: this module is __main__): the GPUs it was given."""
    import ray
    return sorted(int(i) for i in ray.get_gpu_ids())


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    run(argv[0], json.loads(Path(argv[1]).read_text()), "--gpu-ids" in argv[2:], "--hold" in argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
