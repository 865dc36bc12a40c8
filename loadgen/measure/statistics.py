"""Statistics over a Recorder: exact quantiles, utilization, fragmentation, cost. Pure functions."""
from __future__ import annotations

import numpy as np

from loadgen.measure.recorder import Recorder
from loadgen.model.quantiles import QUANTILES, exact_quantile


def latency_stats(values) -> dict:
    v = np.asarray(values, dtype=float)
    out = {"count": int(len(v))}
    if len(v) == 0:
        out.update({k: None for k in QUANTILES} | {"mean": None, "max": None})
        return out
    for name, q in QUANTILES.items():
        out[name] = round(exact_quantile(v, q), 6)
    out["mean"] = round(float(v.mean()), 6)
    out["max"] = round(float(v.max()), 6)
    return out


def scheduling_tax(rec: Recorder) -> dict:
    """The share of allocated GPU-time that bought no progress, from what happened in the run:
    GPUs held by gangs not (or no longer) fully bound, plus the work of runs cut short by an
    eviction or a node failure."""
    wasted = rec.partial_gpu_s + rec.lost_gpu_s
    return {"tax": round(wasted / rec.held_gpu_s, 6) if rec.held_gpu_s > 0 else 0.0,
            "partial_gang_gpu_hours": round(rec.partial_gpu_s / 3600.0, 6),
            "lost_work_gpu_hours": round(rec.lost_gpu_s / 3600.0, 6)}


def cost_per_million_gpu_hours(price: float, alloc_util: float, active_util: float, tax: float) -> float | None:
    """The seed's model: price / (alloc_util x active_util) / (1 - scheduling_tax) x 1e6."""
    if alloc_util <= 0 or tax >= 1.0:       # nothing allocated, or nothing it bought made progress
        return None
    return price / (alloc_util * active_util) / (1.0 - tax) * 1e6


BUDGETS = ("admission", "placement_to_ready", "rendezvous", "time_to_training")


def budget_spans(rec: Recorder) -> dict[str, np.ndarray]:
    """Per job, seconds spent in each budget (NaN where the job never got that far): admission
    (intended submit -> first admission), placement-to-ready (-> first READY: image pull and
    container start on every member's node), rendezvous (-> first TRAINING: failed attempts and
    restarts included) and their sum, time-to-training."""
    return {"admission": rec.admit - rec.submit, "placement_to_ready": rec.ready - rec.admit,
            "rendezvous": rec.training - rec.ready, "time_to_training": rec.training - rec.submit}


