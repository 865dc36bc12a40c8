"""Observation: one squeue per poll cycle turned into gang events, the prolog's ready reports into
READY, and whole-job restarts (scontrol requeue)."""
from __future__ import annotations

import contextlib
import queue
import subprocess
import time
from typing import Any

import numpy as np

from fakes.slurm.client import Row
from fakes.slurm.hostlist import expand
from fakes.slurm.ready import Report
from fakes.slurm.real.tracked import (
    DONE_BAD,
    DONE_OK,
    PENDING,
    RUNNING,
    SDIAG_EVERY_S,
    SDIAG_LIVE,
    Attempt,
    Tracked,
    _drained,
)
from loadgen.model.events import Event, Kind


class SlurmWatch:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    # ---- observation -----------------------------------------------------------------------
    def _watch(self) -> None:
        sdiag_at = -SDIAG_EVERY_S
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                rows = self.client.squeue()
            except subprocess.TimeoutExpired:
                continue
            if rows is not None:
                self._read_gres(rows)
            dt = time.monotonic() - t0
            if rows is not None:
                with contextlib.suppress(queue.Full):
                    self._polls.put((self.clock.now(), rows), timeout=1)
            if t0 - sdiag_at >= SDIAG_EVERY_S:
                sdiag_at, d = t0, self.client.sdiag()
                self._sdiag = {k: d.get(k) for k in SDIAG_LIVE}
            # At least as long as the call took: under load the observer never takes more than
            # half of slurmctld's job-lock time.
            self._stop.wait(max(self.poll_s - dt, dt))

    def _observe(self, now: float) -> None:
        for tr, sid, t, err, gpus in _drained(self._sbatched):
            self._inflight -= 1
            if tr is None:
                if sid is not None:
                    self.prefill[sid] = gpus
            elif sid is None:
                tr.done = True
                self._emit(t, tr.job.id, Kind.REJECTED, reason=err or "sbatch failed")
            elif self.role == "submit":     # accepted: the observing process follows it from here
                tr.slurm_id, tr.submitted_t, tr.seen = sid, t, True
                self._emit(t, tr.job.id, Kind.SUBMITTED)
            else:
                tr.slurm_id, tr.submitted_t = sid, t
                self.by_slurm[sid] = self.active[sid] = tr
        if self.ready is not None:
            self._on_reports(self._early + self.ready.drain())
        for obs, rows in _drained(self._polls):
            self._rows = rows
            self._on_rows(obs, rows)
        self._apply_gres()
        due = [n for t, ns in self.resume_at if t <= now for n in ns]
        if due:
            self.resume_at = [(t, ns) for t, ns in self.resume_at if t > now]
            due = sorted({n for n in due if self.held.get(n) == "DRAIN"})   # a node failed since stays down
            for n in due:
                del self.held[n]
            if due:
                self.client.set_nodes(due, "RESUME")

    def _on_rows(self, obs: float, rows: dict[int, Row]) -> None:
        if self.expected:
            self._adopt(obs, rows)
        for sid, tr in list(self.active.items()):
            jid, row = tr.job.id, rows.get(sid)
            if tr.done:
                del self.active[sid]
                continue
            if row is None:
                if tr.seen:        # aged out of squeue between polls (MinJobAge): it ended
                    tr.done = True
                    self._emit(obs, jid, Kind.FINISHED, tr.job.members)
                continue
            if not tr.seen:
                tr.seen = True
                self._emit(tr.submitted_t, jid, Kind.SUBMITTED, backend_t=self.clock.from_epoch(row.submit))
            state, end = row.state, self.clock.from_epoch(row.end)
            if not tr.started and (state in RUNNING or (state in DONE_OK | DONE_BAD and state != "CANCELLED"
                                                        and row.start and row.nodelist)):
                tr.started, tr.nodes = True, expand(row.nodelist)
                tr.starts.append((obs, row.start, tr.nodes))
                start = self.clock.from_epoch(row.start)
                nodes = tuple(self.index[n] for n in tr.nodes if n in self.index)
                self._emit(obs, jid, Kind.ADMITTED, tr.job.members, backend_t=start, nodes=nodes)
                self._emit(obs, jid, Kind.STARTED, tr.job.members, backend_t=start)
                tr.admitted_t, tr.ready = obs, False
                self._check_ready(tr)
            if state in PENDING and tr.started:
                tr.started, tr.nodes = False, []
                if not tr.restarting:
                    self._raise_floor(tr)
                if not tr.evicted:      # Slurm requeued it on its own (node not responding, ...)
                    self._emit(obs, jid, Kind.EVICTED, 0, state.lower())
                tr.evicted = False
                if tr.restarting:       # restart() reported the requeue already
                    tr.restarting = False
                else:
                    self._emit(obs, jid, Kind.REQUEUED, reason=state.lower())
            if state in DONE_OK:
                tr.done = True
                self._emit(obs, jid, Kind.FINISHED, tr.job.members, backend_t=end)
            elif state in DONE_BAD:
                tr.done = True
                kind = Kind.FINISHED if state == "TIMEOUT" else Kind.FAILED
                self._emit(obs, jid, kind, reason=state.lower(), backend_t=end)

    def _adopt(self, obs: float, rows: dict[int, Row]) -> None:
        """Observe role: the run's jobs other processes submitted, known by their name (gs-<label>-<id>
        of an expected job); followed from this poll on, their SUBMITTED said by the submitter."""
        for sid, row in rows.items():
            if sid in self.by_slurm or not row.name.startswith(self.prefix):
                continue
            tail = row.name[len(self.prefix):]
            job = self.expected.get(int(tail)) if tail.isdigit() else None
            if job is None or job.id in self.jobs:
                continue
            self.jobs[job.id] = tr = Tracked(job, slurm_id=sid, submitted_t=obs, seen=True)
            self.by_slurm[sid] = self.active[sid] = tr

    # ---- placement-to-ready ----------------------------------------------------------------
    def _on_reports(self, reports: list[Report]) -> None:
        self._early = []
        for r in reports:
            tr = self.by_slurm.get(r.slurm_id)
            if tr is None:
                self._early.append(r)
                continue
            a = tr.attempt
            if r.kind == "start":
                if a is None or r.restart > a.restart:
                    tr.attempt = Attempt(r.restart, r.t, r.gang_ready_t)
            elif a is not None and r.restart == a.restart and r.restart >= tr.floor:
                a.done[r.node] = r.t
            else:               # a prolog of an attempt already requeued (it runs to its end)
                self.stale_dones += 1
            self._check_ready(tr)

    @staticmethod
    def _raise_floor(tr: Tracked) -> None:
        """Once per requeue: Slurm counts it (SLURM_JOB_RESTART_COUNT), so the next attempt's
        count is above the last one the prologs reported and above the floor."""
        tr.floor = max(tr.floor + 1, tr.attempt.restart + 1 if tr.attempt else 0)

    def _check_ready(self, tr: Tracked) -> None:
        """READY once every node of the admitted attempt reported done (at once without a prolog)."""
        if not tr.started or tr.ready or tr.done or tr.evicted or tr.restarting:
            return
        if self.ready is None:
            tr.ready = True
            self._emit(tr.admitted_t, tr.job.id, Kind.READY)
            return
        a = tr.attempt
        if a is None or a.restart < tr.floor or not tr.nodes or not set(tr.nodes) <= a.done.keys():
            return
        last = max(a.done[n] for n in tr.nodes)
        # The squeue poll that saw the allocation lags it; a READY never precedes its ADMITTED.
        t = max(last, tr.admitted_t)
        tr.ready = True
        self.ready_log.append({"job": tr.job.id, "restart": a.restart, "placed": a.placed, "model": a.gang_ready,
                               "done": last, "t": t})
        self._emit(t, tr.job.id, Kind.READY)

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Requeue a running job as a whole (scontrol requeue): EVICTED and REQUEUED now, ADMITTED
        again once Slurm starts it (after its cred_expire hold). Only jobs this run submitted are
        tracked, so an attached run never requeues anyone else's. A job that ended meanwhile is left
        to the watcher."""
        self.clock.sync(now)
        self._observe(now)
        tr = self.jobs.get(job_id)
        if tr is None or not tr.slurm_id or tr.done or not tr.started or tr.evicted or tr.restarting:
            return self._take()
        if self.cluster.run(["scontrol", "requeue", str(tr.slurm_id)], check=False).returncode != 0:
            return self._take()
        self._evict([tr], now, reason)
        self._raise_floor(tr)
        tr.restarting = True
        self.restarts += 1
        self._emit(now, job_id, Kind.REQUEUED, reason=reason)
        return self._take()

    def _ready_figures(self) -> dict[str, Any]:
        if self.ready is None:
            return {"ready_source": "admission" + (" (attached: no gangstorm prolog)" if self.startup else "")}
        late = np.array([r["done"] - r["model"] for r in self.ready_log])     # prolog report vs the model
        # finished jobs whose last allocation never became READY (e.g. a job shorter than its pull)
        missing = sum(1 for tr in self.jobs.values() if tr.done and tr.starts and not tr.ready)
        spread = {"p50": round(float(np.median(late)), 4), "max": round(float(late.max()), 4)} if len(late) else {}
        return {"ready_source": "prolog", **self.ready.image_figures(), **self.ready.figures(),
                "ready_stale_dones": self.stale_dones, "ready_missing": missing,
                "prolog_done_after_model_s": {"n": len(late), **spread}}
