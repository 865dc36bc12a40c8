"""The order in which real Slurm's read-back slices are booked in the slice ledger
(fakes/slurm/real/slices.py), on constructed squeue polls and `scontrol -d show job` reads fed
through the target's own queues: no Slurm runs."""
from __future__ import annotations

from pathlib import Path

from fakes.slurm.client import Row
from fakes.slurm.gres import job_details
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


# --- Slurm 22.05 handing a GPU out whole beside running shards (SchedMD bug 19110, fixed in 23.11.5) ---
CAPTURED = Path(__file__).parent / "data" / "slurm" / "shard-then-whole-22.05.8.txt"
S, W, W2 = 10, 12, 14           # Slurm ids: a shard:320 job and whole-GPU jobs, as in the capture


def eight_gpus(tmp_path, shares: dict[int, str]) -> RealSlurm:
    """One node of 8 fraction-shared t4 GPUs (the openb slice's pool), jobs of the given shares ("" whole)."""
    fleet = Fleet(nodes=1, gpus_per_node=8, cpus_per_node=16, leaf_size=8,
                  pools=(NodePool("frac", 1, "t4", Sharing("fraction"), 8),))
    t = RealSlurm(TargetContext(fleet=fleet, config=dict(FAST), control_plane={}, seed=1, run_dir=tmp_path))
    for sid, share in shares.items():
        job = Job(id=sid, tenant="t", queue="default", cls="slice", members=1, gpus_per_member=1, duration_s=5,
                  submit_s=0.0, min_available=1, cpus_per_member=1, share=share)
        t.jobs[job.id] = t.by_slurm[sid] = t.active[sid] = Tracked(job, slurm_id=sid, seen=True)
    return t


def test_a_whole_gpu_slurm_granted_beside_running_shards_is_booked_as_slurm_made_it(tmp_path):
    """`scontrol -d show job` as Slurm 22.05.8 printed it (tools/gpushare/slurm_shard_probe.py, case
    after_end): job 10 holds shard:320 on GPU 0 and job 12 got GPU 0 whole, both RUNNING. The
    ledger books job 12 on GPU 0 (fully allocated, once) with job 10's shards set aside: one
    double booking, no conflict; the shards are booked back when job 12 leaves."""
    details = job_details(CAPTURED.read_text())
    assert details == {S: [("gpu-00000", "shard", "", 0, 320)], W: [("gpu-00000", "gpu", "t4", 0, 1)]}
    t = eight_gpus(tmp_path, {S: "milli:320", W: ""})
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "PENDING")}], reads=((S, 100, details[S]),))
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "RUNNING", 105)}], reads=((W, 105, details[W]),))
    assert held(t) == [W]
    assert t.slices.allocated_compute == 1.0 and t.used_per_node().tolist() == [1]
    figures = t.slice_figures()
    assert (figures["read"], figures["conflicts"], figures["double_booked"]) == (2, 0, 1)
    assert figures["double_booked_examples"] == [{"slurm_id": W, "node": 0, "gpu": 0,
                                                  "held": [(S, "milli:320", "RUNNING")]}]
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "COMPLETED", 105)}])
    assert held(t) == [S]
    assert t.slices.allocated_compute == 0.32
    assert t.slice_figures()["conflicts"] == 0


def test_whole_gpus_granted_one_after_another_over_the_same_shards_each_count(tmp_path):
    """As in the openb run (job 8's shards on GPU 3 while whole-GPU jobs came and went there): each
    whole-GPU grant over the still-running shards is one double booking; when the shard job ends
    under a whole-GPU job, nothing is booked back."""
    t = eight_gpus(tmp_path, {S: "milli:320", W: "", W2: ""})
    on_gpu0 = [("gpu-00000", "gpu", "t4", 0, 1)]
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "PENDING"), W2: row(t, W2, "PENDING")}],
          reads=((S, 100, [("gpu-00000", "shard", "", 0, 320)]),))
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "RUNNING", 105), W2: row(t, W2, "PENDING")}],
          reads=((W, 105, on_gpu0),))
    cycle(t, [{S: row(t, S, "RUNNING", 100), W: row(t, W, "COMPLETED", 105), W2: row(t, W2, "RUNNING", 110)}],
          reads=((W2, 110, on_gpu0),))
    assert held(t) == [W2]
    cycle(t, [{S: row(t, S, "COMPLETED", 100), W2: row(t, W2, "RUNNING", 110)}])
    cycle(t, [{W2: row(t, W2, "COMPLETED", 110)}])
    assert held(t) == [] and t.slices.allocated_compute == 0.0
    figures = t.slice_figures()
    assert (figures["read"], figures["conflicts"], figures["double_booked"]) == (3, 0, 2)


def test_a_whole_gpu_read_on_a_gpu_held_whole_is_still_a_conflict(tmp_path):
    """Only a whole GPU over slices is Slurm 22.05's double booking; over another whole GPU it is a conflict."""
    t = eight_gpus(tmp_path, {W: "", W2: ""})
    on_gpu0 = [("gpu-00000", "gpu", "t4", 0, 1)]
    cycle(t, [{W: row(t, W, "RUNNING", 100), W2: row(t, W2, "PENDING")}], reads=((W, 100, on_gpu0),))
    cycle(t, [{W: row(t, W, "RUNNING", 100), W2: row(t, W2, "RUNNING", 105)}], reads=((W2, 105, on_gpu0),))
    figures = t.slice_figures()
    assert figures["conflicts"] == 1 and "double_booked" not in figures
