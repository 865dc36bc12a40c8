"""Simulated coscheduling: the gang kube twin (fakes/kubegang/sim.py) as scheduler-plugins' plugin
behaves (scheduler-plugins v0.34.7, pkg/coscheduling/coscheduling.go; kube-scheduler v1.34.1 below it):

- When a member cannot be placed, PostFilter rejects the group's waiting pods only if more than
  podGroupRejectPercentage of minMember is still unassigned (default 10 %, apis/config/v1/defaults.go);
  otherwise they keep their reservations in Permit until permitWaitingTimeSeconds (permit_timeout_s).
- Pods the plugin rejected (in PostFilter, or at the Permit timeout) wait among the unschedulable pods
  for one of the events it registers (EventsToRegister: a Pod added, a PodGroup added or updated), not
  for resources coming free. In a run every job has a PodGroup, created with its pods and updated by
  sp-controller as they are scheduled and as they finish (before the client deletes it). So a stalled
  gang wakes at the next job submitted, bound or finished, and without any of those only at
  kube-scheduler's flush of pods unschedulable for 5 minutes (podMaxInUnschedulablePodsDuration,
  pkg/scheduler/backend/queue): a gang rejected after the last of them stays stalled, as in the real
  drain of docs/kube-gang.md. That event carries no queueing hint: the gang is retried whether or not
  anything fits it (after its backoff). (Without the wake at a finish, the twin of the fitting case
  left 7 gangs stalled at the end where the real run had admitted every one.)
"""
from __future__ import annotations

from fakes.kubegang.sim import GangKubeTwin
from fakes.sim.base import JobState

REJECT_PERCENTAGE = 10      # podGroupRejectPercentage default
UNSCHEDULABLE_FLUSH_S = 300.0   # kube-scheduler DefaultPodMaxInUnschedulablePodsDuration


class SimCoscheduling(GangKubeTwin):
    name = "coscheduling"
    reject_share = REJECT_PERCENTAGE / 100
    balance_change = False      # kube-scheduler 1.34 below it: BalancedAllocation scores the balance with the pod

    def __init__(self, ctx):
        super().__init__(ctx)
        self.stalled: dict[int, JobState] = {}

    def _revert(self, js: JobState, reserved: int) -> None:
        super()._revert(js, reserved)
        js.extra["rejected_by_plugin"] = True

    def _permit_timeout(self, t: float, js: JobState, round_: int) -> None:
        if not js.done and js.extra.get("permit_round") == round_ and "permit_since" in js.extra:
            js.extra["rejected_by_plugin"] = True
        super()._permit_timeout(t, js, round_)

    def _park(self, js: JobState, t: float) -> None:
        super()._park(js, t)
        if js.extra.pop("rejected_by_plugin", False):
            self.unschedulable.get(js.job.gpus_per_member, {}).pop(js.job.id, None)
            self.stalled[js.job.id] = js
            self._count("stalled")
            self._at(t + UNSCHEDULABLE_FLUSH_S, self._flush, js, js.extra["attempts"])

    def _wake(self, t: float) -> None:
        """A Pod or PodGroup event: every stalled gang back to the queue (after its backoff)."""
        stalled, self.stalled = self.stalled, {}
        for js in stalled.values():
            self._move_to_queue(js, t)

    def _flush(self, t: float, js: JobState, attempts: int) -> None:
        if self.stalled.get(js.job.id) is js and js.extra["attempts"] == attempts:
            del self.stalled[js.job.id]
            self._count("flushed")
            self._move_to_queue(js, t)

    def _enqueue(self, js: JobState, t: float) -> None:
        super()._enqueue(js, t)          # its pods and PodGroup were added
        self._wake(t)

    def _bind(self, js: JobState, t: float, n: int) -> None:
        super()._bind(js, t, n)          # sp-controller updates the group's status
        self._wake(t)

    def _release(self, t: float, js: JobState) -> None:
        super()._release(t, js)          # ... and a finished group's (a Permit timeout frees nodes but
        self._wake(t)                    # writes nothing: no event)
