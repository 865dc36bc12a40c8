"""Where real Slurm puts a whole-GPU job beside running shards: one slurmd of 8 fraction-shared
GPUs (the openb slice's gres.conf, 1000 shards per GPU), three short sequences, and after each step
the `scontrol -d show job` and `scontrol show node -d` text (GresUsed) that show it, plus
slurmctld's log at debug with DebugFlags=Gres. Writes <out>/<case>-<step>.txt, <out>/slurmctld.log.gz,
<out>/slurmd-G.txt and <out>/verdict.json (per case: the GPU the shards were read on, the GPUs
the whole-GPU jobs got, and whether one of them got a GPU whose shards were still held).

    PYTHONPATH=$PWD python tools/gpushare/slurm_shard_probe.py --out results/gpushare/slurm/probe

Cases (docs/gpu-sharing.md, "## Slurm"):
  alone     a shard:320 job, then eight gpu:1 jobs: seven start, none on the shard job's GPU.
  after_end two shard jobs packed on one GPU, the shorter ends, then eight gpu:1 jobs.
  one_pass  three gpu:1 jobs end, then shard:320 and two gpu:1 released together (one pass),
            then eight more gpu:1 jobs.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from fakes.slurm.fleet import SlurmFleet
from fakes.slurm.gres import job_details
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing

CONFIG = {"sched_interval_s": 5, "bf_interval_s": 1, "sched_min_interval_s": 0.5, "bf_resolution_s": 5,
          "time_limit_factor": 1.5, "switches": 0, "cred_expire_s": 5}


class Probe:
    def __init__(self, cluster: SlurmFleet, out: Path):
        self.c, self.out = cluster, out

    def run(self, *argv: str) -> str:
        return self.c.run(list(argv), check=False).stdout

    def submit(self, gres: str, sleep_s: float, held: bool = False) -> int:
        argv = ["sbatch", "--parsable", f"--chdir={self.c.jobs_dir}", "--output=/dev/null", "--error=/dev/null",
                "--cpus-per-task=1", f"--gres={gres}", *(["--hold"] if held else []), "--wrap", f"sleep {sleep_s}"]
        return int(self.c.run(argv).stdout.strip().split(";")[0])

    def states(self) -> dict[int, str]:
        out = self.run("squeue", "-h", "-o", "%i %T")
        return {int(a): b for a, b in (ln.split() for ln in out.splitlines() if ln.strip())}

    def wait(self, sids: list[int], want: set[str], timeout_s: float = 60) -> None:
        """Until every job in sids is in a state of `want` (gone counts as ENDED)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = self.states()
            if all(st.get(s, "ENDED") in want for s in sids):
                return
            time.sleep(0.3)
        raise TimeoutError(f"{sids} not {want}: {self.states()}")

    def settle(self, s: float = 3.0) -> None:
        time.sleep(s)            # let slurmctld take its scheduling passes

    def capture(self, case: str, step: str) -> dict[int, list]:
        jobs = self.run("scontrol", "-d", "show", "job")
        node = self.run("scontrol", "show", "node", "-d")
        (self.out / f"{case}-{step}.txt").write_text(
            f"# squeue: {self.states()}\n\n# scontrol -d show job\n{jobs}\n# scontrol show node -d\n{node}")
        return job_details(jobs)

    def cancel_all(self) -> None:
        self.run("scancel", "--full", *map(str, self.states()))
        deadline = time.monotonic() + 30
        while self.states() and time.monotonic() < deadline:
            time.sleep(0.3)


def gpus_of(details: dict[int, list], sid: int) -> list[int]:
    return [idx for _nodes, _kind, _typ, idx, _n in details.get(sid, [])]


