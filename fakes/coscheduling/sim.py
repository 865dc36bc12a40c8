"""Simulated coscheduling: the gang kube twin (fakes/kubegang/sim.py) as scheduler-plugins' plugin
behaves: when a member cannot be placed, PostFilter rejects the group's waiting pods only if more
than podGroupRejectPercentage of minMember is still unassigned (default 10 %,
scheduler-plugins v0.34.7 apis/config/v1/defaults.go; pkg/coscheduling/coscheduling.go PostFilter);
otherwise they keep their reservations in Permit until permitWaitingTimeSeconds (permit_timeout_s).
"""
from __future__ import annotations

from fakes.kubegang.sim import GangKubeTwin

REJECT_PERCENTAGE = 10      # podGroupRejectPercentage default


class SimCoscheduling(GangKubeTwin):
    name = "coscheduling"
    reject_share = REJECT_PERCENTAGE / 100
