"""Real kube-scheduler on KWOK nodes: a gang is N plain pods the adapter creates itself.

The cluster, the pod watch, admission, completion by KWOK and chaos are the Kubernetes family's
(fakes/kube/family/). What is kube's own: there is no coscheduling, so members bind one by
one and partial gangs hold GPUs; a refused create is retried every client_retry_s until
submit_timeout_s (both time-scaled), as the simulated kube does; a lost member is recreated while
its siblings keep their nodes, as a Job controller would; and by default the adapter ends a gang
itself (deletes its pods) duration_s after admission (`completion: adapter`; `kwok` lets KWOK's
pod-complete stage do it).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from fakes.kube import metrics as kube_metrics
from fakes.kube.cluster import merge_cluster_options
from fakes.kube.family import TIMEOUT, Gang, RealKubeFamily
from fakes.kube.gpusharing import KubeGpuSharing
from fakes.kube.pods import COMPLETE_AFTER, L_JOB, PodView, go_duration, pod_spec
from fakes.kube.poster import encode, pods_path
from fakes.kube.refusal import retryable
from fakes.kube.traits import KubeTraits, pod_cpus
from loadgen.model.events import Event, Kind
from loadgen.model.job import Job
from loadgen.model.target import Snapshot, TargetContext

SCORING = {"least_allocated": "LeastAllocated", "most_allocated": "MostAllocated"}


def scheduler_config(cfg: dict, gpu_resources: list[str] | None = None) -> dict:
    """KubeSchedulerConfiguration for the scenario's kube section; `gpu_resources` are the
    extended resources scored at gpu_weight (default nvidia.com/gpu; a MIG fleet adds its
    nvidia.com/mig-* resources)."""
    weight = int(cfg.get("gpu_weight", 3))
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                 *({"name": r, "weight": weight} for r in gpu_resources or ["nvidia.com/gpu"])]
    scoring = cfg.get("scoring", "least_allocated")
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "pluginConfig": []}
    if scoring == "balanced_allocation":
        profile["plugins"] = {"score": {"disabled": [{"name": "NodeResourcesFit"}],
                                        "enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 1}]}}
        profile["pluginConfig"].append({"name": "NodeResourcesBalancedAllocation",
                                        "args": {"resources": resources}})
    else:
        profile["pluginConfig"].append({"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": SCORING[scoring], "resources": resources}}})
    conf: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": float(cfg.get("api_qps", 50)), "burst": int(cfg.get("api_burst", 100))},
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }
    if cfg.get("percentage_of_nodes_to_score") is not None:
        conf["percentageOfNodesToScore"] = int(cfg["percentage_of_nodes_to_score"])
    return conf


@dataclass(eq=False)
class KubeGang(Gang):
    first_try: float = 0.0
    pods: dict[str, int] = field(default_factory=dict)    # live pod name -> member index
    created: set[str] = field(default_factory=set)
    replaced: int = 0                                     # pods recreated after a loss
    submitted: bool = False
    returned: list[float] = field(default_factory=list)   # when each pod's create returned
    finish_at: float | None = None                        # completion "adapter": when to end it


class RealKube(KubeGpuSharing, KubeTraits, RealKubeFamily):
    name = "kube"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self._init_sharing()
        self.completion = self.cfg.get("completion", "adapter")   # adapter | kwok
        self.retries: list[tuple[float, str, int, bytes]] = []   # heap of (due, pod, job id, encoded body)
        self.pod_sent: dict[str, float] = {}                # pod -> client sent the create (pool thread)
        self.pod_latency: list[float] = []                  # create sent -> bound seen, seconds
        self.client_pace: list[float] = []                  # per gang: seconds between its pods' creates returning

    def _adopt(self, job: Job, t: float) -> KubeGang:
        """Observe role: a gang another process created; its pods are known by their names."""
        return KubeGang(job, first_try=t, submitted=True,
                        pods={f"j{job.id}-m{m}": m for m in range(job.members)},
                        created={f"j{job.id}-m{m}" for m in range(job.members)})

    def scheduler_profile(self) -> dict:
        return scheduler_config(self.cfg, self.scoring_resources() or None)

    def cluster_options(self) -> dict[str, Any]:
        return merge_cluster_options(super().cluster_options(), self.sharing_cluster_options())

    def stop(self) -> None:
        if self.claim_watch is not None:
            self.claim_watch.stop()
        super().stop()
        self.save_slice_log(self.ctx.run_dir)

    def _scheduler_figures(self) -> dict[str, Any]:
        url = self.cluster.scheduler_metrics_url
        if not url:
            return {"scheduler": {"error": "not scraped: the existing cluster's kube-scheduler /metrics is not ours"}}
        return {"scheduler": kube_metrics.fetch(url, kube_metrics.scheduler_figures)}

    # --- submission ---------------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> list[Event]:
        """Create the gang's pods back to back on the pool; SUBMITTED once all are accepted."""
        self.clock.sync(now)
        if job.id not in self.gangs:
            self.note_shape(job)
        gang = self.gangs.setdefault(job.id, KubeGang(job, first_try=now))
        for m in range(job.members):
            self._create_pod(gang, m, f"j{job.id}-m{m}")
        return self._take()

    def _create_pod(self, gang: KubeGang, member: int, name: str) -> None:
        job = gang.job
        ann = {COMPLETE_AFTER: go_duration(job.duration_s)} if self.completion == "kwok" else {}
        ann.update(self.startup_annotations())
        gpus, claim_fields, claims = self.member_resources(job)
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "annotations": ann, "labels": {**self.labels(job), **self.gang_labels(job)}},
                "spec": pod_spec({**gpus, "cpu": str(pod_cpus(job.cpus_per_member)), "memory": "1Gi"}, claims,
                                 **self.pod_fields(), **self.gang_fields(job), **claim_fields)}
        gang.pods[name] = member
        self.pool.submit(self._create_one, job.id, name, encode(body))

    def gang_labels(self, job: Job) -> dict[str, str]:
        """Labels that put a pod in its gang (the coscheduling plugin's PodGroup label); none here."""
        return {}

    def gang_fields(self, job: Job) -> dict[str, Any]:
        """Pod spec fields that put a pod in its gang (native spec.schedulingGroup); none here."""
        return {}

    def _create_one(self, job_id: int, name: str, body: bytes) -> None:
        """One create (pool thread), its body encoded once and POSTed on a kept-alive connection
        (fakes/kube/poster.py); the outcome goes to the inbox, where retries are scheduled."""
        self.pod_sent.setdefault(name, self.clock.now())   # plain dict store: atomic under the GIL
        try:
            self.poster.post(pods_path(self.ns), body, timeout=TIMEOUT)
        except Exception as e:
            if getattr(e, "status", None) != 409:
                if not self._stop.is_set():
                    self._post(self._create_failed, self.clock.now(), job_id, name, body, self._note_refusal(e))
                return
        self._post(self._created, self.clock.now(), job_id, name)

    def _created(self, t: float, job_id: int, name: str) -> None:
        gang = self.gangs.get(job_id)
        if gang is None or name not in gang.pods:
            return
        gang.created.add(name)
        gang.returned.append(t)
        if not gang.submitted and len(gang.created) >= gang.job.members:
            gang.submitted = True
            if len(gang.returned) > 1:      # the client's pace: its pods returned one after another
                self.client_pace.append((max(gang.returned) - min(gang.returned)) / (len(gang.returned) - 1))
            self._emit(t, job_id, Kind.SUBMITTED)

    def _create_failed(self, t: float, job_id: int, name: str, body: bytes, reason: str) -> None:
        """Refused create: retried every client_retry_s until submit_timeout_s (time-scaled),
        then the job fails with the refusal as reason; a malformed request is rejected at once."""
        gang = self.gangs.get(job_id)
        if gang is None or name not in gang.pods:
            return
        scale = max(float(self.ctx.time_scale or 1.0), 1e-9)
        if retryable(reason) and t - gang.first_try < float(self.cp.get("submit_timeout_s", 900.0)) / scale:
            heapq.heappush(self.retries, (t + float(self.cp.get("client_retry_s", 10.0)) / scale, name, job_id, body))
            self._count("create_refused_" + reason)
            return
        self.pod_sent.pop(name, None)
        self._end(gang, t, Kind.FAILED if retryable(reason) or gang.submitted else Kind.REJECTED, reason)

    def _delete(self, gang: Gang) -> None:
        self._call(partial(self.api.delete_collection_namespaced_pod, self.ns, label_selector=f"{L_JOB}={gang.job.id}",
                           grace_period_seconds=0, _preload_content=False, _request_timeout=TIMEOUT),
                   failed="delete_errors")

    # --- observation --------------------------------------------------------------------------------
    def _observe(self, now: float) -> None:
        super()._observe(now)
        while self.retries and self.retries[0][0] <= now:
            _, name, job_id, body = heapq.heappop(self.retries)
            gang = self.gangs.get(job_id)
            if gang is not None and name in gang.pods:
                self.pool.submit(self._create_one, job_id, name, body)
        if self.completion == "adapter":
            for gang in [g for g in self.gangs.values() if g.finish_at is not None and now >= g.finish_at]:
                self._end(gang, now, Kind.FINISHED)

    def completes_by_kwok(self) -> bool:
        return self.completion == "kwok"

    def _admit(self, gang: KubeGang, t: float) -> None:
        super()._admit(gang, t)
        if self.completion == "adapter":
            gang.finish_at = t + gang.job.duration_s

    def _placed(self, t: float, pod: PodView) -> None:
        sent = self.pod_sent.pop(pod.name, None)
        if sent is not None:
            self.pod_latency.append(t - sent)
        if self.book is not None:
            self._book_pod(t, pod)

    def _released(self, t: float, pod: PodView) -> None:
        if self.book is not None:
            self._unbook_pod(t, pod)

    def used_per_node(self):
        return self.sharing_used(super().used_per_node()) if self.book is not None else super().used_per_node()

    def snapshot(self, now: float) -> Snapshot:
        return self.sharing_snapshot(super().snapshot(now))

    def _lost(self, gang: KubeGang, t: float, pod: PodView, reason: str) -> None:
        """As with a Job controller, the lost pod is recreated and its siblings keep their nodes
        (fakes/kube/sim.py does the same); the gang counts as admitted again once every member is
        bound again."""
        member = gang.pods.pop(pod.name, None)
        gang.created.discard(pod.name)
        gang.finish_at = None
        self._requeue(gang, t, len(gang.bound), reason)
        if member is not None:
            gang.replaced += 1
            self._create_pod(gang, member, f"j{gang.job.id}-m{member}-r{gang.replaced}")

    def control_plane(self) -> dict[str, Any]:
        out = super().control_plane()
        if self.book is not None:
            out["gpu_slices"] = self.sharing_figures()
        lat = np.array(self.pod_latency)
        if self.client_pace:
            out["client_pace_ms"] = round(float(np.median(self.client_pace)) * 1000.0, 3)
            out["client_pace_gangs"] = len(self.client_pace)
        if lat.size:
            out["client_pod_bind_p50_s"] = float(np.quantile(lat, 0.5))
            out["client_pod_bind_p99_s"] = float(np.quantile(lat, 0.99))
            out["client_pod_bind_count"] = int(lat.size)
        sched = out.get("scheduler", {})
        if lat.size and sched.get("sli_p99_s") is not None:
            # Client: create sent -> bind seen on the watch; scheduler: queue add -> bind.
            out["bind_latency_check"] = {
                "client_p50_s": out["client_pod_bind_p50_s"], "scheduler_sli_p50_s": sched["sli_p50_s"],
                "client_p99_s": out["client_pod_bind_p99_s"], "scheduler_sli_p99_s": sched["sli_p99_s"]}
        if self.cfg.get("coscheduling") and self.name == "kube":
            out["coscheduling"] = ("not implemented on the real backend: plain kube-scheduler ran "
                                   "(the kube-gang and coscheduling schedulers are)")
        if sched.get("attempt_s_total") is not None:
            # what the simulated scheduler reports as busy_s, from kube-scheduler's own metrics
            out["busy_s"] = {"scheduling-cycle": sched["attempt_s_total"],
                             "client-qps-limiter": round(sched["client_requests"]
                                                         / float(self.cfg.get("api_qps", 50)), 6)}
        return out