def verdict(details: dict[int, list], shard_sid: int, whole: list[int], states: dict[int, str]) -> dict:
    shard_gpu = gpus_of(details, shard_sid)
    got = {s: gpus_of(details, s) for s in whole if states.get(s) == "RUNNING"}
    return {"shard_job": shard_sid, "shard_gpu": shard_gpu, "whole_running": got,
            "whole_pending": [s for s in whole if states.get(s) == "PENDING"],
            "whole_on_shard_gpu": sorted(s for s, g in got.items() if set(g) & set(shard_gpu))}


def case_alone(p: Probe) -> dict:
    s = p.submit("shard:320", 120)
    p.wait([s], {"RUNNING"})
    p.capture("alone", "1-shard")
    whole = [p.submit("gpu:1", 120) for _ in range(8)]
    p.settle()
    v = verdict(p.capture("alone", "2-whole"), s, whole, p.states())
    p.cancel_all()
    return v


def case_after_end(p: Probe) -> dict:
    s1 = p.submit("shard:320", 120)
    p.wait([s1], {"RUNNING"})
    s2 = p.submit("shard:300", 4)
    p.wait([s2], {"RUNNING"})
    both = p.capture("after_end", "1-two-shard-jobs")
    p.wait([s2], {"ENDED"})
    p.settle(1)
    p.capture("after_end", "2-shorter-ended")
    whole = [p.submit("gpu:1", 120) for _ in range(8)]
    p.settle()
    v = verdict(p.capture("after_end", "3-whole"), s1, whole, p.states())
    v["second_shard_gpu"] = gpus_of(both, s2)
    p.cancel_all()
    return v


def case_one_pass(p: Probe) -> dict:
    first = [p.submit("gpu:1", 4) for _ in range(3)]
    p.wait(first, {"RUNNING"})
    p.capture("one_pass", "1-three-whole")
    s = p.submit("shard:320", 120, held=True)
    pair = [p.submit("gpu:1", 120, held=True) for _ in range(2)]
    p.wait(first, {"ENDED"})
    p.run("scontrol", "release", ",".join(map(str, [s, *pair])))
    p.wait([s, *pair], {"RUNNING"})
    p.capture("one_pass", "2-released-together")
    more = [p.submit("gpu:1", 120) for _ in range(8)]
    p.settle()
    v = verdict(p.capture("one_pass", "3-whole"), s, pair + more, p.states())
    p.cancel_all()
    return v


CASES = {"alone": case_alone, "after_end": case_after_end, "one_pass": case_one_pass}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--run-dir", type=Path, default=None, help="the cluster's directory (default: a new one in /tmp)")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(nodes=1, gpus_per_node=8, cpus_per_node=16, leaf_size=32,
                  pools=(NodePool("frac", 1, "t4", Sharing("fraction")),))
    run_dir = a.run_dir or Path(tempfile.mkdtemp(prefix="shardprobe-"))
    cluster = SlurmFleet(fleet, run_dir, config=CONFIG, ctld_debug="debug")
    result = {"slurmctld": subprocess.run(["slurmctld", "-V"], capture_output=True, text=True).stdout.strip(),
              "loadavg_start": os.getloadavg()}
    with cluster:
        cluster.run(["scontrol", "setdebugflags", "+Gres"])
        name = cluster.names[0]
        g = subprocess.run([str(cluster.run_dir / "bin" / "slurmd"), "-G", "-N", name, "-f",
                            str(cluster.node_conf[name])], capture_output=True, text=True, timeout=30)
        (a.out / "slurmd-G.txt").write_text(g.stdout + g.stderr)
        (a.out / "gres.conf").write_text((cluster.node_conf[name].parent / "gres.conf").read_text())
        p = Probe(cluster, a.out)
        for case in a.cases.split(","):
            result[case] = CASES[case](p)
            print(case, json.dumps(result[case]), flush=True)
        log = cluster.run_dir / "log" / "slurmctld.log"
        with gzip.open(a.out / "slurmctld.log.gz", "wt") as f:
            f.write(log.read_text() if log.exists() else "")
    result["loadavg_end"] = os.getloadavg()
    (a.out / "verdict.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
