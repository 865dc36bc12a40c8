"""A Slurm cluster gangstorm did not start: `gangstorm cluster up|down slurm` in processes of their
own, a run attached to it with --slurm-conf next to a foreign job, and the blast radius: the
foreign job untouched, nothing labelled left behind, every node resumed, no process after `down`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fakes.slurm.existing import ExistingSlurm, gres_gpus
from fakes.slurm.fleet import MARKER, marked_pids, stop_detached
from fakes.slurm.launch import status as launch_status
from fakes.slurm.target import RealSlurm
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.target import Existing, TargetContext
from support.slurm import need_slurm
from support.tails import assert_merged_tails_are_the_per_job_ones

GANGSTORM = [str(Path(sys.executable).with_name("gangstorm"))] if Path(sys.executable).with_name("gangstorm").exists() \
    else [sys.executable, "-m", "loadgen.cli.main"]
ROOT = Path(__file__).resolve().parent.parent

# ~31 jobs over 540 virtual s (54 wall s at --time-scale 10), 5 evictions, node_fail on nodes 0 and 3
# (seed 5): node 0 runs the foreign job, so the run must spare it and fail node 3 only.
SCENARIO = """\
name: attach-slurm
seed: 5
duration_h: 0.1
drain_h: 0.05
warmup_h: 0
sample_every_s: 10
fleet:
  nodes: 4
workload:
  target_allocation: 0.6
  churn_multiplier: 2
  tenants: 2
  classes:
    small:
      share: 0.8
      shapes:
        - {members: 1, gpus: 1, weight: 0.4}
        - {members: 1, gpus: 4, weight: 0.3}
        - {members: 1, gpus: 8, weight: 0.3}
      duration_s: {median: 60, sigma: 0.5, max: 180}
    large:
      share: 0.2
      shapes:
        - {members: 2, gpus: 8, weight: 1}
      duration_s: {median: 90, sigma: 0.3, max: 180}
chaos:
  - kind: evictions
    at_s: 30
    until_s: 300
    rate_per_h: 60
  - kind: node_failure
    at_s: 120
    nodes: 2
    recover_after_s: 60
schedulers:
  slurm:
    sched_interval_s: 5
    bf_interval_s: 1
    sched_min_interval_s: 0.5
    bf_resolution_s: 5
    cred_expire_s: 5
    switches: 0
