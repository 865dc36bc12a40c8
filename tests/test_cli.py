"""gangstorm run / trace from the command line: files written, schema, partial results."""
import fcntl
import json
import os
import subprocess
import sys

from support.paths import ROOT

REQUIRED = {"run_id", "scenario", "seed", "complete", "wall_s", "fleet", "workload", "schedulers"}
PER_SCHED = {"backend", "jobs", "admission_s", "by_class", "alloc_util", "fragmentation", "partial_gang_gpu_hours",
             "cost_per_million_gpu_hours", "control_plane"}


def gangstorm(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_run_writes_summary_jobs_and_report(tmp_path):
    r = gangstorm("run", "scenarios/baseline-3x.yaml", "--nodes", "300", "--duration-h", "1", "--out",
                  str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    assert REQUIRED <= set(s) and s["complete"] is True
    assert set(s["fleet"]) >= {"nodes", "gpus_per_node", "leaf_size"} and s["fleet"]["nodes"] == 300
    assert {"jobs", "churn_multiplier", "arrival_rate_per_s", "offered_load"} <= set(s["workload"])
    assert list(s["schedulers"]) == ["kube-gang", "coscheduling", "kueue", "volcano", "ray", "slurm"]  # default set
    for sch in s["schedulers"].values():
        assert PER_SCHED <= set(sch) and sch["backend"] == "sim"
        assert {"p50", "p99", "p999", "max", "count"} <= set(sch["admission_s"])
        assert sch["jobs"]["submitted"] == s["workload"]["jobs"]
    rows = (tmp_path / "jobs.csv").read_text().splitlines()
    assert len(rows) == 1 + 6 * s["workload"]["jobs"]
    assert "| kube-gang | sim |" in (tmp_path / "summary.md").read_text()
    assert f"results: {tmp_path}/summary.json" in r.stdout


def test_jobs_lost_to_refusals_are_named_on_stderr_as_well(tmp_path):
    """A --quiet run or a CI log shows what summary.md says: jobs the cluster refused, by reason."""
    r = gangstorm("run", "scenarios/etcd-quota.yaml", "--nodes", "2000", "--schedulers", "kube,slurm", "--out",
                  str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    kube = json.loads((tmp_path / "summary.json").read_text())["schedulers"]["kube"]["jobs"]
    assert kube["failed"] > 0                    # the quota fills at hour 2: creates refused, given up
    lost = [ln for ln in r.stderr.splitlines() if "failed of" in ln]
    assert lost == [f"gangstorm: kube: 0 rejected and {kube['failed']:,} failed of {kube['submitted']:,} submitted "
                    f"(etcd-nospace x{kube['failed']:,})"]                # slurm keeps no state in etcd: no line


def test_trace_export_then_replay_gives_the_same_jobs(tmp_path):
    trace = tmp_path / "t.jsonl"
    r = gangstorm("trace", "export", "scenarios/baseline-3x.yaml", str(trace), "--nodes", "200")
    assert r.returncode == 0, r.stderr
    r = gangstorm("trace", "show", str(trace))
    assert r.returncode == 0 and "jobs over" in r.stdout
    r = gangstorm("run", "scenarios/baseline-3x.yaml", "--nodes", "200", "--trace", str(trace), "--schedulers",
                  "slurm", "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["workload"]["jobs"] == len(trace.read_text().splitlines()) - 1
    assert s["workload"]["source"] == str(trace)


def test_interrupted_run_leaves_a_partial_summary(tmp_path):
    import os
    import signal
    import time
    p = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", "run", "scenarios/baseline-3x.yaml",
                          "--out", str(tmp_path), "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (tmp_path / "summary.json").exists():
            time.sleep(0.1)
        time.sleep(1.0)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["complete"] is False
    assert "interrupted" in err


def test_a_real_backend_that_cannot_start_is_one_line_and_keeps_the_run_folder(tmp_path):
    # kube's binaries are looked up in GANGSTORM_BIN_DIR: an empty one makes the start fail at once
    env = {**os.environ, "GANGSTORM_BIN_DIR": str(tmp_path / "no-bins")}
    (tmp_path / "no-bins").mkdir()
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", "scenarios/ceiling-real.yaml",
                        "--backend", "real", "--schedulers", "kube", "--out", str(tmp_path / "run")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    err = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and err[-1].startswith("gangstorm: error: kube (real) did not start: ")
    assert "make k8s-bins" in err[-1] and f"partial results kept in {tmp_path / 'run'}" in err[-1]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["complete"] is False and s["schedulers"] == {}


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # `gangstorm profile show | head -1`: the rest of the output meets a closed pipe. The pipe is
    # shrunk to one page first: the output (~18 KB) fits a default 64 KiB pipe, and a child that
    # wrote it all before the reader closed would exit 0 (5 runs in 180 here).
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    p = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", "profile", "show"], cwd=ROOT,
                         stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    assert os.read(read_end, 4096)
    os.close(read_end)
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
