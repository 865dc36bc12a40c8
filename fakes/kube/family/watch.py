"""From the pod watch to gang events: GPUs held per node, BOUND / ADMITTED / STARTED / READY /
FINISHED, lost members (EVICTED + REQUEUED), placement-to-ready pulls and whole-gang restarts."""
from __future__ import annotations

import queue
from collections.abc import Iterator
from functools import partial

import numpy as np

from fakes.kube.family.gang import TIMEOUT, Gang
from fakes.kube.pods import COMPLETE_AFTER, READY_AFTER, STARTUP, PodView, go_duration
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job


class PodEvents:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

    # --- observation (caller's thread) ---------------------------------------------------------------
    def _observe(self, now: float) -> None:
        if self.watch is not None and self.watch.error is not None:
            raise RuntimeError(f"pod watch failed: {self.watch.error!r}")
        while True:
            try:
                fn, args = self._inbox.get_nowait()
            except queue.Empty:
                return
            fn(*args)

    def _on_pod(self, t: float, typ: str, pod: PodView) -> None:
        prev = self.pods.pop(pod.uid, None)
        if typ != "DELETED":
            self.pods[pod.uid] = pod
        held, holds = prev is not None and prev.holds, typ != "DELETED" and pod.holds
        if held != holds:
            changed = pod if holds else prev
            i = self.node_index.get(changed.node)
            if i is not None:
                self.used[i] += changed.gpus if holds else -changed.gpus
            if holds:
                self._placed(t, pod)
            else:
                self._released(t, prev)
        gang = self.gangs.get(pod.job)
        if gang is None and pod.job in self.expected and pod.job not in self.ended and typ != "DELETED":
            gang = self.gangs[pod.job] = self._adopt(self.expected[pod.job], t)
        if gang is None or pod.uid in gang.retired:
            return
        if typ == "DELETED" or pod.phase == "Failed":
            if pod.uid in gang.bound and pod.uid not in gang.succeeded:
                del gang.bound[pod.uid]
                self._lost(gang, t, pod, "node-failure" if self.node_index.get(pod.node) in self.down else "evicted")
            return
        if pod.node and pod.uid not in gang.bound and not pod.deleting:
            gang.bound[pod.uid] = pod.node
            self._emit(t, gang.job.id, Kind.BOUND, len(gang.bound))
            if self.startup and self.role != "submit":
                self._start_pull(gang, t, pod)
            if gang.admitted_t is None and len(gang.bound) >= gang.need:
                self._admit(gang, t)
        if pod.ready and pod.uid in gang.bound:
            gang.ready.add(pod.uid)
            self._check_ready(gang, t)
        if pod.phase == "Succeeded":
            gang.succeeded.add(pod.uid)
            if len(gang.succeeded) >= gang.job.members:
                self._end(gang, t, Kind.FINISHED)

    def _admit(self, gang: Gang, t: float) -> None:
        gang.admitted_t = t
        if gang.requeued_t is not None:
            self.readmission_s.append(t - gang.requeued_t)
            gang.requeued_t = None
        nodes = tuple(self.node_index.get(n, -1) for n in gang.bound.values())
        self._emit(t, gang.job.id, Kind.ADMITTED, len(gang.bound), nodes=tuple(n for n in nodes if n >= 0))
        self._emit(t, gang.job.id, Kind.STARTED, len(gang.bound))
        self._check_ready(gang, t)

    # --- placement-to-ready ---------------------------------------------------------------------------
    def startup_annotations(self) -> dict[str, str]:
        """What a gang member's pod carries at creation so that KWOK waits for the pull delay."""
        return {STARTUP: "image-cache"} if self.startup else {}

    def _start_pull(self, gang: Gang, t: float, pod: PodView) -> None:
        """The pod was bound at t: its node pulls the image (or has it); KWOK makes it Ready when
        the model says. With completion by KWOK the run is shortened by the same delay, so a gang
        holds its GPUs for its duration from binding, as in the simulators."""
        i = self.node_index.get(pod.node)
        if i is None:
            return
        ready = self.images.ready_at(t, [i])[i]
        ann = {READY_AFTER: go_duration(max(ready - self.clock.now(), 0.0))}
        if self.completes_by_kwok():
            ann[COMPLETE_AFTER] = go_duration(max(gang.job.duration_s - (ready - t), 0.5))
        self._call(partial(self.api.patch_namespaced_pod, pod.name, self.ns, {"metadata": {"annotations": ann}},
                           _preload_content=False, _request_timeout=(10, 60)), ok=(404,), failed="ready_patch_errors")

    def completes_by_kwok(self) -> bool:
        """Whether KWOK's pod-complete Stage ends gang pods (COMPLETE_AFTER counts from Ready)."""
        return False

    def _check_ready(self, gang: Gang, t: float) -> None:
        """READY once the admitted gang's bound pods are all Ready (KWOK's pod-ready stages)."""
        if gang.admitted_t is None or gang.ready_t is not None:
            return
        if len(gang.ready & gang.bound.keys()) >= min(gang.need, len(gang.bound)):
            gang.ready_t = t
            self._emit(t, gang.job.id, Kind.READY)

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Every pod of the admitted gang through the Eviction API: the losses come back through
        the watch and the gang is recreated (Job controller) or restarted (Volcano RestartJob)."""
        self.clock.sync(now)
        gang = self.gangs.get(job_id)
        if gang is None or gang.admitted_t is None:
            return self._take()
        for uid in list(gang.bound):
            pod = self.pods.get(uid)
            if pod is None:
                continue
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.name, "namespace": self.ns},
                    "deleteOptions": {"gracePeriodSeconds": 0}}
            self._call(partial(self.api.create_namespaced_pod_eviction, pod.name, self.ns, body,
                               _preload_content=False, _request_timeout=TIMEOUT), ok=(404,), failed="restart_errors")
        self._count("restarts_requested")
        return self._take()

    def _requeue(self, gang: Gang, t: float, members: int, reason: str) -> None:
        """The gang lost members and waits to be admitted again with `members` still bound."""
        gang.admitted_t = None
        gang.ready_t = None
        gang.ready &= gang.bound.keys()
        if gang.requeued_t is None:
            gang.requeued_t = t
        self._count("restarts")
        for kind in (Kind.EVICTED, Kind.REQUEUED):
            self._emit(t, gang.job.id, kind, members, reason)

    def _end(self, gang: Gang, t: float, kind: Kind, reason: str = "") -> None:
        """FINISHED, FAILED or REJECTED: forget the gang and delete what is left of it."""
        del self.gangs[gang.job.id]
        self.ended.add(gang.job.id)
        self._emit(t, gang.job.id, kind, reason=reason)
        self._delete(gang)

    def live_gangs(self) -> Iterator[tuple[Job, int, bool]]:
        return ((g.job, len(g.bound.keys() - g.succeeded), g.admitted_t is not None) for g in self.gangs.values())

    def used_per_node(self) -> np.ndarray:
        return self.used
