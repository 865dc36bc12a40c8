"""The order in which real Slurm's read-back slices are booked in the slice ledger
(fakes/slurm/real/slices.py), on constructed squeue polls and `scontrol -d show job` reads fed
through the target's own queues: no Slurm runs."""
from __future__ import annotations

from fakes.slurm.client import Row
from fakes.slurm.real.tracked import Tracked
from fakes.slurm.target import RealSlurm
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.job import Job
from loadgen.model.target import TargetContext
from support.slurm import FAST

A, B, C = 11, 12, 13            # Slurm ids (and job ids) of slices of one GPU of 1000 milli


def target(tmp_path, milli: dict[int, int] | None = None) -> RealSlurm:
    """One node of one fraction-shared GPU; jobs A and B of 600 milli (they cannot share it), or `milli`."""
    fleet = Fleet(nodes=1, gpus_per_node=1, cpus_per_node=16, leaf_size=8,
                  pools=(NodePool("frac", 1, "a10", Sharing("fraction"), 1),))
    t = RealSlurm(TargetContext(fleet=fleet, config=dict(FAST), control_plane={}, seed=1, run_dir=tmp_path))
    for sid, amount in (milli or {A: 600, B: 600}).items():
        job = Job(id=sid, tenant="t", queue="default", cls="slice", members=1, gpus_per_member=1, duration_s=5,
                  submit_s=0.0, min_available=1, cpus_per_member=1, share=f"milli:{amount}")
        t.jobs[job.id] = t.by_slurm[sid] = t.active[sid] = Tracked(job, slurm_id=sid, seen=True)
    return t


def row(t: RealSlurm, sid: int, state: str, start: int | None = None) -> Row:
    return Row(state, 1, start, None, t.fleet.node_name(0) if start else "", t.prefix + str(sid))


def read(t: RealSlurm, sid: int, start: int, shards: int = 600) -> tuple:
    """What the watcher queues for `sid` from one scontrol: `shards` on GPU 0 of node 0."""
    return sid, start, [(t.fleet.node_name(0), "shard", "", 0, shards)]


def cycle(t: RealSlurm, polls: list[dict[int, Row]], reads: tuple = ()) -> None:
    """One main-thread pass: the reads and polls the watcher queued since the last one."""
    for r in reads:
        t._gres_q.put(r)
    for k, rows in enumerate(polls):
        t._polls.put((float(k), rows))
    t._observe(0.0)


def held(t: RealSlurm) -> list[int]:
    return sorted(t.slices.holdings)


def test_a_job_that_ended_in_the_poll_that_started_the_next_is_not_booked_over_it(tmp_path):
    """A started and ended (COMPLETING, its GRES released) while B started on its GPU, all between
    two main-thread passes: A's read is not booked after its release, B's is."""
    t = target(tmp_path)
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "PENDING")},
              {A: row(t, A, "COMPLETING", 100), B: row(t, B, "RUNNING", 105)}],
          reads=(read(t, A, 100), read(t, B, 105)))
    assert held(t) == [B]
    assert t.slices.allocated_compute == 0.6
    figures = t.slice_figures()
    assert (figures["read"], figures["unread"], figures["conflicts"]) == (2, 0, 0)
    assert figures["ended_before_booked"] == 1


def test_a_slice_seen_before_the_end_of_its_gpus_holder_waits_for_that_release(tmp_path):
    """B's start (and read) is seen in a poll that still lists A running on the same GPU; A's end
    comes a poll later. B is booked once A is released, not refused for good."""
    t = target(tmp_path)
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "PENDING")}], reads=(read(t, A, 100),))
    assert held(t) == [A]
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "RUNNING", 105)}], reads=(read(t, B, 105),))
    assert held(t) == [A]                       # B waits for A's release
    cycle(t, [{A: row(t, A, "COMPLETED", 100), B: row(t, B, "RUNNING", 105)}])
    assert held(t) == [B]
    assert t.slices.allocated_compute == 0.6
    figures = t.slice_figures()
    assert (figures["read"], figures["conflicts"]) == (2, 0)
    assert figures["booked_after_holder_left"] == 1


def test_a_slice_whose_gpu_holder_outlives_it_is_a_conflict(tmp_path):
    """Slurm ran B on a GPU the ledger held for A until B ended: refused for good, one conflict,
    named with its holder."""
    t = target(tmp_path)
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "PENDING")}], reads=(read(t, A, 100),))
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "RUNNING", 105)}], reads=(read(t, B, 105),))
    assert t.slice_figures()["conflicts"] == 1          # still refused when the figures are read
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "COMPLETED", 105)}])
    assert held(t) == [A]
    figures = t.slice_figures()
    assert figures["conflicts"] == 1
    assert figures["conflict_examples"] == [{"slurm_id": B, "share": "milli:600", "node": 0, "gpu": 0,
                                             "held": [(A, "milli:600", "RUNNING")]}]


def test_a_slice_still_refused_after_its_holder_left_is_a_conflict(tmp_path):
    """Once every job that held the GPU at the refusal is gone, a slice that still does not fit
    (a job booked there meanwhile) is a conflict."""
    t = target(tmp_path, {A: 500, B: 600, C: 500})
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "PENDING"), C: row(t, C, "PENDING")}],
          reads=(read(t, A, 100, 500),))
    cycle(t, [{A: row(t, A, "RUNNING", 100), B: row(t, B, "RUNNING", 105), C: row(t, C, "RUNNING", 106)}],
          reads=(read(t, B, 105, 600), read(t, C, 106, 500)))
    assert held(t) == [A, C]                    # B waits for A
    cycle(t, [{A: row(t, A, "COMPLETED", 100), B: row(t, B, "RUNNING", 105), C: row(t, C, "RUNNING", 106)}])
    assert held(t) == [C]
    figures = t.slice_figures()
    assert figures["conflicts"] == 1 and "booked_after_holder_left" not in figures
    assert figures["conflict_examples"][0]["held"] == [(A, "milli:500", "RUNNING")]     # as at the refusal
