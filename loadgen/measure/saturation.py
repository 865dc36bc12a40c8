"""Which control-plane component saturated: each serial resource's busy share of the run.

Every backend reports `control_plane["busy_s"]`, the seconds each serial resource was occupied
(a scheduling loop's cycles, a client rate limiter's tokens at its full qps, slurmctld's locks,
the GCS placement-group scheduler, Kueue's admission cycles (simulated only), the apiserver's
mutating in-flight capacity, etcd refusing writes under NOSPACE; on real backends also the
machine's cores, as the share busy while the point ran). Divided by the arrival window it is the
load the arrivals put on that resource (busy seconds per second of arrivals; work left over from
the window is done in the drain and still counts, so it can exceed 1): the resource that holds
admission back reaches 1 first, while the ones behind it cannot. The load generator's own lateness
is checked first: if it fell behind, the point measures the generator, not the scheduler.
"""
from __future__ import annotations

from typing import Any

COMPONENTS = {
    "scheduling-cycle": "kube-scheduler's scheduling cycle (one pod at a time)",
    "client-qps-limiter": "the scheduler's client rate limiter (api_qps / api_burst) on binds and status writes",
    "controller-qps-limiter": "vc-controller-manager's client rate limiter (controller_qps) on pod and PodGroup writes",
    "volcano-session": "vc-scheduler's session (open, actions, close) run back to back",
    "apiserver-inflight": "the apiserver's mutating in-flight capacity (429 beyond it)",
    "etcd-quota": "etcd refusing writes under its NOSPACE alarm",
    "gcs-placement-groups": "the GCS placement-group scheduler (one group at a time)",
    "kueue-admission-cycle": "Kueue's scheduler loop (one admission cycle at a time over the heads of every "
                             "ClusterQueue)",
    "slurmctld-locks": "slurmctld's locks (submit and completion RPCs, main cycles, backfill)",
    "load-generator": "the load generator itself (it sent later than the intended submit time)",
    "host-cpu": "this machine's cores (real backends: the control plane, the fake fleet and the generator share them)",
    "partial-gangs": "gangs stuck with part of their members bound (no gang admission): they hold GPUs the rest "
                     "of the queue needs, and its pods retry against them",
}

# control-plane figures quoted next to the loads when a backend reports them
EVIDENCE = ("api_429", "nospace_seconds", "writes_refused_nospace", "scheduling_cycle_ms_mean", "api_qps",
            "session_ms_mean", "session_ms_max", "gcs_service_ms_mean", "gcs_max_groups_per_s", "lock_busy_s",
            "main_mean_cycle_us", "bf_mean_cycle_us", "rpc", "host_cpu")

SATURATED = 0.8          # a load at or above this counts as saturated
GENERATOR_LATE_S = 0.5   # generator lateness p99 beyond this: the point measures the generator
NEVER_ADMITTED = 0.01    # the SLO's share of jobs that may stay unadmitted
HELD_OVER = 1.2          # allocation this much above the offered load: GPUs held past the jobs' work


def utilization(result: dict[str, Any], window_s: float) -> dict[str, float]:
    """Busy seconds of each component per second of the arrival window."""
    busy = result.get("control_plane", {}).get("busy_s") or {}
    if window_s <= 0:
        return {k: 0.0 for k in busy}
    return {k: round(float(v) / window_s, 4) for k, v in busy.items()}


def generator_late_s(result: dict[str, Any]) -> float | None:
    late = result.get("generator_lateness_s") or result.get("generator_lateness_wall_s")
    return None if not late else late.get("p99")


def saturated(result: dict[str, Any], window_s: float, offered_load: float | None = None) -> dict[str, Any]:
    """The component that bounded this run, with the figures that say so.

    Returns {"component", "description", "utilization", "evidence"}; component is None when no
    serial resource was near full, so the tail came from elsewhere (waiting for free GPUs). Then
    the allocation against the offered load says whether jobs held their GPUs past their work
    (start-up, completion and clean-up time of each job: at high churn on a small fleet that
    overhead, not a queue in the control plane, is what runs the GPUs out)."""
    late = generator_late_s(result)
    util = utilization(result, window_s)
    ranked = sorted(util.items(), key=lambda kv: (-kv[1], kv[0]))
    evidence = {"load": dict(ranked), "window_s": window_s}
    cp = result.get("control_plane", {})
    for k in EVIDENCE:
        if cp.get(k):
            evidence[k] = cp[k]
    if late is not None:
        evidence["generator_lateness_p99_s"] = late
    if late is not None and late > GENERATOR_LATE_S:
        return {"component": "load-generator", "description": COMPONENTS["load-generator"],
                "utilization": None, "evidence": evidence}
    jobs = result.get("jobs") or {}
    stuck = result.get("gangs_never_completed") or 0
    if stuck and jobs.get("submitted") and jobs.get("never_admitted", 0) > NEVER_ADMITTED * jobs["submitted"]:
        # a deadlock, not a queue: busy components behind it (retries) are its symptom, not its cause
        evidence.update({"gangs_never_completed": stuck, "never_admitted": jobs["never_admitted"],
                         "partial_gang_gpu_hours": result.get("partial_gang_gpu_hours")})
        return {"component": "partial-gangs", "description": COMPONENTS["partial-gangs"],
                "utilization": None, "evidence": evidence}
    if ranked and ranked[0][1] >= SATURATED:
        name = ranked[0][0]
        return {"component": name, "description": COMPONENTS.get(name, name), "utilization": ranked[0][1],
                "evidence": evidence}
    alloc = result.get("alloc_util")
    evidence["alloc_util"] = alloc
    description = "no serial component near full: jobs waited for free GPUs (capacity or fragmentation)"
    if alloc is not None and offered_load:
        held = round(alloc / offered_load, 3)
        evidence["allocated_over_offered"] = held
        if held >= HELD_OVER:
            description = (f"no serial component near full: jobs waited for free GPUs, which were allocated "
                           f"{held:g}x the offered load (each job held its GPUs past its work: start-up, "
                           f"completion and clean-up time)")
    return {"component": None, "utilization": ranked[0][1] if ranked else None,
            "description": description, "evidence": evidence}
