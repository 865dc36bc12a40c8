"""GPU slices as real Slurm granted them: which GPU (and MIG instance) each running job's GRES
index names, kept in a slice ledger of the fleet (fakes/sim/slices.SliceState) so the run's
slice-granular figures (allocation, fragmentation, stranded capacity) come from slurmctld's own
decisions, never from a model of them.

The watcher thread runs one `scontrol -d show job` in a poll cycle where squeue shows a running
job of the run whose allocation was not read yet (fakes/slurm/gres.py parses it); the main
thread places each slice on the GPU Slurm named. The main thread may take several polls at once,
so the ledger follows the latest: every release it shows is applied before any booking, and a read
whose job has released its GRES by then (COMPLETING, ended) is not booked (`ended_before_booked`),
else it would hold the GPU against the job Slurm started there next. A slice the ledger refuses
waits while its job and the jobs that held its GPU at the refusal still hold theirs, and is
booked once they are gone (`booked_after_holder_left`): a start seen before a release it followed.
It is counted in `conflicts` (Slurm granting beyond a GPU's capacity, or gangstorm misreading)
if it still does not fit once they are gone, if its job ends first, or if it is still waiting
when the figures are read. A grant of other than the shards asked is counted in `mismatched`, a
job that ended before its GRES was read in `unread`. Only a fleet with node pools keeps slices.

One over-allocation is Slurm's own and is booked as Slurm made it: a whole GPU handed out while
shards of running jobs are still on it (`double_booked`). Slurm 22.05 keeps one bit per GPU for the
shards in use on a node and clears a GPU's bit when any job's shards there are released, even
while other jobs still hold shards on it (src/slurmctld/gres_ctld.c, _job_dealloc); the whole-GPU
filter only avoids GPUs whose bit is set (cons_tres/gres_sched.c, _build_sock_gres_by_topo), so
after two jobs shared a GPU and one ended, `--gres=gpu:N` may take it. SchedMD bug 19110, fixed in
23.11.5 ("Fix bad deallocation of shared gres"); tools/gpushare/slurm_shard_probe.py shows it on a
slurmd. The whole-GPU job is booked on that GPU (so it counts fully allocated, once) and the slices
are held aside; they are booked back when it leaves, if their jobs still hold them.
"""
from __future__ import annotations

import dataclasses
import queue

import numpy as np

from fakes.sim.slices import SliceState, idle_whole_up, up_mask
from fakes.slurm import gres
from fakes.slurm.client import Row
from fakes.slurm.hostlist import expand
from fakes.slurm.real.tracked import RUNNING, _drained
from loadgen.model.gpushare import WHOLE, GpuShare
from loadgen.model.job import Job
from loadgen.model.target import Snapshot

HOLDING = RUNNING - {"COMPLETING"}       # squeue states in which a job still holds its GRES


@dataclasses.dataclass(frozen=True)
class Placed:
    """One GRES a job got on one node: GPU `gpu` of fleet node `node`; a MIG instance's profile
    and memory-slice start; `amount` shards (1 for a GPU or MIG instance)."""
    node: int
    gpu: int
    kind: str               # "gpu" | "shard"
    profile: str = ""
    start: int = -1
    amount: int = 1


@dataclasses.dataclass
class Refused:
    """A slice the ledger refused on the GPU Slurm named, waiting for the jobs that held it then."""
    sid: int
    job: Job
    node: int
    gpu: int
    share: GpuShare
    start: int | None                       # MIG instance's memory-slice start
    holders: frozenset[int]                 # Slurm ids the ledger held on that GPU at the refusal
    example: dict                           # what conflict_examples shows if it stays refused


@dataclasses.dataclass
class Overlaid:
    """A GPU Slurm handed out whole (to Slurm id `whole`) while the `aside` slices, (Slurm id,
    share), were still held on it: booked back once `whole` leaves the GPU."""
    whole: int
    aside: list[tuple[int, GpuShare]]


