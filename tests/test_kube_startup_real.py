"""Placement-to-ready on the real Kubernetes backend: the image-cache model's delay, applied by
KWOK's pod-ready-after Stage, observed as the pods' Ready condition (needs `make k8s-bins`)."""
from __future__ import annotations

import pytest

from fakes.kube.cluster import leftover_processes
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.startup.spec import ImageSpec, StartupSpec
from loadgen.model.target import TargetContext
from support.kube import KUBE_DEFAULTS, drive

pytestmark = pytest.mark.real

# One node pulling alone: 1 GB x 8 / min(4, 8 / 2 pulls) Gbit/s = 2 s, then 0.2 s to start.
IMAGE = ImageSpec(image_gb=1.0, node_pull_gbps=4.0, registry_gbps=8.0, container_start_s=0.2)
PULL_S, START_S = 2.0, 0.2
OVERHEAD_S = 1.5       # watch -> patch -> KWOK's delayed stage -> watch, on a busy 2-core machine


def job(i, submit, members=2, dur=3.0):
    return Job(id=i, tenant="t", queue="q", cls="large", members=members, gpus_per_member=8, duration_s=dur,
               submit_s=submit, min_available=members, cpus_per_member=1)


def target(run_dir, startup):
    from fakes.kube.target import RealKube
    return RealKube(TargetContext(fleet=Fleet(nodes=2), config=dict(KUBE_DEFAULTS), seed=1, run_dir=run_dir,
                                  control_plane={"etcd_quota_bytes": 2 * 1024**3, "compaction_interval_s": 300,
                                                 "max_requests_inflight": 400, "max_mutating_requests_inflight": 200},
                                  startup=startup))


def times(events, job_id, kind):
    return [e.t for e in events if e.job_id == job_id and e.kind is kind]


def run(run_dir, startup, jobs, until_s):
    t = target(run_dir, startup)
    try:
        t.start()
        events, _ = drive(t, jobs, until_s, stop_when=lambda ev: sum(e.kind is Kind.FINISHED for e in ev) >= len(jobs))
        return events
    finally:
        t.stop()
        assert leftover_processes(under=run_dir) == [], "control-plane processes left behind"


def test_cold_nodes_pull_then_warm_nodes_start_at_once(bins, tmp_path):
    # Job 1 takes both nodes cold: both pull together (2 s each at 4 Gbit/s), then start.
    # Job 2 arrives after job 1 is done and lands on the same, now warm, two nodes.
    events = run(tmp_path, StartupSpec(image=IMAGE), [job(1, 0.5), job(2, 6.0)], 30)
    cold = times(events, 1, Kind.READY)[0] - times(events, 1, Kind.ADMITTED)[0]
    warm = times(events, 2, Kind.READY)[0] - times(events, 2, Kind.ADMITTED)[0]
    assert PULL_S + START_S - 0.1 <= cold <= PULL_S + START_S + OVERHEAD_S, cold
    assert START_S - 0.1 <= warm <= START_S + OVERHEAD_S, warm
    assert len(times(events, 1, Kind.FINISHED)) == 1 and len(times(events, 2, Kind.FINISHED)) == 1


def test_without_an_image_pods_are_ready_as_kwok_binds_them(bins, tmp_path):
    events = run(tmp_path, StartupSpec.off(), [job(1, 0.5, dur=1.0)], 20)
    ready = times(events, 1, Kind.READY)[0] - times(events, 1, Kind.ADMITTED)[0]
    assert 0.0 <= ready <= 1.0, ready
