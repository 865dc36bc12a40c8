"""Gangs as placement groups: the strategy and bundles of each, submission through the driver, and
the driver's reports turned into gang events (ready, members up, finished, lost, failed)."""
from __future__ import annotations

from typing import Any

from fakes.ray.share import bundle_labels, bundle_unit
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job

# What a submitting process says itself: its group could not be created, and the driver's troubles.
SUBMITTER_EVENTS = ("failed", "error", "eof")


class RayGroups:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

    # -- workload ----------------------------------------------------------------------------
    def strategy(self, job: Job) -> str:
        return self.cfg.get("multi_node_strategy", "STRICT_SPREAD") if job.members > 1 \
            else self.cfg.get("single_node_strategy", "PACK")

    def bundles(self, job: Job) -> list[dict[str, float]]:
        """One bundle per member: {"GPU": gpus_per_member or the share's fraction, "CPU": ...,
        the accelerator type of a job that accepts one GPU model} (fakes/ray/share.py)."""
        b = bundle_unit(job, self.ctx.fleet)
        return [dict(b) for _ in range(job.members)]

    def submit(self, job: Job, now: float) -> list[Event]:
        self.clock.sync(now)
        self.jobs[job.id] = self.pending[job.id] = job
        self.counters["submitted"] += 1
        self._count_shape(job)
        labels = bundle_labels(job, self.ctx.fleet)
        self._send(op="submit", id=job.id, bundles=self.bundles(job), strategy=self.strategy(job),
                   hold_s=job.duration_s, **({"labels": labels} if labels else {}))
        self._emit(now, job.id, Kind.SUBMITTED)
        return self._take()

    # -- what the driver and the restart threads report -------------------------------------------
    def _observe(self, now: float) -> None:
        while not self._restarted.empty():
            i, node_id, error = self._restarted.get()
            if error:
                self.errors.append(error)
            else:
                self.node_index[node_id] = i
                self.dead.discard(i)
        for m in self.driver.drain() if self.driver else ():
            if (m.get("id") or 0) < 0:
                self._prefill_report(m)
            elif self.role == "submit" and m.get("ev") not in SUBMITTER_EVENTS:
                self._forget_submitted(m)
            elif handler := getattr(self, f"_on_{m.get('ev')}", None):
                handler(m)

    def _forget_submitted(self, m: dict[str, Any]) -> None:
        """Submit role: the observing process reports the gang; this one only lets go of it."""
        if m.get("ev") == "finished":
            for held in (self.pending, self.jobs):
                held.pop(m["id"], None)

    def _on_ready(self, m: dict[str, Any]) -> None:
        gid, t = m["id"], self.clock.at(m["t"])
        job = self.jobs.get(gid)
        if job is None:
            return
        self.pending.pop(gid, None)
        self.running[gid] = [self.node_index.get(n, -1) for n in m["nodes"]]
        if gid in self.partial:         # the bundles a dead raylet held are placed again
            self._book(gid, job, self.running[gid], only=self.lost_bundles.pop(gid, set()))
        else:
            self._unbook(gid)
            self._book(gid, job, self.running[gid])
        if self.partial.pop(gid, None) is not None:
            self.counters["rescheduled"] += 1
            for entry in self.node_fail_log:
                if gid in entry["groups"]:
                    entry.setdefault("rescheduled_after_s", {})[gid] = round(t - entry["t"], 3)
            self._emit(t, gid, Kind.BOUND, job.members, "rescheduled")
        else:
            self._first_ready(gid, t, m)
        self._emit(t, gid, Kind.ADMITTED, job.members, nodes=tuple(n for n in self.running[gid] if n >= 0))
        self._emit(t, gid, Kind.STARTED, job.members)
        if not self.readiness.active:
            self._emit(t, gid, Kind.READY)
        else:
            ready_at = self.readiness.plan(gid, m["placement"], m["t"], self.running[gid], self.clock.origin)
            self._send(op="start", id=gid, placement=m["placement"], ready_at=ready_at)

    def _first_ready(self, gid: int, t: float, m: dict[str, Any]) -> None:
        """A group placed for the first time: counted, its nodes kept, the GCS's own timings."""
        self.counters["groups_ready"] += 1
        self.ready_t.append(t)
        self.placed.setdefault(gid, list(self.running[gid]))
        if m.get("sched_ms") is not None:
            self.sched_ms.append(float(m["sched_ms"]))
            self.e2e_ms.append(float(m.get("e2e_ms") or 0.0))
            self.attempts.append(int(m.get("attempts") or 0))

    def _on_members_ready(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        if gid in self.running and gid not in self.partial and self.readiness.ready(gid, m):
            self.member_pids[gid] = list(m.get("pids", []))
            self.counters["members_misplaced"] += int(m.get("misplaced", 0))
            self._emit(self.clock.at(m["t"]), gid, Kind.READY)

    def _forget_members(self, gid: int) -> None:
        self.readiness.drop(gid)
        self.member_pids.pop(gid, None)

    def _on_finished(self, m: dict[str, Any]) -> None:
        self._forget_members(m["id"])
        self._unbook(m["id"])
        self.running.pop(m["id"], None)
        self.pending.pop(m["id"], None)
        self.jobs.pop(m["id"], None)
        self.counters["finished"] += 1
        self._emit(self.clock.at(m["t"]), m["id"], Kind.FINISHED)

    def _on_lost(self, m: dict[str, Any]) -> None:
        gid, t, reason = m["id"], self.clock.at(m["t"]), m.get("reason", "")
        job = self.jobs.get(gid)
        if job is None:
            return
        self._forget_members(gid)
        nodes = self.running.pop(gid, [])
        if reason == "evicted":
            self.counters["evicted"] += 1
            self._unbook(gid)
            still = 0
        else:       # a raylet died: its bundles wait for the GCS, the others stay reserved
            lost = set(m.get("lost", []))
            ids = m.get("nodes") or []
            self._unbook(gid, {self.node_index.get(ids[i], -1) for i in lost if i < len(ids)} - {-1})
            self.lost_bundles.setdefault(gid, set()).update(lost)
            still = job.members - len(lost)
            self.partial[gid] = still
            self.running[gid] = [n for i, n in enumerate(nodes) if i not in lost]
        self._emit(t, gid, Kind.EVICTED, still, reason)
        self._emit(t, gid, Kind.REQUEUED, still, reason)
        self.pending[gid] = job

    def _on_failed(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        self._forget_members(gid)
        self._unbook(gid)
        self.lost_bundles.pop(gid, None)
        for held in (self.pending, self.running, self.partial, self.jobs):
            held.pop(gid, None)
        self.counters["failed"] += 1
        self._emit(self.clock.at(m["t"]), gid, Kind.FAILED, 0, m.get("reason", ""))

    def _on_cp(self, m: dict[str, Any]) -> None:
        self.cp = m

    def _on_node_marked_dead(self, m: dict[str, Any]) -> None:
        for entry in self.node_fail_log:
            if entry["node_id"] == m["node_id"]:
                entry["gcs_marked_dead_after_s"] = round(self.clock.at(m["t"]) - entry["t"], 3)

    def _on_error(self, m: dict[str, Any]) -> None:
        self.errors.append(m.get("error", ""))
        if len(self.errors) > 100:
            del self.errors[:50]

    def _on_eof(self, m: dict[str, Any]) -> None:
        self.errors.append(f"driver exited (rc={m['rc']})")

    def _prefill_report(self, m: dict[str, Any]) -> None:
        gid = m["id"]
        if m.get("ev") == "ready" and gid in self._prefill_wanted:
            node, gpus = self.prefill[gid] = self._prefill_wanted.pop(gid)
            if [self.node_index.get(n) for n in m.get("nodes", [])] != [node]:
                self.counters["prefill_misplaced"] += 1
            self._book(gid, None, [node], gpus=gpus)
        elif m.get("ev") in ("finished", "failed", "lost"):
            self._unbook(gid)
            self.prefill.pop(gid, None)
            self._prefill_wanted.pop(gid, None)

    # -- whole-gang requeue (loadgen/drive/lifecycle.py: a failed start under the requeue policy) -----
    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Like evict, for one gang and reported at once: its actors and group are removed and the
        group created again (ADMITTED when it is). A gang that is not running is left alone."""
        self._observe(now)          # a finish or a loss already reported wins over the restart
        job = self.jobs.get(job_id)
        if job is None or job_id not in self.running or job_id in self.partial:
            return self._take()
        self._forget_members(job_id)
        self._unbook(job_id)
        self.running.pop(job_id)
        self.pending[job_id] = job
        self.counters["restarted"] += 1
        self._send(op="requeue", id=job_id)
        self._emit(now, job_id, Kind.EVICTED, 0, reason)
        self._emit(now, job_id, Kind.REQUEUED, 0, reason)
        return self._take()
