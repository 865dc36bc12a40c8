"""kube-scheduler with gangs: the real kube adapter plus one gang object set per job.

Shared by kube-gang (native Workload + PodGroup, fakes/kubegang/target.py) and coscheduling
(scheduler-plugins' PodGroup CRD, fakes/coscheduling/target.py). Per job the adapter creates the
gang's objects first (named g<job id>, labelled as the job's pods are) and only then its pods, so
no pod reaches the scheduler before the group it belongs to; when the gang ends they are deleted
with its pods. Everything else (pod creates and retries, the watch, admission once min_available
members are bound, chaos, cleanup) is the kube adapter's (fakes/kube/target.py).
"""
from __future__ import annotations

import json
from functools import partial
from typing import Any

from fakes.kube.cluster import get_text
from fakes.kube.family import TIMEOUT, Gang
from fakes.kube.poster import custom_path, encode
from fakes.kube.refusal import retryable
from fakes.kube.target import KubeGang, RealKube
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import RUN_LABEL, ClusterRefused


def group_name(job: Job) -> str:
    return f"g{job.id}"


class GangObjectsKube(RealKube):
    group: str = ""                 # API group and version of the gang objects
    version: str = ""
    plurals: tuple[str, ...] = ()   # the kinds created per job, in creation order
    mechanism: str = ""             # one line for the summary: what makes the gang all-or-nothing

    def __init__(self, ctx):
        super().__init__(ctx)
        self.custom = None          # kubernetes CustomObjectsApi

    # --- subclass hooks -------------------------------------------------------------------------
    def gang_objects(self, job: Job) -> list[tuple[str, dict[str, Any]]]:
        """(plural, body) of each object the job's gang needs, in creation order."""
        raise NotImplementedError

    def need(self, job: Job) -> int:
        return int(job.min_available or job.members)

    def object_meta(self, job: Job) -> dict[str, Any]:
        return {"name": group_name(job), "namespace": self.ns, "labels": self.labels(job)}

    # --- the cluster's API ----------------------------------------------------------------------
    def _client(self) -> None:
        from kubernetes import client
        self.custom = client.CustomObjectsApi(self.api.api_client)

    def _start_scheduler(self, run_dir) -> None:
        self._client()
        self._check_scheduler_installed()

    def _attach_scheduler(self) -> None:
        self._client()

    def _check_scheduler_installed(self) -> None:
        """The gang objects' API must be served (alpha group enabled, or the CRD installed)."""
        try:
            get_text(self.api.api_client, f"/apis/{self.group}/{self.version}")
        except Exception as e:
            raise ClusterRefused(f"{self.name}: the apiserver at {self.cluster.url} does not serve "
                                 f"{self.group}/{self.version} ({e}); {self.api_hint()}") from e

    def api_hint(self) -> str:
        return ""

    # --- submission -----------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        """The gang's objects on the pool, then (back on the caller's thread) its pods."""
        self.clock.sync(now)
        self.gangs.setdefault(job.id, KubeGang(job, first_try=now))
        self.pool.submit(self._create_objects, job)
        return self._take()

    def _create_objects(self, job: Job) -> None:
        try:
            for plural, body in self.gang_objects(job):
                self._retry(partial(self.poster.post, custom_path(self.group, self.version, self.ns, plural),
                                    encode(body), timeout=TIMEOUT))
        except Exception as e:
            if not self._stop.is_set():
                self._post(self._objects_refused, self.clock.now(), job.id, self._note_refusal(e))
            return
        self._post(self._create_pods, job.id)

    def _create_pods(self, job_id: int) -> None:
        gang = self.gangs.get(job_id)
        if gang is not None:
            for m in range(gang.job.members):
                self._create_pod(gang, m, f"j{job_id}-m{m}")

    def _objects_refused(self, t: float, job_id: int, reason: str) -> None:
        gang = self.gangs.get(job_id)
        if gang is not None:
            self._count("submit_errors")
            self._end(gang, t, Kind.FAILED if retryable(reason) else Kind.REJECTED, reason)

    def _delete(self, gang: Gang) -> None:
        super()._delete(gang)
        for plural in reversed(self.plurals):
            self._call(partial(self.custom.delete_namespaced_custom_object, self.group, self.version, self.ns, plural,
                               group_name(gang.job), _request_timeout=TIMEOUT), ok=(404,), failed="delete_errors")

    # --- an existing cluster: the run's gang objects are cleaned up with its pods -----------------
    def _labelled_scheduler_objects(self, selector: str) -> dict[str, int]:
        out = {}
        for plural in self.plurals:
            try:
                out[plural] = len(json.loads(self.custom.list_cluster_custom_object(
                    self.group, self.version, plural, label_selector=selector, _preload_content=False).data)["items"])
            except Exception:
                out[plural] = -1        # could not be listed: reported as unknown, never as clean
        return out

    def _remove_scheduler_objects(self) -> None:
        for plural in reversed(self.plurals):
            self.custom.delete_collection_namespaced_custom_object(
                self.group, self.version, self.ns, plural, label_selector=f"{RUN_LABEL}={self.label}",
                _preload_content=False)

    def control_plane(self) -> dict[str, Any]:
        out = super().control_plane()
        out["gang_mechanism"] = self.mechanism
        out["gang_objects"] = f"{'+'.join(self.plurals)} ({self.group}/{self.version}) per job"
        return out
