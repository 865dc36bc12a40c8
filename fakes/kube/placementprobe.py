"""Where single pods land, one at a time: the real kube-scheduler under DRA and the kube twin.

A probe is a fixed sequence of one-pod jobs (whole GPUs or a `milli:N` share, with the cpus the
openb trace gives them), each created only once the one before it is bound or called
unschedulable, on a small fleet of GPU-sharing nodes. Nothing is released, so every decision is
made on a known state and compares placement, not timing. `real_placements` drives a started
RealKube (fakes/kube/target.py) and reads each claim's allocation back; `twin_placements` replays
the same sequence through SimKube (fakes/kube/sim.py).

Identical nodes are interchangeable (the first pod on an empty fleet may land on any of them, and
kube-scheduler breaks a tie at random), so two runs are compared by `layouts`: after each step,
the multiset of node contents, a node's content being its (GPU, share) holdings. That compares
which pods share a node and which GPU each took, whatever the nodes are called.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from loadgen.model.job import Job
from loadgen.model.target import TargetContext

LONG_S = 10_000_000.0        # nothing finishes during a probe


@dataclass(frozen=True)
class Step:
    share: str               # "" whole GPUs, else a slice ("milli:460")
    gpus: int
    cpus: int                # cpus_per_member as the trace gives it (openb: milli pods ask 0)

    @property
    def text(self) -> str:
        return f"{self.share or f'whole:{self.gpus}'} cpu {self.cpus}"


# openb's shapes: a one-GPU pod asks 12 cpus, a milli pod 0, an eight-GPU pod 96 (all of a node).
WHOLE1, WHOLE2, WHOLE8 = Step("", 1, 12), Step("", 2, 24), Step("", 8, 96)


def milli(n: int) -> Step:
    return Step(f"milli:{n}", 1, 0)


# On 2 nodes x 8 GPUs of 96 cpus and 1024 GiB: a draw of openb's shapes in which every step has one
# best node (up to identical nodes) under the twin's score, while a twin without the adapter's 1-cpu
# floor for milli pods, or with 1.34's BalancedAllocation, meets a tie by step 2.
SEQUENCE: tuple[Step, ...] = (
    milli(300), milli(700), WHOLE1, milli(460), milli(100), milli(100), milli(150), WHOLE1, milli(300),
    milli(250), WHOLE1, milli(700), WHOLE2, WHOLE2, milli(700), milli(100), milli(700), WHOLE1, milli(100),
    milli(700), WHOLE8,
)
PROBE_NODES = 2


def job(i: int, step: Step) -> Job:
    return Job(id=i, tenant="probe", queue="default", cls="probe", members=1, gpus_per_member=step.gpus,
               duration_s=LONG_S, submit_s=0.0, min_available=1, cpus_per_member=step.cpus, share=step.share)


@dataclass(frozen=True)
class Placement:
    node: int
    gpus: tuple[int, ...]    # the GPUs the pod's slice or whole GPUs are on, in order

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "gpus": list(self.gpus)}


def layouts(steps: tuple[Step, ...] | list[Step], placements: list[Placement | None], nodes: int) -> list[tuple]:
    """After each step: the sorted node contents, each a sorted tuple of (GPU, share) held there."""
    content: list[list[tuple[int, str]]] = [[] for _ in range(nodes)]
    out = []
    for step, p in zip(steps, placements):
        if p is not None:
            content[p.node].extend((g, step.share or "whole") for g in p.gpus)
        out.append(tuple(sorted(tuple(sorted(c)) for c in content)))
    return out


def first_divergence(steps, a: list[Placement | None], b: list[Placement | None], nodes: int) -> int | None:
    """The first step after which the two runs' layouts differ, or None."""
    for i, (x, y) in enumerate(zip(layouts(steps, a, nodes), layouts(steps, b, nodes))):
        if x != y:
            return i
    return None


