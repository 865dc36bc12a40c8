"""Where a Locust run's measurements meet: exact per-job data in, live rows and summary.json out.

One Collector lives in the local runner or the master. Lanes (local or on workers) hand it
batches of raw rows: sent times, target events, snapshots, chaos entries. At the end it replays
them into a loadgen Recorder over the jobs actually sent and summarizes with the same
loadgen.measure.statistics.summarize and top-level keys as `gangstorm run`, so reports and SLO tests read either.
No Locust import here: this module is plain Python over plain data.
"""
from __future__ import annotations

import copy
import heapq
import time
from collections import defaultdict
from pathlib import Path

from loadgen.drive.timescale import scaled_job
from loadgen.locust.lanes import row_event
from loadgen.locust.plan import Plan
from loadgen.measure.recorder import Recorder
from loadgen.measure.statistics import exact_quantile, latency_stats
from loadgen.model.job import Job
from loadgen.model.target import Snapshot
from loadgen.output import markdown as report
from loadgen.output.storage import RunStore
from loadgen.output.summary import header, scheduler_result

SNAP_FIELDS = ("t", "gpus_allocated", "gpus_partial", "gpus_stranded", "pending_jobs", "partial_gangs",
               "running_jobs")


class LaneLog:
    def __init__(self, name: str, jobs: dict[int, Job], k: float):
        self.name, self.jobs, self.k = name, jobs, k
        self.sent: dict[int, float] = {}
        self.lateness: list[float] = []
        self.events: list[list] = []
        self.snaps: dict[int, list[list]] = defaultdict(list)
        self.chaos: list[dict] = []
        self.finals: dict[int, dict] = {}
        # live view
        self.admit_lat: dict[str, list[float]] = defaultdict(list)
        self.admitted: set[int] = set()
        self.closed: set[int] = set()
        self.failed_by_cls: dict[str, int] = defaultdict(int)

    def ingest(self, batch: dict, shard: int) -> None:
        for jid, t, late in batch.get("sent", ()):
            self.sent[jid] = t
            self.lateness.append(late)
        for row in batch.get("events", ()):
            self.events.append(row)
            jid, kind = row[1], row[2]
            job = self.jobs.get(jid)
            if job is None:
                continue
            if kind == "admitted" and jid not in self.admitted:
                self.admitted.add(jid)
                self.admit_lat[job.cls].append(row[0] - job.submit_s)
            elif kind in ("failed", "rejected") and jid not in self.closed:
                self.closed.add(jid)
                self.failed_by_cls[job.cls] += 1
        self.snaps[shard].extend(batch.get("snaps", ()))
        self.chaos.extend(batch.get("chaos", ()))
        if "final" in batch:
            self.finals[shard] = batch["final"]

    def frozen(self) -> LaneLog:
        """A copy whose containers the live loop no longer appends to (for a summary off the loop)."""
        c = copy.copy(self)
        c.sent, c.lateness, c.events = dict(self.sent), list(self.lateness), list(self.events)
        c.snaps = defaultdict(list, {k: list(v) for k, v in self.snaps.items()})
        c.chaos, c.finals = list(self.chaos), dict(self.finals)
        return c

    def latest(self) -> dict:
        """Sum of each shard's latest snapshot (one shard: that snapshot)."""
        out = {f: 0 for f in SNAP_FIELDS[1:]}
        lasts = [rows[-1] for rows in self.snaps.values() if rows]
        for last in lasts:
            for i, f in enumerate(SNAP_FIELDS[1:], start=1):
                out[f] += last[i]
        out["control_plane"] = merge_cp([last[7] for last in lasts])
        return out

    def samples(self, every: float) -> list[Snapshot]:
        """Shard snapshots combined per sampling bucket (a shard missing from a bucket keeps its last)."""
        if len(self.snaps) <= 1:
            rows = next(iter(self.snaps.values()), [])
            return [Snapshot(*r[:7], control_plane=r[7]) for r in rows]
        buckets: dict[int, dict[int, list]] = defaultdict(dict)
        for shard, rows in self.snaps.items():
            for r in rows:
                buckets[int(r[0] // every)][shard] = r
        out, last = [], {}
        for b in sorted(buckets):
            last.update(buckets[b])
            vals = [sum(r[i] for r in last.values()) for i in range(1, 7)]
            out.append(Snapshot(max(r[0] for r in last.values()), *vals,
                                control_plane=merge_cp([r[7] for r in last.values()])))
        return out


def merge_cp(parts: list[dict]) -> dict:
    """Shards' control-plane figures: counters that differ are summed; equal values (settings) kept
    once. Tables (dicts) are joined key by key, the first shard's entry kept where several have one:
    each shard runs its own tenants' queues, so Kueue's per-queue figures are the union."""
    out: dict = {}
    for key in sorted({k for p in parts for k in p}):
        vals = [p[key] for p in parts if key in p]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        if all(isinstance(v, dict) for v in vals):
            joined: dict = {}
            for v in vals:
                for k, x in v.items():
                    joined.setdefault(k, x)
            out[key] = joined
        else:
            out[key] = sum(vals) if numeric and len(set(vals)) > 1 else vals[0]
    return out


class Collector:
    def __init__(self, plan: Plan, run_id: str, out_dir: Path, info: dict | None = None):
        self.plan, self.run_id, self.out = plan, run_id, Path(out_dir)
        st = plan.settings
        self.k = 1.0 if st.wall else st.time_scale
        lane_jobs = {j.id: (scaled_job(j, st.time_scale) if st.wall else j) for j in plan.jobs}
        self.lanes = {name: LaneLog(name, lane_jobs, self.k) for name in st.schedulers}
        self.info = info or {}
        self.t_start = time.monotonic()
        self.store = RunStore.attach(self.out)
        self.finished = False

    def ingest(self, batches: dict, shard: int = 0) -> None:
        for name, batch in batches.items():
            if name in self.lanes:
                self.lanes[name].ingest(batch, shard)

    def frozen(self) -> Collector:
        c = copy.copy(self)
        c.lanes = {name: lane.frozen() for name, lane in self.lanes.items()}
        return c

    def done(self, shards: int) -> bool:
        return all(len(lane.finals) >= shards for lane in self.lanes.values())

    # --- live view (web tab) ------------------------------------------------------------------
    def rows(self) -> list[dict]:
        out = []
        for name, lane in self.lanes.items():
            snap = lane.latest()
            cp = ", ".join(f"{k}={_short(v)}" for k, v in sorted(snap["control_plane"].items()))
            classes = sorted({j.cls for j in lane.jobs.values()})
            sent_by_cls: dict[str, int] = defaultdict(int)
            for jid in lane.sent:
                sent_by_cls[lane.jobs[jid].cls] += 1
            for cls in classes:
                lat = lane.admit_lat.get(cls, [])
                out.append({
                    "name": f"{name}/{cls}", "sent": sent_by_cls[cls], "admitted": len(lat),
                    "p50_s": _rounded_quantile(lat, 0.5), "p99_s": _rounded_quantile(lat, 0.99),
                    "p999_s": _rounded_quantile(lat, 0.999), "failed": lane.failed_by_cls.get(cls, 0),
                    "gpus_allocated": snap["gpus_allocated"], "gpus_partial": snap["gpus_partial"],
                    "partial_gangs": snap["partial_gangs"], "pending_jobs": snap["pending_jobs"],
                    "running_jobs": snap["running_jobs"], "control_plane": cp,
                    "lateness_p999_ms": (round(exact_quantile(lane.lateness, 0.999) * 1000, 3)
                                         if lane.lateness else None),
                })
        return out

    # --- summary.json -------------------------------------------------------------------------
    def summary(self, complete: bool = False, write_jobs: bool = False) -> dict:
        st = self.plan.settings
        s = header(self.run_id, st.scenario, self.plan, driver="locust",
                   locust={"time_scale": st.time_scale, "backend": st.backend, **self.info})
        s["complete"] = complete
        s["wall_s"] = round(time.monotonic() - self.t_start, 3)
        lanes = {name: self._lane_summary(lane) for name, lane in self.lanes.items()}
        s["schedulers"] = {name: out for name, (out, _) in lanes.items()}
        self.store.commit(s, [(name, st.backend, rec) for name, (_, rec) in lanes.items()] if write_jobs else [])
        self.store.write_text("summary.md", report.render(s))
        return s

    def _lane_summary(self, lane: LaneLog) -> tuple[dict, Recorder]:
        plan, st = self.plan, self.plan.settings
        jobs = [lane.jobs[jid] for jid in sorted(lane.sent)]
        rec = Recorder(jobs, st.scenario.startup().scaled(st.time_scale if st.wall else 1.0).activity)
        for jid, t in lane.sent.items():
            rec.sent_at(jid, t)
        every = max(st.scenario.data["sample_every_s"] / st.time_scale, 0.5) * lane.k
        samples = lane.samples(every)
        events = sorted(lane.events, key=lambda r: r[0])
        stream = heapq.merge(((r[0], 0, i) for i, r in enumerate(events)),
                             ((s.t, 1, i) for i, s in enumerate(samples)))
        for _, kind, i in stream:
            if kind == 0:
                rec.record([row_event(events[i])])
            else:
                rec.sample(samples[i])
        rec.chaos_log = list(lane.chaos)
        finals = list(lane.finals.values())
        end = max([f["end"] for f in finals] + [rec.t, 0.0])
        scale = st.time_scale if st.wall else 1.0
        lo, hi = (x / scale for x in plan.window)
        rec.set_window(min(lo, end * 0.5), min(hi, end))      # a run stopped early (-t) ends sooner
        rec.close(end)
        out = scheduler_result(rec, st.scenario, lane.name, st.backend, end, plan.fleet,
                               merge_cp([f.get("control_plane", {}) for f in finals]))
        out["wall_s"] = round(max([f["wall"] for f in finals] + [0.0]), 3)
        out["driver"] = "locust"
        out["generator_lateness_wall_s"] = latency_stats(lane.lateness)
        out["time_scale"] = st.time_scale
        out["latency_clock"] = ("wall seconds (real control-plane latency, not scaled)" if st.wall
                                else "virtual seconds (simulated scheduler, time-scaled)")
        return out, rec


def _rounded_quantile(values: list[float], p: float) -> float | None:
    return round(exact_quantile(values, p), 3) if values else None


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
