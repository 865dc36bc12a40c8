"""Simulated kube-gang: the kube twin (fakes/kube/sim.py) with gang semantics on.

The kube twin's coscheduling flag already models what both gang variants share: a gang's pods are
reserved one by one and wait in Permit, holding their nodes, until min_available are reserved;
after permit_timeout_s the group is rejected and backs off. What this twin adds is the rollback when
a member cannot be placed: the reservations already made in that attempt are given back at once
and the gang waits as unschedulable, unless the missing share is at most reject_share (then the
reserved pods keep waiting in Permit for a release).

- kube-gang (kube-scheduler v1.36.1): the pod-group cycle places the whole group against one snapshot
  and reverts every assumed pod when one does not fit (podGroupSchedulingDefaultAlgorithm's revertFn,
  pkg/scheduler/schedule_one_podgroup.go): reject_share 0. The Permit timeout is fixed at 5 minutes
  (permitTimeoutDuration, pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go).
- coscheduling (fakes/coscheduling/sim.py) rejects the waiting pods in PostFilter only when more than
  podGroupRejectPercentage (10 %) of minMember is still unassigned.

Two costs differ from vanilla kube's and are measured on the real gang schedulers (tools/gangs/
fidelity.py's fitting runs): the client creates the gang objects (a PodGroup; kube-gang also a
Workload) and only once they exist the pods (fakes/kubegang/gangobjects.py), which delays a job's pods
by gang_objects_ms (the apiserver's POST latency for those objects); and a bind takes bind_ms, the
scheduler's own Bind extension point, which under a gang scheduler's retry loop includes a long wait
in its client's rate limiter (the Permit and PostFilter retries write events through it) and so
replaces the twin's write_ms for binds; the bind still takes a token of the client's bucket.
"""
from __future__ import annotations

from fakes.kube.sim import SimKube
from fakes.sim.base import JobState
from loadgen.model.errors import UserError


class GangKubeTwin(SimKube):
    reject_share = 0.0          # revert the attempt's reservations when more than this share is missing
    gang_objects = 1            # objects the client creates before a job's pods: the PodGroup

    def __init__(self, ctx):
        super().__init__(ctx)
        self.podgroup_bytes = ctx.control_plane["object_bytes"]["podgroup"]
        self.gang_objects_s = self.cfg["gang_objects_ms"] / 1000.0
        self.bind_s = self.cfg["bind_ms"] / 1000.0

    def _objects(self, js: JobState) -> list[float]:
        return [self.podgroup_bytes] * self.gang_objects + super()._objects(js)

    def _submit(self, js: JobState, now: float) -> None:
        """The pods go out once the gang objects' creates returned."""
        js.extra["created"] = False
        self._at(now + self.gang_objects_s, self._create, js, now)

    def _send_bind(self, js: JobState, t: float, retries: int = 0) -> None:
        """The bind still takes a token of the scheduler's client limiter (kube-scheduler's
        --kube-api-qps, client-go's token bucket), so a ceiling search saturates it as on kube;
        it lands bind_ms after the token, the Bind extension point measured on the real scheduler."""
        self._at(self.limiter.acquire(t) + self.bind_s, self._bound, js, retries)

    def _park(self, js: JobState, t: float) -> None:
        reserved = js.extra.get("reserved", 0)
        need = js.job.min_available or js.job.members
        if reserved and (need - js.bound - reserved) / need > self.reject_share:
            self._revert(js, reserved)
        super()._park(js, t)

    def _revert(self, js: JobState, reserved: int) -> None:
        """Give back the last `reserved` holdings (this attempt's); bound members keep theirs. No
        release event: the nodes were never free for anyone else's cycle."""
        held = list(self.state.holdings.get(js.job.id, []))
        self.state.give_back(js.job.id)
        for node, gpus, cpus in held[:len(held) - reserved]:
            self.state.take(js.job.id, node, gpus, cpus, js.job.gpu_share)
        js.extra["reserved"] = 0
        js.extra.pop("permit_since", None)
        self._count("group_reverts")


class SimKubeGang(GangKubeTwin):
    name = "kube-gang"
    gang_objects = 2            # a Workload and its PodGroup

    def __init__(self, ctx):
        if ctx.config.get("topology", "none") != "none":
            raise UserError("schedulers.kube-gang.topology: only the real backend keeps gangs in one leaf or "
                            "spine; the twin does not model TopologyAwareWorkloadScheduling yet (use none)")
        super().__init__(ctx)