def class_members(rec: Recorder) -> dict[str, np.ndarray]:
    """Job class -> the indices of its jobs, sorted by class name; one pass over the jobs, so a
    trace that gives every job its own class costs no more than one with two classes."""
    names, inverse = np.unique(np.array([j.cls for j in rec.jobs], dtype=object).astype(str), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
    return {str(c): order[bounds[k]:bounds[k + 1]] for k, c in enumerate(names)}


def budgets(rec: Recorder, members: dict[str, np.ndarray] | None = None) -> dict:
    """Each budget's quantiles with counts, for all jobs and per job class."""
    spans = budget_spans(rec)
    members = class_members(rec) if members is None else members
    out: dict = {}
    for name in BUDGETS:
        v = spans[name]
        ok = ~np.isnan(v)
        out[name] = {"all": latency_stats(v[ok]),
                     **{cls: latency_stats(v[idx][ok[idx]]) for cls, idx in members.items()}}
    return out


def activity(rec: Recorder) -> dict:
    """SM activity measured over the GPU time of admitted gangs (image pull, container start,
    rendezvous and training with its stalls). Partial-gang GPU time is left out: the scheduling
    tax already charges it."""
    admitted_gpu_s = rec.held_gpu_s - rec.partial_gpu_s
    return {"active_util": round(rec.active_gpu_s / admitted_gpu_s, 6) if admitted_gpu_s > 0 else None,
            "active_gpu_hours": round(rec.active_gpu_s / 3600.0, 6),
            "admitted_gpu_hours": round(admitted_gpu_s / 3600.0, 6),
            "training_sm_active": round(float(rec.activity.training_mean), 6),
            "start_failures": int(rec.start_failures.sum()),
            "jobs_with_failed_starts": int((rec.start_failures > 0).sum()),
            "never_trained": int((~np.isnan(rec.admit) & np.isnan(rec.training)).sum())}


def summarize(rec: Recorder, total_gpus: int, end_t: float, window: tuple[float, float],
              cost: dict) -> dict:
    admitted = ~np.isnan(rec.admit)
    latency = rec.admit - rec.submit
    pending = rec.accepted & ~admitted & ~rec.failed & ~rec.rejected
    submitted = int(len(rec.jobs))
    by_class = {}
    members = class_members(rec)
    for cls, idx in members.items():
        ok = admitted[idx]
        by_class[cls] = {"jobs": int(len(idx)), "admitted": int(ok.sum()), "never_admitted": int((~ok).sum()),
                         "admission_s": latency_stats(latency[idx][ok])}
    waited = np.where(admitted, latency, end_t - rec.submit)
    lo, hi = window
    span = max(min(hi, end_t) - lo, 1e-9)
    alloc_util = rec.held_gpu_s_window / (total_gpus * span)
    in_window = [s for s in rec.samples if lo <= s.t <= hi]
    frag = float(np.mean([s.gpus_stranded for s in in_window]) / total_gpus) if in_window else 0.0
    tax = scheduling_tax(rec)
    act = activity(rec)
    cpm = (cost_per_million_gpu_hours(cost["gpu_hour_usd"], alloc_util, act["active_util"], tax["tax"])
           if act["active_util"] else None)
    out = {
        "jobs": {"submitted": submitted, "accepted": int(rec.accepted.sum()), "admitted": int(admitted.sum()),
                 "never_admitted": int((~admitted).sum()), "pending_at_end": int(pending.sum()),
                 "failed": int(rec.failed.sum()), "rejected": int(rec.rejected.sum()),
                 "finished": int((~np.isnan(rec.finish)).sum()),
                 "evicted_jobs": int((rec.evictions > 0).sum())},
        "admission_s": latency_stats(latency[admitted]),
        "admission_s_incl_pending": latency_stats(waited),
        "by_class": by_class,
        "readmission_s": latency_stats(rec.readmission),
        "alloc_util": round(float(alloc_util), 6),
        "fragmentation": round(frag, 6),
        "partial_gang_gpu_hours": round(rec.partial_gpu_s / 3600.0, 6),
        "gangs_ever_partial": int(rec.partial_ever[rec.members > 1].sum()),
        "gangs_never_completed": int((~admitted & (rec.members > 1) & rec.partial_ever).sum()),
        "gpu_hours_allocated": round(rec.held_gpu_s / 3600.0, 3),
        "scheduling_tax": tax,
        "budgets": budgets(rec, members),
        "activity": act,
        "cost_per_million_gpu_hours": None if cpm is None else round(cpm, 2),
        "failure_reasons": _count(rec.reason.values()),
    }
    sharing = gpu_sharing(in_window, cost, act["active_util"], tax["tax"])
    if sharing is not None:
        out["gpu_sharing"] = sharing
    backend_lat = rec.backend_admit - rec.submit
    if (~np.isnan(backend_lat)).any():
        out["admission_s_backend"] = latency_stats(backend_lat[~np.isnan(backend_lat)])
    sent = ~np.isnan(rec.sent)
    if sent.any():
        out["generator_lateness_s"] = latency_stats((rec.sent - rec.submit)[sent])
    return out


def gpu_sharing(samples: list, cost: dict, active_util: float | None, tax: float) -> dict | None:
    """Slice-granular figures of a fleet with node pools (None without): time averages over the
    window's samples of allocation (compute and memory share of the GPUs held), ATC '23
    fragmentation and stranded capacity, each as a ratio of the GPU capacity, and the cost per
    million GPU-hours with slices priced by compute share, by memory share and by the scenario's
    cost.slice_memory_weight w: price / (charged allocation x active util) / (1 - tax) x 1e6, the
    charged allocation being (1 - w) x compute + w x memory."""
    rows = [s.gpu_sharing for s in samples if s.gpu_sharing]
    if not rows:
        return None
    cap = np.array([r["capacity_gpus"] for r in rows], dtype=float)
    cap = np.where(cap > 0, cap, np.nan)

    def ratio(key: str) -> float:
        v = np.array([r[key] for r in rows], dtype=float) / cap
        return float(np.nanmean(v)) if np.isfinite(v).any() else 0.0

    compute, memory = ratio("allocated_compute_gpus"), ratio("allocated_memory_gpus")
    w = float(cost.get("slice_memory_weight", 0.0))

    def cpm(alloc: float) -> float | None:
        if not active_util:
            return None
        v = cost_per_million_gpu_hours(cost["gpu_hour_usd"], alloc, active_util, tax)
        return None if v is None else round(v, 2)

    charged = (1 - w) * compute + w * memory
    return {"allocation_ratio": round(compute, 6), "allocation_ratio_memory": round(memory, 6),
            "fragmentation_ratio": round(ratio("fragmented_gpus"), 6),
            "stranded_ratio": round(ratio("stranded_gpus"), 6),
            "whole_gpus_ratio": round(ratio("allocated_whole_gpus"), 6),
            "slice_memory_weight": w, "charged_allocation_ratio": round(charged, 6),
            "cost_per_million_gpu_hours": cpm(charged),
            "cost_per_million_gpu_hours_by": {"compute": cpm(compute), "memory": cpm(memory)},
            "samples": len(rows)}


def _count(values) -> dict:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
