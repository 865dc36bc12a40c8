"""sdiag's text as numbers: main and backfill cycle times (microseconds), job counts, per-RPC counts and times."""
from __future__ import annotations

from typing import Any


def parse_sdiag(text: str) -> dict[str, Any]:
    """sdiag text -> main/backfill cycle figures (microseconds) and per-RPC counts and times."""
    out: dict[str, Any] = {}
    section = "top"
    rpcs: dict[str, dict[str, int]] = {}
    keys = {
        ("top", "Server thread count"): "server_thread_count",
        ("top", "Agent queue size"): "agent_queue_size",
        ("top", "Jobs submitted"): "jobs_submitted",
        ("top", "Jobs started"): "jobs_started",
        ("top", "Jobs completed"): "jobs_completed",
        ("top", "Jobs failed"): "jobs_failed",
        ("top", "Jobs canceled"): "jobs_canceled",
        ("top", "Agent count"): "agent_count",
        ("top", "Agent thread count"): "agent_thread_count",
        ("top", "Jobs pending"): "jobs_pending",
        ("top", "Jobs running"): "jobs_running",
        ("main", "Last cycle"): "main_last_cycle_us",
        ("main", "Max cycle"): "main_max_cycle_us",
        ("main", "Total cycles"): "main_cycles",
        ("main", "Mean cycle"): "main_mean_cycle_us",
        ("main", "Mean depth cycle"): "main_mean_depth",
        ("main", "Cycles per minute"): "main_cycles_per_min",
        ("main", "Last queue length"): "main_last_queue_length",
        ("bf", "Total backfilled jobs (since last slurm start)"): "bf_backfilled_jobs",
        ("bf", "Total cycles"): "bf_cycles",
        ("bf", "Last cycle"): "bf_last_cycle_us",
        ("bf", "Max cycle"): "bf_max_cycle_us",
        ("bf", "Mean cycle"): "bf_mean_cycle_us",
        ("bf", "Last depth cycle"): "bf_last_depth",
        ("bf", "Last depth cycle (try sched)"): "bf_last_depth_try",
        ("bf", "Depth Mean"): "bf_mean_depth",
        ("bf", "Depth Mean (try depth)"): "bf_mean_depth_try",
        ("bf", "Queue length mean"): "bf_mean_queue_length",
        ("bf", "Last table size"): "bf_last_table_size",
        ("bf", "Last queue length"): "bf_last_queue_length",
    }
    rpc_section = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Main schedule statistics"):
            section = "main"
            continue
        if line.startswith("Backfilling stats"):
            section = "bf"
            continue
        if line.startswith("Remote Procedure Call statistics by message type"):
            rpc_section = True
            continue
        if line.startswith("Remote Procedure Call statistics by user") or line.startswith("Pending RPC"):
            rpc_section = False
            section = "other"
            continue
        if rpc_section and "count:" in line:
            name = line.split("(")[0].strip()
            rpcs[name] = _rpc_fields(line)
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            key = keys.get((section, k.strip()))
            if key:
                try:
                    out[key] = int(v.split()[0])
                except (ValueError, IndexError):
                    pass
    out["rpc"] = rpcs
    out["rpc_total_count"] = sum(r.get("count", 0) for r in rpcs.values())
    return out


def _rpc_fields(line: str) -> dict[str, int]:
    fields = {}
    for part in line.split(")", 1)[-1].split():
        if ":" in part:
            k, v = part.split(":", 1)
            try:
                fields[k] = int(v)
            except ValueError:
                pass
    return fields
