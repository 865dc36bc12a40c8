"""The small trace the Kubernetes gang schedulers are compared on, real (tests/test_kube_gang_real.py)
and simulated (tests/test_kube_gang_sim.py): five gangs and a stream of 1-GPU jobs on 4 nodes of
8 GPUs in two leaves, two tenants with a Kueue queue each.

Built so that vanilla kube-scheduler binds part of a gang and holds it (its twin: 0.84 partial-gang
GPU-hours): a 3-node gang arrives while only 2 nodes are free and must wait whole while a later
2-node gang takes those nodes. Kueue's two queues have 16 GPUs of nominal quota each, so the 3-node
gang (tenant b, 24 GPUs) borrows 8 from a and the 4-node gang (tenant a, 32 GPUs) borrows 16 from
b; `reclaim_within_cohort: Never`, or the next 1-GPU job of the lender would preempt the borrower
and a gang that borrows would never finish on a cluster this small.
"""
from __future__ import annotations

import json
from pathlib import Path

# (id, members, GPUs per member, submit s, duration s), virtual seconds; the real run's time scale is 10.
GANGS = [(0, 2, 8, 0.0, 120.0), (1, 3, 8, 5.0, 60.0), (2, 2, 8, 10.0, 60.0), (3, 1, 4, 15.0, 30.0),
         (4, 4, 8, 20.0, 30.0)]
# Submissions go on, as on any shared cluster: a 1-GPU job every 10 s. Coscheduling needs them: pods
# its Permit or PostFilter rejected wait among the unschedulable pods until a pod is added or a
# PodGroup added or updated (its EventsToRegister), or kube-scheduler's 5-minute flush; without
# arrivals gangs 1 and 4 were never admitted in a 72 s drain (docs/kube-gang.md).
FILLERS = [(5 + k, 1, 1, 25.0 + 10 * k, 5.0) for k in range(28)]
JOBS = GANGS + FILLERS
NEW_THREE = ["kube-gang", "coscheduling", "kueue"]


def tenant(i: int) -> str:
    return "a" if i % 2 == 0 else "b"


def trace(path: Path) -> None:
    lines = [{"gangstorm_trace": 1, "generated_by": "by hand: tests/support/gangtrace.py"}]
    lines += [{"id": i, "tenant": tenant(i), "queue": f"q-{tenant(i)}", "cls": "large" if m > 1 else "small",
               "members": m, "gpus_per_member": g, "duration_s": d, "submit_s": t, "min_available": m,
               "cpus_per_member": 8} for i, m, g, t, d in JOBS]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def scenario(folder: Path) -> Path:
    trace(folder / "trace.jsonl")
    path = folder / "gangs.yaml"
    path.write_text(f"name: gangs-ci\nduration_h: 0.01\ndrain_h: 0.2\nwarmup_h: 0\nsample_every_s: 5\n"
                    f"fleet: {{nodes: 4, gpus_per_node: 8, leaf_size: 2}}\n"
                    f"workload: {{trace: {folder / 'trace.jsonl'}}}\n"
                    "schedulers:\n  kueue:\n    queues:\n      nominal_gpus: {a: 16, b: 16}\n"
                    "      reclaim_within_cohort: Never\n")
    return path