class SlurmSlices:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    def _init_slices(self) -> None:
        f = self.fleet
        self.slices: SliceState | None = SliceState(f) if f.pools else None
        self.node_gres = [gres.node_gres(f, i) for i in range(f.nodes)] if f.pools else []
        self.shapes: dict[tuple[str, int, str], int] = {}    # the arrived shape mix (ATC '23 target workload)
        self.placed: dict[int, list[Placed]] = {}            # job id -> its GRES in the current attempt
        self.slice_counts = {"read": 0, "unread": 0, "conflicts": 0, "mismatched": 0}
        self.conflicts: list[dict] = []                      # the first few, for diagnosis
        self.late = {"ended_before_booked": 0, "booked_after_holder_left": 0}
        self.refused: list[Refused] = []                     # waiting for their GPU's holders to leave
        self.overlaid: dict[tuple[int, int], Overlaid] = {}  # (node, gpu) Slurm handed out whole over slices
        self.double_booked = 0                               # whole GPUs Slurm handed out over running slices
        self.double_examples: list[dict] = []                # the first few, as read
        self._gres_q: queue.SimpleQueue = queue.SimpleQueue()   # (slurm id, StartTime, [(nodes, kind, type, idx, n)])
        self._gres_read: set[tuple[int, int | None]] = set()    # watcher: (slurm id, StartTime) read
        self._gres_wait: dict[int, tuple] = {}     # read, waiting for the main thread to see the job start

    def _count_shape(self, job: Job) -> None:
        key = (job.share, job.gpus_per_member, job.gpu_spec)
        self.shapes[key] = self.shapes.get(key, 0) + 1

    # ---- watcher thread -------------------------------------------------------------------
    def _read_gres(self, rows: dict[int, Row]) -> None:
        if self.slices is None:
            return
        want = [(sid, row.start) for sid, row in rows.items() if row.state in HOLDING
                and row.name.startswith(self.prefix) and (sid, row.start) not in self._gres_read]
        if not want:
            return
        details = self.client.job_gres()
        if details is None:
            return
        for sid, start in want:
            if details.get(sid):
                self._gres_read.add((sid, start))
                self._gres_q.put((sid, start, details[sid]))

    # ---- main thread ----------------------------------------------------------------------
    def _holds(self, sid: int) -> bool:
        """The latest poll shows `sid` holding its GRES: started in the attempt the main thread
        follows, in a squeue state that holds them. A job squeue shows COMPLETING has released its
        GRES already: slurmctld may start another on them before the completing one leaves."""
        tr, row = self.by_slurm.get(sid), self._rows.get(sid)
        return tr is not None and not tr.done and tr.started and row is not None and row.state in HOLDING

    def _apply_gres(self) -> None:
        """Bring the ledger to the latest poll: give back what jobs no longer holding held, book
        back the slices set aside on GPUs whose whole-GPU holder left, then book the slices still
        waiting for their GPU's holders, then place what the watcher read."""
        if self.slices is None:
            return
        for sid in list(self.slices.holdings):
            if not self._holds(sid):
                self.slices.give_back(sid)
        self._end_overlays()
        self._retry_refused()
        for sid, start, rows in _drained(self._gres_q):
            self._gres_wait[sid] = (start, rows)
        for sid, (start, rows) in list(self._gres_wait.items()):
            tr = self.by_slurm.get(sid)
            if tr is not None and not tr.done and not (tr.started and tr.starts[-1][1] == start):
                continue            # read from a poll the main thread has not seen yet
            del self._gres_wait[sid]
            if tr is None or tr.done:
                self.slice_counts["unread"] += 1
                continue
            self._place(sid, tr.job, rows)

    def _place(self, sid: int, job: Job, rows: list[tuple[str, str, str, int, int]]) -> None:
        self.slices.give_back(sid)
        self.refused = [r for r in self.refused if r.sid != sid]     # an earlier attempt's
        for ov in self.overlaid.values():
            ov.aside = [(o, sh) for o, sh in ov.aside if o != sid]
        self._end_overlays()
        book = self._holds(sid)
        if not book:
            self.late["ended_before_booked"] += 1
        share = job.gpu_share
        placed = []
        for nodes, kind, _typ, idx, amount in rows:
            for name in expand(nodes):
                i = self.index.get(name)
                dev = self.node_gres[i].describe(idx) if i is not None else None
                if dev is None:
                    self.slice_counts["conflicts"] += 1
                    continue
                placed.append(Placed(i, dev.gpu, kind, dev.profile, dev.start, amount))
                one = WHOLE if share.is_whole else share
                if share.kind in ("milli", "shards") and amount != share.amount:
                    self.slice_counts["mismatched"] += 1      # Slurm granted other than asked
                start = dev.start if dev.profile else None
                if book and self.slices.place_at(sid, i, dev.gpu, one, start) is None:
                    holders = self._holders(i, dev.gpu)
                    if one.is_whole and holders and all(sh != "whole" and self._holds(o) for o, sh, _ in holders):
                        self._double_book(sid, i, dev.gpu, holders)
                        continue
                    self.refused.append(Refused(sid, job, i, dev.gpu, one, start, frozenset(o for o, *_ in holders),
                                                {"slurm_id": sid, "share": job.share or "whole", "node": i,
                                                 "gpu": dev.gpu, "held": holders}))
        self.placed[job.id] = placed
        self.slice_counts["read"] += 1

    def _holders(self, node: int, gpu: int) -> list[tuple[int, str, str | None]]:
        """What the ledger holds on one GPU: (Slurm id, share, squeue state) per slot."""
        return [(o, slot.share.text or "whole", getattr(self._rows.get(o), "state", None))
                for o, hs in self.slices.holdings.items() for n, k, slot in hs if (n, k) == (node, gpu)]

    def _double_book(self, sid: int, node: int, gpu: int, holders: list[tuple[int, str, str | None]]) -> None:
        """Slurm handed GPU `gpu` of `node` whole to `sid` while the `holders`' slices were on it
        (Slurm 22.05's shared-GRES release, see the module docstring): book it whole, the slices aside."""
        aside = [(o, slot.share) for o, hs in self.slices.holdings.items()
                 for n, k, slot in hs if (n, k) == (node, gpu)]
        for o in {o for o, _ in aside}:
            self.slices.give_back(o, node, gpu)
        placed = self.slices.place_at(sid, node, gpu, WHOLE)
        assert placed is not None, f"GPU {gpu} of node {node} not idle once its slices were set aside"
        self.overlaid[node, gpu] = Overlaid(sid, aside)
        self.double_booked += 1
        if len(self.double_examples) < 20:
            self.double_examples.append({"slurm_id": sid, "node": node, "gpu": gpu, "held": holders})

    def _end_overlays(self) -> None:
        """Book back the slices set aside on each GPU whose whole-GPU holder has left it, those
        whose jobs still hold them; a conflict if one does not fit there any more."""
        for (node, gpu), ov in list(self.overlaid.items()):
            ov.aside = [(o, sh) for o, sh in ov.aside if self._holds(o)]
            if any((n, k) == (node, gpu) for n, k, _ in self.slices.holdings.get(ov.whole, [])):
                continue
            del self.overlaid[node, gpu]
            for o, share in ov.aside:
                if self.slices.place_at(o, node, gpu, share) is None:
                    self._conflict({"slurm_id": o, "share": share.text, "node": node, "gpu": gpu,
                                    "held": self._holders(node, gpu)})

    def _retry_refused(self) -> None:
        """After the releases: book each waiting slice whose GPU's holders at the refusal are all
        gone; a conflict if it still does not fit then, or if its own job stopped holding first."""
        waiting = []
        for r in self.refused:
            if not self._holds(r.sid):
                self._conflict(r.example)
            elif any(o in self.slices.holdings and self._holds(o) for o in r.holders):
                waiting.append(r)
            elif self.slices.place_at(r.sid, r.node, r.gpu, r.share, r.start) is None:
                self._conflict(r.example)
            else:
                self.late["booked_after_holder_left"] += 1
        self.refused = waiting

    def _conflict(self, example: dict) -> None:
        """Count a slice the ledger refused where Slurm put it; keep the first few, with what the
        ledger held on that GPU at the refusal and those jobs' squeue states, for the control-plane figures."""
        self.slice_counts["conflicts"] += 1
        if len(self.conflicts) < 20:
            self.conflicts.append(example)

    def used_per_node(self) -> np.ndarray:
        """With slices: whole GPUs held only, a slice counted in gpu_sharing (as the twins count)."""
        if self.slices is None:
            return super().used_per_node()
        return self.slices.whole_held_per_node()

    def free_per_node(self) -> np.ndarray:
        """With slices: idle GPUs a whole-GPU member may take (none on MIG nodes), as the twins see them."""
        if self.slices is None:
            return super().free_per_node()
        return idle_whole_up(self.slices, self.down)

    def snapshot(self, now: float) -> Snapshot:
        snap = super().snapshot(now)
        if self.slices is None:
            return snap
        up = up_mask(self.fleet.nodes, self.down)
        pending = {(tr.job.share, tr.job.gpus_per_member, tr.job.gpu_spec)
                   for tr in self.jobs.values() if not tr.done and not tr.started}
        return dataclasses.replace(snap, gpu_sharing=self.slices.real_sample(self.shapes, pending, up))

    def slice_figures(self) -> dict:
        """What the run read back: jobs placed, jobs never read, slices Slurm granted beyond a GPU
        (those still waiting for their GPU's holders included); the late bookings and the whole
        GPUs Slurm handed out over running shards (`double_booked`, with the first few) when there were any."""
        if self.slices is None:
            return {}
        counts = {**self.slice_counts, "conflicts": self.slice_counts["conflicts"] + len(self.refused)}
        examples = (self.conflicts + [r.example for r in self.refused])[:20]
        double = {"double_booked": self.double_booked,
                  "double_booked_examples": self.double_examples} if self.double_booked else {}
        return {**counts, **{k: n for k, n in self.late.items() if n}, **double,
                **({"conflict_examples": examples} if examples else {})}