# --- the twin ----------------------------------------------------------------------------------
def twin_placements(ctx: TargetContext, steps=SEQUENCE, gap_s: float = 1000.0) -> list[Placement | None]:
    """SimKube's placement of each step, one job at a time (None: it stayed pending)."""
    from fakes.kube.sim import SimKube
    sim = SimKube(ctx)
    out: list[Placement | None] = []
    for i, step in enumerate(steps):
        t = i * gap_s
        sim.submit(job(i, step), t)
        sim.advance(t + gap_s / 2)
        held = sim.state.slices.holdings.get(i, [])
        out.append(Placement(held[0][0], tuple(k for _, k, _ in held)) if held else None)
    return out


def twin_scores(ctx: TargetContext, steps, placements: list[Placement | None]) -> list[dict[int, dict[str, int]]]:
    """The twin's score parts for each step on every node (node -> plugin -> score), the fleet
    holding what the earlier steps' `placements` (the real ones, say) put there: the node score
    compared without depending on which of two tied nodes either scheduler took."""
    from fakes.kube.gpuapi import choose_api
    from fakes.kube.sim import PodState, Scorer
    from fakes.kube.traits import pod_cpus
    cfg, fleet = ctx.config, ctx.fleet
    gpus_scored = choose_api(cfg, fleet, existing=False) != "dra"
    state = PodState(fleet)
    nodes = list(range(fleet.nodes))
    out = []
    for i, (step, p) in enumerate(zip(steps, placements)):
        cpus = pod_cpus(step.cpus)
        scorer = Scorer(cfg["scoring"], cfg["gpu_weight"], state, 0 if step.share else step.gpus, cpus, gpus_scored)
        parts = scorer.plugins(state.free_gpus[nodes], state.free_cpus[nodes], state.free_mem[nodes])
        out.append({n: {k: int(v[n]) for k, v in parts.items()} for n in nodes})
        if p is not None:
            j = job(i, step)
            state.take(i, p.node, step.gpus, cpus, j.gpu_share, "first")
    return out


# --- the real scheduler --------------------------------------------------------------------------
def _pod(target, name: str) -> dict[str, Any]:
    return json.loads(target.api.read_namespaced_pod(name, target.ns, _preload_content=False).data)


def _unschedulable(body: dict[str, Any]) -> str:
    for c in (body.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return c.get("message", "") or "unschedulable"
    return ""


def _claim_of(target, pod_uid: str) -> str | None:
    for c in list(target.claim_watch.known.values()):
        if any(o.get("uid") == pod_uid for o in c["metadata"].get("ownerReferences") or []):
            if target.book.holds(c["metadata"]["uid"]):
                return c["metadata"]["uid"]
    return None


def place_real(target, i: int, step: Step, t0: float, checks: int = 1200) -> tuple[Placement | None, str]:
    """Submit step i as job i to a started RealKube under DRA; wait (checks 0.1 s apart) until its
    pod is bound and its claim booked, or the scheduler calls it unschedulable. Returns the
    placement (or None) and the pod's name."""
    target.submit(job(i, step), time.monotonic() - t0)
    name = f"j{i}-m0"
    for _ in range(checks):
        target.advance(time.monotonic() - t0)
        uid = next((u for u, p in target.pods.items() if p.name == name), None)
        body = _pod(target, name) if uid is not None else {}
        if (body.get("spec") or {}).get("nodeName"):
            for _ in range(checks):
                target.advance(time.monotonic() - t0)
                claim = _claim_of(target, uid)
                if claim is not None:
                    held = target.book.holdings[claim]
                    return Placement(held[0][0], tuple(k for _, k, _ in held)), name
                time.sleep(0.05)
            raise AssertionError(f"{name}: bound to {body['spec']['nodeName']} but its claim was never booked")
        if body and _unschedulable(body):
            return None, name
        time.sleep(0.1)
    raise AssertionError(f"{name}: neither bound nor unschedulable after {checks} checks")


def real_placements(target, steps=SEQUENCE, on_step=None) -> list[Placement | None]:
    """Every step on the real scheduler, in order; `on_step(i, placement, pod name)` after each."""
    t0 = time.monotonic()
    out = []
    for i, step in enumerate(steps):
        p, name = place_real(target, i, step, t0)
        out.append(p)
        if on_step is not None:
            on_step(i, p, name)
    return out
