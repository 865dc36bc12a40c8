"""Placement quality: leaves spanned per gang, large gangs inside one leaf, GPU-hours across leaves and
spines. Exact numbers on a hand-built recorder; then what the four simulated schedulers do with the
same bimodal workload on a leaf/spine fleet."""
from __future__ import annotations

import pytest

from loadgen.locust.lanes import event_row, row_event
from loadgen.measure.placement import quality
from loadgen.measure.recorder import Recorder
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job

FLEET = Fleet(nodes=16, leaf_size=4, leaves_per_spine=2)      # leaves 0-3, spines {0,1} {2,3}


def job(i: int, members: int, cls: str) -> Job:
    return Job(id=i, tenant="t", queue="q", cls=cls, members=members, gpus_per_member=8, duration_s=100.0,
               submit_s=0.0, min_available=members)


def test_spans_shares_and_crossing_gpu_hours_are_exact():
    jobs = [job(0, 4, "large"), job(1, 4, "large"), job(2, 2, "small"), job(3, 1, "small")]
    rec = Recorder(jobs)
    rec.record([Event(0.0, 0, Kind.ADMITTED, 4, nodes=(0, 1, 2, 3)),        # one leaf
                Event(0.0, 1, Kind.ADMITTED, 4, nodes=(4, 5, 8, 9)),        # leaves 1 and 2: crosses the spine
                Event(0.0, 2, Kind.ADMITTED, 2, nodes=(6, 7)),              # one leaf
                Event(0.0, 3, Kind.ADMITTED, 1, nodes=(10,))])
    rec.record([Event(3600.0, 0, Kind.FINISHED), Event(1800.0, 1, Kind.EVICTED, 0),
                Event(1800.0, 1, Kind.ADMITTED, 4, nodes=(4, 5, 6, 7)),     # re-admitted inside leaf 1
                Event(5400.0, 1, Kind.FINISHED)])
    rec.close(7200.0)                                                      # jobs 2 and 3 still running
    q = quality(rec, FLEET)
    assert q["gangs_placed"] == 3 and q["large_gangs_placed"] == 2
    assert q["large_in_one_leaf_share"] == 0.5                               # first admissions count
    assert q["leaves_spanned"]["max"] == 2 and q["leaves_spanned"]["mean"] == pytest.approx(4 / 3, abs=1e-6)
    # only job 1's first run crossed: 0.5 h x 4 members x 8 GPUs
    assert q["cross_leaf_gpu_hours"] == 16.0 and q["cross_spine_gpu_hours"] == 16.0


def test_a_placement_survives_the_locust_row_format():
    e = Event(1.5, 7, Kind.ADMITTED, 2, "", None, (3, 9))
    assert row_event(event_row(e)) == e
    assert row_event((1.5, 7, "admitted", 2, "", None)).nodes == ()        # rows from before placements


def test_slurm_topology_keeps_large_gangs_in_fewer_leaves_than_kube(tmp_path):
    """A finding of the models, kept as a regression guard: Slurm's topology/tree packs a gang into
    as few leaves as it can, kube-scheduler's LeastAllocated spreads it."""
    from loadgen.drive.comparative import RunOptions, run
    from loadgen.input.overrides import load_with_overrides
    sc = load_with_overrides("scenarios/fragmentation.yaml", nodes=2000)
    s = run(sc, RunOptions(schedulers=["kube", "slurm"], out_dir=tmp_path / "r", report=False))
    kube, slurm = (s["schedulers"][n]["placement"] for n in ("kube", "slurm"))
    assert kube["gangs_placed"] == slurm["gangs_placed"] == 633
    assert slurm["leaves_spanned"]["mean"] < kube["leaves_spanned"]["mean"] / 3
    assert slurm["large_in_one_leaf_share"] > 0.5 > kube["large_in_one_leaf_share"]
    assert slurm["cross_spine_gpu_hours"] < kube["cross_spine_gpu_hours"]