"""


JOBS = 31        # the jobs SCENARIO plans (seed 5)


def leftovers(folder: Path, spool: str | None) -> list[str]:
    """Live processes whose command line or environment mentions the cluster folder, or that hold
    a file open under it or under its spool (slurmstepd wipes its environment)."""
    roots = tuple(r for r in (str(folder), spool) if r)
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            if stat.rsplit(") ", 1)[1][0] in "ZX":
                continue
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = Path(f"/proc/{d}/environ").read_bytes().decode(errors="replace")
            fds = []
            for fd in os.listdir(f"/proc/{d}/fd"):
                try:
                    fds.append(os.readlink(f"/proc/{d}/fd/{fd}"))
                except OSError:
                    pass
        except OSError:
            continue
        if any(r in cmd or r in env for r in roots) or any(f.startswith(roots) for f in fds):
            found.append(f"{d} {cmd[:120]}")
    return found


@dataclass
class Cluster:
    env: dict[str, str]
    conf: Path
    folder: Path
    spool: str
    scenario: Path
    up_s: float

    def slurm(self, *argv: str) -> str:
        r = subprocess.run(list(argv), env={**self.env, "SLURM_CONF": str(self.conf)}, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, f"{argv}: {r.stderr}"
        return r.stdout

    def gangstorm(self, *argv: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([*GANGSTORM, *argv], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)

    def foreign_job(self) -> str:
        """A plain sbatch, as a user would submit it: pinned to the first node, running."""
        jid = self.slurm("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--nodelist=gpu-00000",
                         "--nodes=1", "--wrap", "sleep 600").strip()
        deadline = time.monotonic() + 30
        while self.slurm("squeue", "-h", "-j", jid, "-o", "%T").strip() != "RUNNING":
            assert time.monotonic() < deadline, "the foreign job never started"
            time.sleep(0.3)
        return jid

    def down(self) -> subprocess.CompletedProcess:
        return self.gangstorm("cluster", "down", "slurm", timeout=120)



def only_the_foreign_job_is_left(cluster, foreign: str) -> None:
    """The foreign job: same id, still RUNNING on its node; nothing carrying a run label is queued;
    every node is back (none drained or down); `cluster down` leaves nothing."""
    assert cluster.slurm("squeue", "-h", "-j", foreign, "-o", "%i|%T|%N").split() == [f"{foreign}|RUNNING|gpu-00000"]
    comments = cluster.slurm("squeue", "-h", "-o", "%i|%k").splitlines()
    assert [c for c in comments if "gangstorm.io/run=" in c] == [], comments
    nodes = dict(line.split("|") for line in cluster.slurm("sinfo", "-h", "-N", "-o", "%N|%T").split())
    assert nodes == {"gpu-00000": "mixed", "gpu-00001": "idle", "gpu-00002": "idle", "gpu-00003": "idle"}, nodes
    assert_down_clean(cluster)

@pytest.fixture
def cluster(tmp_path):
    need_slurm()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["GANGSTORM_CLUSTERS_DIR"] = str(tmp_path / "clusters")
    folder = tmp_path / "clusters" / "slurm-default"
    scenario = tmp_path / "attach.yaml"
    scenario.write_text(SCENARIO)
    spool = None
    c = None
    try:
        t0 = time.monotonic()
        r = subprocess.run([*GANGSTORM, "cluster", "up", "slurm", "--nodes", "4", "--scenario", str(scenario),
                            "--json"], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
        up_s = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        state = json.loads(r.stdout)
        spool = state["spool"]
        c = Cluster(env, Path(state["connect"]["--slurm-conf"]), folder, spool, scenario, up_s)
        print(f"cluster up: {up_s:.1f} s wall ({state['boot_s']} s boot)")
        yield c
    finally:
        # Even when the test failed: stop the cluster, then make sure nothing of it runs.
        if c is not None:
            c.down()
        else:
            subprocess.run([*GANGSTORM, "cluster", "down", "slurm"], env=env, capture_output=True, timeout=120,
                           cwd=ROOT)
        left = leftovers(folder, spool)
        for line in left:
            try:
                os.killpg(int(line.split()[0]), signal.SIGKILL)
            except OSError:
                pass
        assert left == [], f"processes of the cluster left after `cluster down`: {left}"


def assert_down_clean(c: Cluster) -> None:
    r = c.down()
    assert r.returncode == 0 and "no process left" in r.stdout, (r.stdout, r.stderr)
    assert leftovers(c.folder, c.spool) == []
    assert not Path(c.spool).exists() and not c.folder.exists()
    r = c.gangstorm("cluster", "status", "slurm")
    assert r.returncode == 3 and "not up" in r.stdout


@pytest.mark.real
def test_a_run_next_to_a_foreign_job_never_touches_it(cluster, tmp_path):
    st = cluster.gangstorm("cluster", "status", "slurm", "--json")
    assert st.returncode == 0 and json.loads(st.stdout)["status"]["nodes"] == "4 idle", st.stdout
    foreign = cluster.foreign_job()
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = cluster.gangstorm("run", str(cluster.scenario), "--slurm-conf", str(cluster.conf), "--partition", "gpu",
                          "--schedulers", "slurm", "--nodes", "4", "--allow-foreign-workloads",
                          "--time-scale", "10", "--out", str(out), "--quiet", timeout=240)
    print(f"attached run: {time.monotonic() - t0:.1f} s wall")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "summary.json").read_text())["schedulers"]["slurm"]
    assert res["backend"] == "real" and res["jobs"]["rejected"] == 0 and res["jobs"]["admitted"] >= 10, res["jobs"]
    # every 2-node gang's placement came back from the backend: 4 nodes, one leaf
    assert (res["placement"]["gangs_placed"] >= 1 and res["placement"]["leaves_spanned"]["max"] == 1
            and res["placement"]["cross_leaf_gpu_hours"] == 0)
    cp = res["control_plane"]
    assert cp["left_behind"] == {"jobs": 0, "nodes_not_resumed": 0}
    assert cp["existing"]["partition"] == "gpu" and cp["existing"]["nodes"] == 4
    # node_fail hit nodes 0 and 3: node 0 runs the foreign job and was spared, node 3 went DOWN.
    assert [s["nodes"] for s in cp["chaos_skipped"]] == [["gpu-00000"]], cp["chaos_skipped"]
    assert res["chaos_applied"]["node_fail"] == {"applied": 1, "unsupported": 0}
    assert res["chaos_applied"]["evict"]["applied"] >= 1

    only_the_foreign_job_is_left(cluster, foreign)


@pytest.mark.real
def test_foreign_jobs_refused_without_opt_in_and_dry_run_submits_nothing(cluster, tmp_path):
    foreign = cluster.foreign_job()
    base = ["run", str(cluster.scenario), "--slurm-conf", str(cluster.conf), "--schedulers", "slurm",
            "--time-scale", "10"]
    out = tmp_path / "refused"
    r = cluster.gangstorm(*base, "--nodes", "4", "--out", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        f"gangstorm: error: {cluster.conf}: 1 jobs gangstorm did not create (ids {foreign}): pass "
        f"--allow-foreign-workloads to run next to them (they are never touched)"]
    assert not out.exists()

    r = cluster.gangstorm(*base, "--nodes", "4", "--allow-foreign-workloads", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "dry run: nothing was created" in r.stdout
    assert "found: 4 nodes in partition gpu (3 idle, 1 mixed), 1 foreign jobs" in r.stdout, r.stdout
    assert "fail 2 of its own fake nodes" in r.stdout

    # A fleet larger than the partition: one line naming the conf, the partition and both counts.
    r = cluster.gangstorm(*base, "--nodes", "8", "--allow-foreign-workloads", "--out", str(out))
    assert r.returncode == 2 and not out.exists(), (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        f"gangstorm: error: {cluster.conf}: partition gpu has 4 nodes, the scenario's fleet needs 8 "
        f"(pass --nodes 4 or fewer, or another --partition)"]

    # None of it submitted anything: the foreign job is the only one slurmctld ever saw.
    assert cluster.slurm("squeue", "-h", "--states=all", "-o", "%i").split() == [foreign]
    assert_down_clean(cluster)


@pytest.mark.real
def test_two_locust_workers_share_one_existing_slurm_polled_once_with_exact_merged_tails(cluster, tmp_path):
    """One-target Locust: two workers only sbatch, the master runs the run's one squeue poller, the
    chaos plan and the clean-up; the merged tails are the per-job ones, exactly."""
    import csv

    foreign = cluster.foreign_job()
    out = tmp_path / "two-workers"
    t0 = time.monotonic()
    r = cluster.gangstorm("locust", str(cluster.scenario), "--slurm-conf", str(cluster.conf), "--partition", "gpu",
                          "--schedulers", "slurm", "--nodes", "4", "--allow-foreign-workloads", "--processes", "2",
                          "--master-port", str(free_port()), "--headless", "--time-scale", "20", "--out", str(out),
                          timeout=300)
    print(f"two-worker locust run: {time.monotonic() - t0:.1f} s wall")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    res = s["schedulers"]["slurm"]
    assert s["complete"] is True and s["locust"]["workers"] == 2 and s["locust"]["mode"] == "one-target"
    assert res["jobs"]["submitted"] == JOBS and res["jobs"]["rejected"] == 0 and res["jobs"]["admitted"] >= 10, \
        res["jobs"]
    cp = res["control_plane"]
    # one poller: only the master ran squeue (the submitters' control plane is empty); its client sent
    # no workload sbatch, the workers did
    assert cp["client"]["squeue_calls"] >= 10 and cp["client"]["sbatch_calls"] <= 2, cp["client"]
    assert cp["left_behind"] == {"jobs": 0, "nodes_not_resumed": 0}
    assert [x["nodes"] for x in cp["chaos_skipped"]] == [["gpu-00000"]], cp["chaos_skipped"]
    assert res["chaos_applied"]["evict"]["applied"] >= 1
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert len(rows) == JOBS
    admitted = [float(row["admission_s"]) for row in rows if row["admitted_s"]]
    assert_merged_tails_are_the_per_job_ones(res["admission_s"], admitted)

    only_the_foreign_job_is_left(cluster, foreign)


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- no cluster: the pieces ---------------------------------------------------------------------
def test_gres_gpus():
    assert gres_gpus("gpu:h100:8") == 8
    assert gres_gpus("gpu:8(S:0-1)") == 8
    assert gres_gpus("gpu:a100:2(S:0),gpu:h100:4") == 6
    assert gres_gpus("(null)") == 0


def test_attached_argv_carries_the_label_and_creates_nothing(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmctldHost=x(127.0.0.1)\n")
    ctx = TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1, run_dir=None,
                        existing=Existing(slurm_conf=str(conf), partition="gpu"), run_id="20261204-RUN_a")
    before = set(os.listdir("/tmp"))
    t = RealSlurm(ctx)
    assert set(os.listdir("/tmp")) == before and sorted(os.listdir(tmp_path)) == ["slurm.conf"]
    assert isinstance(t.cluster, ExistingSlurm) and t.cluster.env()["SLURM_CONF"] == str(conf)
    assert t.after_stop() == {}          # nothing counted before a stop
    t.partition, t.names, t.excluded = "gpu", ["n1", "n2"], ["n3"]      # what start() reads off sinfo
    job = Job(id=7, tenant="t1", queue="q", cls="small", members=2, gpus_per_member=8, duration_s=30.0,
              submit_s=0.0, min_available=2)
    argv = t.sbatch_argv(job)
    assert "--job-name=gs-20261204-run-a-7" in argv and "--comment=gangstorm.io/run=20261204-run-a" in argv
    assert {"--chdir=/tmp", "--partition=gpu", "--exclude=n3", "--nodes=2", "--gres=gpu:8"} <= set(argv)
    assert not any(a.startswith("--account") for a in argv)

    launched = RealSlurm(TargetContext(fleet=Fleet(nodes=2), config={}, control_plane={}, seed=1,
                                       run_dir=tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    argv = launched.sbatch_argv(job)
    assert "--job-name=gs-gangstorm-7" in argv and "--comment=gangstorm.io/run=gangstorm" in argv
    assert f"--chdir={tmp_path / 'run' / 'slurm' / 'jobs'}" in argv and "--account=t1" in argv
    assert not any(a.startswith(("--partition", "--exclude")) for a in argv)
    assert launched.preflight() == []


def _sleeper(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], **env}, start_new_session=True)


def test_stop_detached_signals_only_marked_processes(tmp_path):
    stranger = _sleeper({})
    ours = _sleeper({MARKER: "tok123"})
    job = _sleeper({"SLURM_JOB_ID": "1", "SLURM_CONF": f"{tmp_path}/etc/nodes/h100/gpu-00000.conf"})
    try:
        time.sleep(0.2)
        assert set(marked_pids("tok123", tmp_path)) == {ours.pid}
        assert set(marked_pids("tok123", tmp_path, jobs_by_folder=True)) == {ours.pid, job.pid}
        # The stranger's pid is listed (as a reused pid would be): it is not signalled.
        assert stop_detached([stranger.pid, ours.pid], "tok123", tmp_path, None, grace_s=2) == []
        assert ours.wait(timeout=5) is not None and job.wait(timeout=5) is not None
        assert stranger.poll() is None
        st = launch_status({"pids": [stranger.pid, ours.pid], "token": "tok123", "ctld_pid": stranger.pid,
                            "connect": {"--slurm-conf": str(tmp_path / "slurm.conf")}})
        assert st["up"] is False and st["components"] == {"slurmctld": "exited", "slurmd": "exited"}
    finally:
        for p in (stranger, ours, job):
            p.kill()
            p.wait()
