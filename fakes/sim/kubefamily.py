"""Shared by the two Kubernetes-based simulated schedulers: every object goes through the
apiserver and etcd (fakes/sim/controlplane.py), so etcd quota pressure stalls them both.

A job's objects are created by the client (gangstorm); a create returns create_ms after it is
sent, and only then does the scheduler side see the object. The client sends objects one after
another, client_create_ms apart (a scheduler section may set it: the pace of gangstorm's own Python
client on this machine class; 0, an ideal client, when unset), so a gang's last pod is seen later
than its first. Each request's latency is drawn around its mean (control_plane.create_sigma and
write_sigma, fakes/sim/latency.py), so a gang's pods are seen when the slowest create returns.
If etcd refuses (NOSPACE) or the apiserver throttles (429) the client retries every
client_retry_s until submit_timeout_s, then gives up.
"""
from __future__ import annotations

from fakes.sim.base import JobState, SimTarget
from fakes.sim.controlplane import ControlPlane
from fakes.sim.latency import Latency, stream
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction, TargetContext


class KubeFamily(SimTarget):
    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cp = ControlPlane(ctx.control_plane, ctx.fleet.nodes)
        self.cpcfg = ctx.control_plane
        self.pod_bytes = ctx.control_plane["object_bytes"]["pod"]
        self.create_s = ctx.control_plane["create_ms"] / 1000.0
        self.write_s = ctx.control_plane["write_ms"] / 1000.0
        self.client_s = float(ctx.config.get("client_create_ms") or 0.0) / 1000.0
        draws = stream(ctx.seed)
        self.create_latency = Latency(self.create_s, float(ctx.control_plane.get("create_sigma") or 0.0), draws)
        self.write_latency = Latency(self.write_s, float(ctx.control_plane.get("write_sigma") or 0.0), draws)
        self.client_free_at = 0.0                  # when the client can send its next object

    def _objects(self, js: JobState) -> list[float]:
        """Bytes of each object the client creates for this job."""
        return [self.pod_bytes] * js.job.members

    def _owned(self, js: JobState) -> list[float]:
        """Bytes of every object that lives and dies with the job."""
        return self._objects(js)

    def _submit(self, js: JobState, now: float) -> None:
        js.extra["created"] = False
        self._create(now, js, now)

    def _create(self, t: float, js: JobState, first_try: float) -> None:
        if js.done:
            return
        result = "ok"
        objects = self._objects(js)
        done = first = js.extra.get("objects_done", 0)
        for nbytes in objects[done:]:
            result = self.cp.write(t, nbytes)
            if result != "ok":
                break
            done += 1
        js.extra["objects_done"] = done
        # the client's pace: these objects go out one after another, the first as soon as the client
        # is free, each next one client_create_ms later
        sent_first = max(t, self.client_free_at)
        sent_last = sent_first + self.client_s * max(done - first - 1, 0)
        if done > first:
            self.client_free_at = sent_last + self.client_s
        if result == "ok":
            js.extra["created"] = True
            sent = [sent_first + self.client_s * i for i in range(max(done - first, 1))]
            self._at(self.returned(sent, self.create_latency), self._created, js)
            return
        self._count(f"create_refused_{result}")
        self._maybe_auto_recover(t)
        if t - first_try >= self.cpcfg["submit_timeout_s"]:
            self._fail(js, t, "etcd-nospace" if result == "nospace" else "apiserver-429")
            return
        self._at(t + self.cpcfg["client_retry_s"], self._create, js, first_try)

    def returned(self, sent: list[float], latency: Latency, slow: float = 1.0) -> float:
        """When the slowest of requests sent at these times returns, each `slow` times its latency."""
        if latency.sigma <= 0.0:
            return max(sent) + latency.mean_s * slow
        return max(at + latency.draw() * slow for at in sent)

    def _created(self, t: float, js: JobState) -> None:
        self._emit(t, js.job.id, Kind.SUBMITTED)
        self._enqueue(js, t)

    def _api_write(self, t: float, nbytes: float, live: float | None = 0.0) -> bool:
        """An update (or a create with live=None) by one of the scheduler's components."""
        ok = self.cp.write(t, nbytes, live) == "ok"
        if not ok:
            self._maybe_auto_recover(t)
        return ok

    def _finished(self, js: JobState, t: float) -> None:
        # Completion status update then delete of every object.
        for nbytes in self._owned(js):
            self.cp.write(t, nbytes, 0.0)
            self.cp.delete(t, nbytes)

    # --- etcd chaos -----------------------------------------------------------------------
    def _chaos_etcd_fill(self, action: ChaosAction, now: float) -> None:
        n = self.cp.fill(now, action.params["bytes"], action.params["object_bytes"])
        self._count("etcd_fill_objects", n)
        self._maybe_auto_recover(now)

    def _chaos_etcd_recover(self, action: ChaosAction, now: float) -> None:
        self._at(self.cp.start_recovery(now), self._recovered)

    def _maybe_auto_recover(self, t: float) -> None:
        after = self.cpcfg["auto_recover_after_s"]
        if self.cp.alarm and after is not None and self.cp.recovering_until is None:
            start = max(t, self.cp.alarm_since + after)
            self._at(start, self._begin_recovery)

    def _begin_recovery(self, t: float) -> None:
        self._at(self.cp.start_recovery(t), self._recovered)

    def _recovered(self, t: float) -> None:
        self.cp.finish_recovery(t)
        self._on_release(t)

    def _live_control_plane(self) -> dict:
        n = self.cp.counts
        return {"etcd_db_bytes": int(self.cp.db_bytes), "etcd_nospace_alarm": self.cp.alarm,
                "writes_total": n["writes"], "writes_refused_nospace_total": n["writes_refused_nospace"],
                "api_429_total": n["api_429"]}

    def control_plane(self) -> dict:
        return {**super().control_plane(), **self.cp.figures()}
