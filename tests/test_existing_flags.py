"""The attach flags (--kubeconfig, --slurm-conf, --ray-address, ...), the run label, `cluster` usage and
--dry-run's wording: checked without any cluster. Every refusal is one line with exit status 2."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from loadgen.drive.dryrun import chaos_lines, describe
from loadgen.input.chaos import plan as chaos_plan
from loadgen.input.overrides import load_with_overrides
from loadgen.input.plan import plan_run
from loadgen.model.target import run_label
from support.paths import ROOT

SCENARIO = str(ROOT / "tests/data/existing-small.yaml")


def gangstorm(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen.cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


def kubeconfig(tmp_path, server: str = "https://127.0.0.1:6443", current: str = "ctx") -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": "c", "cluster": {"server": server}}],
           "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
           "users": [{"name": "u", "user": {}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def refused(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and line.startswith("gangstorm: error: ")
    for n in needles:
        assert n in line


@pytest.mark.parametrize("args, needles", [
    (["--kubeconfig", "/no/such/file"], ["--kubeconfig /no/such/file: expected a readable file, no such file"]),
    (["--ray-address", "10.1.2.3:6379"], ["--ray-address: expected an address on 127.0.0.0/8, got '10.1.2.3'",
                                          "--allow-remote"]),
    (["--ray-address", "127.0.0.1"], ["--ray-address: expected HOST:PORT"]),
    (["--ray-address", "127.0.0.1:6379", "--backend", "sim"],
     ["--backend sim: an existing cluster is driven by the real backend"]),
    (["--context", "x"], ["--context: only used with an existing cluster"]),
    (["--allow-foreign-workloads"], ["--allow-foreign-workloads: only used with an existing cluster"]),
    (["--ray-address", "127.0.0.1:6379", "--schedulers", "kube"], ["--schedulers: kube needs --kubeconfig"]),
])
def test_attach_flags_are_checked_before_anything_runs(tmp_path, args, needles):
    refused(gangstorm("run", SCENARIO, "--out", str(tmp_path / "out"), *args), *needles)
    assert not (tmp_path / "out").exists()


def test_a_kubeconfig_pointing_off_the_machine_needs_allow_remote(tmp_path):
    path = kubeconfig(tmp_path, server="https://prod.example.com:6443")
    refused(gangstorm("run", SCENARIO, "--kubeconfig", path),
            "server: expected an address on 127.0.0.0/8, got 'prod.example.com'")


def test_a_kubeconfig_context_that_does_not_exist_is_named(tmp_path):
    path = kubeconfig(tmp_path)
    refused(gangstorm("run", SCENARIO, "--kubeconfig", path, "--context", "nope"),
            "--context: expected one of ctx, got 'nope'")


def test_a_slurm_conf_whose_controller_is_elsewhere_needs_allow_remote(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=head01(10.0.0.5)\n")
    refused(gangstorm("run", SCENARIO, "--slurm-conf", str(conf)), "SlurmctldHost: expected an address on 127.0.0.0/8")
    conf.write_text("ClusterName=x\n")
    refused(gangstorm("run", SCENARIO, "--slurm-conf", str(conf)), "expected a slurm.conf with SlurmctldHost")


def test_the_run_label_is_a_short_label_value_that_keeps_the_unique_tail():
    assert run_label("20261204-060855-existing-small-a1b2c3") == "20261204-060855-existing-small-a1b2c3"
    long = run_label("20261204-060855-" + "x" * 60 + "-Q_9f00aa")
    assert len(long) <= 40 and long.endswith("x-q-9f00aa") and long[0].isalnum()
    assert run_label("---") == "run"


def test_cluster_usage_errors_are_one_line(tmp_path):
    env = {"GANGSTORM_CLUSTERS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    refused(gangstorm("cluster", "down", "kube", "--nodes", "4", env=env),
            "--nodes/--scenario/--ray-nodes: only used with `cluster up`")
    refused(gangstorm("cluster", "up", "kube", "--name", "a b", env=env), "--name: expected letters, digits and '-'")
    r = gangstorm("cluster", "status", "slurm", env=env)
    assert r.returncode == 3 and r.stdout.strip() == "slurm cluster 'default': not up"
    r = gangstorm("cluster", "down", "ray", env=env)
    assert r.returncode == 0 and "no ray cluster 'default'" in r.stdout


def test_dry_run_names_what_the_run_would_create_and_disrupt():
    sc = load_with_overrides(SCENARIO)
    plan = plan_run(sc)
    text = describe(plan, ["kube", "ray"], "lbl", {"kube": ["apiserver ready"]}, 60.0, attached=True)
    assert "gangstorm.io/run=lbl on the existing cluster" in text
    assert "  found: apiserver ready" in text
    n, members = len(plan.jobs), sum(j.members for j in plan.jobs)
    assert f"would create: {n} jobs with {members} members, one pod per member" in text
    assert "would disrupt: fail 1 of its own fake nodes" in text               # kube
    assert "would disrupt: skip: fail 1 of its own fake nodes" in text         # ray attached: not run
    lines = chaos_lines(chaos_plan([{"kind": "etcd_pressure", "at_s": 60.0, "until_s": None, "bytes": 2**30,
                                     "object_bytes": 2**20, "recover_after_s": 60.0}], 4, 8, 3600.0, 1), 60.0)
    assert lines == ["write 1,024 MiB of labelled ConfigMaps (etcd quota pressure), at 1 s",
                     "delete its ConfigMaps, compact and defragment etcd, at 2 s"]


def test_dry_run_on_the_simulator_touches_nothing_and_exits_zero(tmp_path):
    r = gangstorm("run", SCENARIO, "--dry-run", "--out", str(tmp_path / "out"))
    assert r.returncode == 0 and r.stdout.startswith("dry run: nothing was created")
    assert not (tmp_path / "out").exists()
