"""GPU sharing on real Slurm 22.05: gres/shard, typed MIG GRES and whole GPUs side by side, each
slice's GPU read back from slurmctld (scontrol -d show job), at four nodes of two GPUs."""
from __future__ import annotations

import subprocess
import time
from collections import defaultdict

import pytest

from fakes.slurm.gres import NodeGres, gres_slices, job_details, request
from fakes.slurm.target import RealSlurm
from loadgen.model.events import Kind
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import GpuShare, Sharing, gpu_model, parse_share
from loadgen.model.job import Job
from loadgen.model.target import TargetContext
from support.slurm import FAST, need_slurm, pids_of

LAYOUT = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")
POOLS = (NodePool("whole", 1, "h100-80gb", Sharing("whole"), 2),
         NodePool("shard", 1, "h100-80gb", Sharing("shards", shards_per_gpu=4), 2),
         NodePool("frac", 1, "a10", Sharing("fraction"), 2),
         NodePool("mig", 1, "h100-80gb", Sharing("mig", layout=LAYOUT), 2))
WHOLE, SHARD, FRAC, MIG = 0, 1, 2, 3          # fleet node index of each pool's one node


def fleet() -> Fleet:
    return Fleet(nodes=4, gpus_per_node=2, cpus_per_node=16, leaf_size=8, pools=POOLS)


def job(i: int, share: str, dur: float = 12.0) -> Job:
    return Job(id=i, tenant="t", queue="default", cls="slice", members=1, gpus_per_member=1, duration_s=dur,
               submit_s=0.0, min_available=1, cpus_per_member=1, share=share)


# Each pool filled exactly to capacity, then one more of each kind that must wait for a release.
FILL = ["", "",                                            # the whole pool's two GPUs
        "shards:3", "shards:1", "shards:2", "shards:2",      # 8 shards on two GPUs of 4
        "milli:600", "milli:400", "milli:500", "milli:500",  # two GPUs of 1000 milli
        "mig:3g.40gb", "mig:3g.40gb", "mig:2g.20gb", "mig:2g.20gb",
        "mig:1g.10gb", "mig:1g.10gb", "mig:1g.10gb", "mig:1g.10gb"]
OVER = ["mig:1g.10gb", "shards:4", "milli:700", ""]


def test_gres_conf_and_requests_as_slurm_reads_them():
    f = fleet()
    mig = NodeGres(gpu_model("h100"), Sharing("mig", layout=LAYOUT), 2)
    assert mig.node_gres() == "gpu:3g.40gb:2,gpu:2g.20gb:2,gpu:1g.10gb:4"
    # index k is /dev/tty<k>, instances grouped by profile (slurmd's record order, checked below)
    assert [(d.index, d.gpu, d.profile) for d in mig.devices()][:3] == [(0, 0, "3g.40gb"), (1, 1, "3g.40gb"),
                                                                      (2, 0, "2g.20gb")]
    shards = NodeGres(gpu_model("h100"), Sharing("shards", shards_per_gpu=4), 2)
    assert shards.node_gres() == "gpu:h100-80gb:2,shard:8"
    assert shards.conf_lines() == ["Name=gpu Type=h100-80gb File=/dev/tty[0-1]",
                                   "Name=shard Count=4 File=/dev/tty0", "Name=shard Count=4 File=/dev/tty1"]
    assert NodeGres(gpu_model("a10"), Sharing("fraction"), 2).node_gres() == "gpu:a10:2,shard:2000"
    assert request(parse_share("milli:250"), 1, f) == ["--gres=shard:250", "--constraint=gpushare-fraction"]
    assert request(parse_share("shards:2"), 1, f) == ["--gres=shard:2", "--constraint=gpushare-shards"]
    assert request(parse_share("mig:1g.10gb"), 1, f) == ["--gres=gpu:1g.10gb:1", "--constraint=gpushare-mig"]
    assert request(GpuShare(), 2, f, ("h100-80gb",)) == [
        "--gres=gpu:2", "--constraint=gpushare-fraction-h100-80gb|gpushare-shards-h100-80gb|gpushare-whole-h100-80gb"]
    assert request(GpuShare(), 2, Fleet(nodes=2), ("h100-80gb",)) == ["--gres=gpu:2"]   # no pools: as before
    # scontrol -d show job's per-node GRES detail, as Slurm 22.05.8 prints it
    assert gres_slices("gpu:h100-80gb:1(IDX:0)") == [("gpu", "h100-80gb", 0, 1)]
    assert gres_slices("shard:3(IDX:1)") == [("shard", "", 1, 3)]
    assert gres_slices("gpu:3g.40gb:2(IDX:0-1)") == [("gpu", "3g.40gb", 0, 1), ("gpu", "3g.40gb", 1, 1)]
    text = ("JobId=7 JobName=x\n   JobState=RUNNING\n     Nodes=gpu-00001 CPU_IDs=0 Mem=0 GRES=shard:2(IDX:1)\n\n"
            "JobId=8 JobName=y\n   JobState=PENDING\n")
    assert job_details(text) == {7: [("gpu-00001", "shard", "", 1, 2)], 8: []}


