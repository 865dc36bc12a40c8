"""The probe sequence (fakes/kube/placementprobe.py) on the real kube-scheduler 1.36.1 under DRA:
2 KWOK nodes of 8 V100s shared by fraction, 21 pods one at a time; every placement (node up to
identical nodes, and GPU) equals the twin's and the recording in tests/data/kube/dra-probe.json
(needs `make k8s-bins`; about a minute)."""
from __future__ import annotations

import json

import pytest

from fakes.kube import placementprobe as pp
from fakes.kube.cluster import leftover_processes
from loadgen.input.scenario import load
from loadgen.model.target import TargetContext
from support.paths import ROOT

pytestmark = pytest.mark.real


def test_the_real_scheduler_places_the_probe_as_recorded_and_as_the_twin_does(bins, tmp_path):
    from fakes.kube.target import RealKube
    sc = load(ROOT / "results/gpushare/kube/openb-slice.yaml", overrides={"fleet.nodes": pp.PROBE_NODES})
    ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("kube"),
                        control_plane=sc.section("control_plane"), seed=sc.seed, run_dir=tmp_path)
    target = RealKube(ctx)
    assert target.gpu_api == "dra"
    target.start()
    try:
        real = pp.real_placements(target)
    finally:
        target.stop()
    assert leftover_processes(under=tmp_path) == [], "control-plane processes left behind"
    recorded = json.loads((ROOT / "tests/data/kube/dra-probe.json").read_text())
    before = [None if r is None else pp.Placement(r["node"], tuple(r["gpus"])) for r in recorded["real"]]
    nodes = pp.PROBE_NODES
    assert pp.first_divergence(pp.SEQUENCE, real, before, nodes) is None
    assert pp.first_divergence(pp.SEQUENCE, real, pp.twin_placements(ctx), nodes) is None
    assert real[-1] is None
