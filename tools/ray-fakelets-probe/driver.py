"""Separate driver: ray.init against the head, STRICT_SPREAD of 2 x {GPU: 8}, report, remove."""
import json
import sys
import time

import ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

addr = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "basic"
t = time.monotonic()
ray.init(address=addr, logging_level="WARNING", log_to_driver=False)
out = {"init_s": round(time.monotonic() - t, 2)}
out["nodes"] = [{"id": n["NodeID"][:8], "name": n.get("NodeName"), "alive": n["Alive"],
                 "res": {k: v for k, v in n["Resources"].items() if k in ("GPU", "CPU")}} for n in ray.nodes()]
out["cluster_resources"] = {k: v for k, v in ray.cluster_resources().items() if k in ("GPU", "CPU")}


def one(bundles, strategy, timeout=15):
    t0 = time.monotonic()
    pg = placement_group(bundles, strategy=strategy)
    ok = pg.wait(timeout)
    dt = time.monotonic() - t0
    tab = placement_group_table(pg)
    r = {"strategy": strategy, "n": len(bundles), "ready": ok, "s": round(dt, 4), "state": tab["state"],
         "bundles_to_node": {k: v[:8] for k, v in tab["bundles_to_node_id"].items()},
         "gcs_sched_ms": tab["stats"].get("scheduling_latency_ms"),
         "gcs_e2e_ms": tab["stats"].get("end_to_end_creation_latency_ms"),
         "attempts": tab["stats"].get("scheduling_attempt")}
    return pg, r


if mode == "basic":
    pg, r = one([{"GPU": 8}] * 2, "STRICT_SPREAD")
    out["pg1"] = r
    out["avail_after_pg1"] = {k: v for k, v in ray.available_resources().items() if k == "GPU"}
    remove_placement_group(pg)
    time.sleep(1.5)
    out["avail_after_remove"] = {k: v for k, v in ray.available_resources().items() if k == "GPU"}
    # infeasible-for-now: more bundles than nodes
    n_fake = sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU"))
    pg2, r2 = one([{"GPU": 8}] * (n_fake + 1), "STRICT_SPREAD", timeout=3)
    out["pg_too_big"] = r2
    remove_placement_group(pg2)
    # serial latency: 20 x STRICT_SPREAD of min(2, n) bundles, plus 20 x 1-GPU PACK
    lat = []
    for _ in range(20):
        pg, r = one([{"GPU": 8}] * min(2, n_fake), "STRICT_SPREAD")
        lat.append((r["s"], r["gcs_sched_ms"], r["gcs_e2e_ms"], r["state"]))
        remove_placement_group(pg)
    out["serial_strict_spread"] = lat
    lat = []
    pgs = []
    for _ in range(20):
        pg, r = one([{"GPU": 1}], "PACK")
        lat.append((r["s"], r["state"]))
        pgs.append(pg)
    out["serial_pack_1gpu_held"] = lat
    for pg in pgs:
        remove_placement_group(pg)
elif mode == "hold":
    pg, r = one([{"GPU": 8}] * 2, "STRICT_SPREAD")
    out["pg"] = r
    print(json.dumps(out), flush=True)
    # wait for the orchestrator to kill a node, then watch the group
    deadline = time.monotonic() + float(sys.argv[3]) if len(sys.argv) > 3 else 40
    seen = []
    while time.monotonic() < deadline:
        tab = placement_group_table(pg)
        st = (tab["state"], tuple(sorted(v[:8] for v in tab["bundles_to_node_id"].values())))
        if not seen or seen[-1][1:] != st:
            seen.append((round(time.monotonic() - t, 2),) + st)
        time.sleep(0.25)
    out = {"pg_history": seen,
           "nodes_alive": [(n["NodeID"][:8], n["Alive"]) for n in ray.nodes()]}
print(json.dumps(out), flush=True)
ray.shutdown()