@pytest.mark.real
def test_slices_land_within_each_gpu_and_wait_when_full(tmp_path):
    need_slurm()
    ctx = TargetContext(fleet=fleet(), config=dict(FAST), control_plane={}, seed=1, run_dir=tmp_path)
    target = RealSlurm(ctx, workers=2, poll_s=0.3)
    jobs = [job(i, s) for i, s in enumerate(FILL)] + [job(100 + i, s, 3.0) for i, s in enumerate(OVER)]
    try:
        target.start()
        # slurmd's own reading of the MIG node's gres.conf: record k is /dev/tty<k> (what IDX means)
        conf = target.cluster.node_conf[fleet().node_name(MIG)]
        out = subprocess.run([str(tmp_path / "slurm" / "bin" / "slurmd"), "-G", "-N", fleet().node_name(MIG),
                              "-f", str(conf)], capture_output=True, text=True, timeout=30)
        files = [ln.split("File=")[1].split()[0] for ln in (out.stdout + out.stderr).splitlines() if "File=" in ln]
        assert files == [f"/dev/tty{k}" for k in range(8)], out.stdout + out.stderr

        t0 = time.monotonic()
        events = []
        for j in jobs[:len(FILL)]:
            events += target.submit(j, time.monotonic() - t0)
        admitted: dict[int, float] = {}
        peak = None
        submitted_over = False
        while len({e.job_id for e in events if e.kind in (Kind.FINISHED, Kind.FAILED)}) < len(jobs):
            now = time.monotonic() - t0
            assert now < 50, f"jobs not done in 50 s: {sorted(admitted)}"
            if not submitted_over and len(target.placed) >= len(FILL):
                for j in jobs[len(FILL):]:      # everything is full now: these must wait
                    events += target.submit(j, now)
                submitted_over = True
                peak = target.snapshot(now)
            events += target.advance(now)
            for e in events:
                if e.kind == Kind.ADMITTED:
                    admitted.setdefault(e.job_id, e.backend_t)       # Slurm's StartTime
            time.sleep(0.2)
        assert not [e for e in events if e.kind in (Kind.FAILED, Kind.REJECTED)]
        counts = target.slice_figures()
    finally:
        target.stop()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (target.cluster.marked_pids() or pids_of(tmp_path)):
            time.sleep(0.5)
        assert target.cluster.marked_pids() == [] and pids_of(tmp_path) == [], "slurm processes left behind"

    # every job's GRES was read back; none beyond a GPU's capacity (the ledger refuses that)
    assert counts == {"read": len(jobs), "unread": 0, "conflicts": 0, "mismatched": 0}
    placed = target.placed
    fill = {i: placed[i] for i in range(len(FILL))}
    assert all(len(p) == 1 for p in placed.values())
    by_gpu = defaultdict(int)
    for i, (p,) in fill.items():
        share = parse_share(FILL[i])
        assert p.node == {"whole": WHOLE, "milli": FRAC, "shards": SHARD, "mig": MIG}[share.kind], (i, p)
        if share.kind == "mig":
            assert p.profile == share.profile
        else:       # in milli of the GPU
            by_gpu[p.node, p.gpu] += {"whole": 1000, "milli": share.amount, "shards": 250 * share.amount}[share.kind]
    # the two whole GPUs, 4+4 shards and 1000+1000 milli: every GPU exactly full
    assert dict(by_gpu) == {(n, g): 1000 for n in (WHOLE, SHARD, FRAC) for g in (0, 1)}
    # the MIG node: each of its 8 instances (2 GPUs x the layout) held by exactly one job
    mig = sorted((p.gpu, p.profile, p.start) for (p,) in fill.values() if p.node == MIG)
    assert mig == sorted((g, name, s) for g in (0, 1) for name, s in Sharing("mig", layout=LAYOUT).instances(
        gpu_model("h100")))
    # at the peak: 6 of 8 GPUs' compute by the whole, shard and fraction pools + 2 full MIG GPUs (7/7 each)
    assert peak.gpu_sharing["capacity_gpus"] == 8
    assert peak.gpu_sharing["allocated_compute_gpus"] == pytest.approx(8.0)
    assert peak.gpu_sharing["allocated_whole_gpus"] == 2
    # the overflow waited for a release: started (Slurm's StartTime) only once a job of the fill ended
    first_end = min(e.backend_t for e in events if e.kind == Kind.FINISHED and e.job_id < 100 and e.backend_t)
    assert all(admitted[100 + i] >= first_end for i in range(len(OVER)))
