"""Ray, your own cluster, from the outside: the gangstorm CLI run in its own session with a time
bound, `cluster up ray` / `cluster down ray` (which kills and reports whatever down left), and the
small scenario the attach tests run against it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.ray.fleet import ray_processes
from fakes.ray.launch import marked_processes
from fakes.real.procs import alive
from support.paths import ROOT

NODES = 4
# ~150 jobs (1 and 4 GPUs, 2 x 8-GPU gangs) over 30 wall seconds, evictions from 5 s to 25 s, and
# one node failure (not run on an attached cluster: recorded as unsupported).
SCENARIO = """\
name: attach-small
seed: 5
duration_h: 0.5
drain_h: 0.1
warmup_h: 0
sample_every_s: 30
fleet: {nodes: 4}
workload:
  target_allocation: 0.6
  churn_multiplier: 4
  tenants: 2
  classes:
    small:
      share: 0.8
      shapes:
        - {members: 1, gpus: 1, weight: 0.5}
        - {members: 1, gpus: 4, weight: 0.5}
      duration_s: {median: 120, sigma: 0.5, max: 600}
    large:
      share: 0.2
      shapes:
        - {members: 2, gpus: 8, weight: 1}
      duration_s: {median: 180, sigma: 0.5, max: 600}
chaos:
  - kind: evictions
    at_s: 300
    until_s: 1500
    rate_per_h: 40
  - kind: node_failure
    at_s: 600
    nodes: 1
    recover_after_s: 300
"""


def gangstorm() -> list[str]:
    exe = Path(sys.executable).parent / "gangstorm"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "loadgen.cli.main"]


def run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """argv in its own session; on timeout the whole session is interrupted, then killed."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        pytest.fail(f"{' '.join(argv[:4])} did not finish within {timeout:.0f} s", pytrace=False)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _started_here(home: Path) -> list[int]:
    """Live processes that inherited GANGSTORM_CLUSTERS_DIR=home: every process the test's gangstorm
    commands started (launcher, raylets, agents, drivers), whatever their session."""
    mark = f"GANGSTORM_CLUSTERS_DIR={home}\0".encode()
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and mark in Path(f"/proc/{d}/environ").read_bytes() + b"\0" and alive(int(d)):
                found.append(int(d))
        except OSError:
            continue
    return found


def cluster_down(env: dict[str, str], state: dict, name: str = "default") -> list[str]:
    """`cluster down ray`, then whatever it left is killed here (no orphans) and reported."""
    r = run(gangstorm() + ["cluster", "down", "ray", "--name", name], env, 180)
    tmp = state.get("ray_tmpdir")
    left = [f"{p} {cmd[:100]}" for p, cmd in ray_processes(tmp)] if tmp else []
    left += [f"{p} (inherited RAY_TMPDIR)" for p in marked_processes(tmp)] if tmp else []
    left += [f"{p} (started by this test)" for p in _started_here(Path(env["GANGSTORM_CLUSTERS_DIR"]))]
    for p in [int(x.split()[0]) for x in left]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if r.returncode != 0:
        left.append(f"`cluster down ray` exited {r.returncode}: {r.stderr.strip()[-300:]}")
    return left


def cluster_up(flags: list[str], env: dict[str, str], state: dict, timeout: float = 600) -> None:
    """`cluster up ray FLAGS --json`; `state` is filled even when it fails (from the state file,
    when `up` got that far), so that the caller's finally can bring the cluster down."""
    r = run(gangstorm() + ["cluster", "up", "ray", *flags, "--json"], env, timeout)
    name = flags[flags.index("--name") + 1] if "--name" in flags else "default"
    state_file = Path(env["GANGSTORM_CLUSTERS_DIR"]) / f"ray-{name}" / "state.json"
    if state_file.exists():
        state.update(json.loads(state_file.read_text()))
    assert r.returncode == 0, f"cluster up failed ({r.returncode}): {r.stderr[-2000:]}"
    state.update(json.loads(r.stdout))


def write_scenario(tmp_path: Path) -> Path:
    p = tmp_path / "attach-small.yaml"
    p.write_text(SCENARIO)
    return p
