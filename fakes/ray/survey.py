"""A read-only look at a running Ray cluster through its GCS: `python -m fakes.ray.survey ADDRESS`.

Prints one JSON object: the nodes (id, name, alive, GPUs, CPUs, draining), the placement groups
that are not REMOVED (id, name, state, GPUs, strategy), the live actors and the live jobs (drivers).
It reads the GCS tables the way `ray status` does (a GlobalState accessor), without ray.init: it
registers no job and creates nothing on the cluster.

The client side, survey(), runs it as a short-lived subprocess in its own session, because the
gangstorm process must never import ray (Locust's gevent patching hangs the Ray client), and
classify() splits what it found into the run's own, other gangstorm runs' and foreign workloads.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

from fakes.ray.fleet import FAKELET_LABEL, HEAD_NAME, RAY_ENV, REPO
from fakes.real.procs import stop

PG_PREFIX = "gs-"            # every placement group gangstorm creates: gs-<run label>-<job id>
JOB_MARK = "gangstorm.io/run"  # job metadata key the gangstorm driver sets (its run label)


class SurveyError(RuntimeError):
    pass


def pg_prefix(label: str) -> str:
    """Name prefix of the placement groups of the run labelled `label`."""
    return f"{PG_PREFIX}{label}-"


# -- client side (no ray) ---------------------------------------------------------------------
def survey(address: str, timeout: float = 60.0) -> dict[str, Any]:
    """What the GCS at `address` holds; SurveyError (one line) if it cannot be read."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except (OSError, ValueError) as e:
        raise SurveyError(f"no Ray GCS answers at {address} ({e.strerror or e})") from None
    proc = subprocess.Popen([sys.executable, "-m", "fakes.ray.survey", address], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **RAY_ENV, "RAY_gcs_rpc_server_reconnect_timeout_s": "10"},
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:      # a timeout, or Ctrl-C: the survey stops with us
        stop(proc.pid, grace_s=2.0)
        proc.wait()
        if isinstance(e, subprocess.TimeoutExpired):
            raise SurveyError(f"the Ray GCS at {address} did not answer within {timeout:.0f} s") from None
        raise
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        why = (err.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise SurveyError(f"could not read the Ray GCS at {address}: {why[:200]}")
    return json.loads(lines[-1])


def gpu_nodes(found: dict[str, Any]) -> list[dict[str, Any]]:
    """The alive, not draining nodes that declare GPUs, sorted by node name: scenario node i is the i-th."""
    return sorted((n for n in found["nodes"] if n["alive"] and not n["draining"] and n["gpus"] > 0),
                  key=lambda n: (n["name"], n["node_id"]))


def classify(found: dict[str, Any], label: str) -> dict[str, list[dict[str, Any]]]:
    """Placement groups, actors and jobs split into "own" (this run), "gangstorm" (other runs) and
    "foreign" (not created by gangstorm: never touched, and the run refuses them unless allowed)."""
    mine = pg_prefix(label)
    out: dict[str, list[dict[str, Any]]] = {"own": [], "gangstorm": [], "foreign": []}
    for pg in found["placement_groups"]:
        name = pg.get("name") or ""
        out["own" if name.startswith(mine) else "gangstorm" if name.startswith(PG_PREFIX) else "foreign"].append(
            {"kind": "placement group", **pg})
    for job in found["jobs"]:
        run = job.get("run")
        out["own" if run == label else "gangstorm" if run else "foreign"].append({"kind": "job", **job})
    for actor in found["actors"]:
        # gangstorm's only actors are gang members (fakes/ray/members.py), named like their group
        name = actor.get("name") or ""
        out["own" if name.startswith(mine) else "gangstorm" if name.startswith(PG_PREFIX) else "foreign"].append(
            {"kind": "actor", **actor})
    return out


def describe(w: dict[str, Any]) -> str:
    if w["kind"] == "placement group":
        return f"pg {w.get('name') or w['id'][:12]!r} {w['state']} {w['gpus']:g} GPU"
    if w["kind"] == "actor":
        return f"actor {w.get('name') or w['class']} {w['state']}"
    return f"job {w['job_id']} (driver pid {w.get('driver_pid')})"


# -- the subprocess (imports ray) -------------------------------------------------------------
def read(address: str) -> dict[str, Any]:
    import ray
    from ray._private.state import GlobalState
    from ray._raylet import GcsClientOptions
    from ray.core.generated import gcs_pb2
    state = GlobalState()
    state._initialize_global_state(GcsClientOptions.create(address, None, allow_cluster_id_nil=True,
                                                           fetch_cluster_id_if_nil=False))
    draining = _draining(address)
    nodes = [{"node_id": n["NodeID"], "name": n.get("NodeName") or "", "alive": bool(n.get("Alive")),
              "gpus": float(n.get("Resources", {}).get("GPU", 0)), "cpus": float(n.get("Resources", {}).get("CPU", 0)),
              "head": n.get("NodeName") == HEAD_NAME, "draining": n["NodeID"] in draining,
              "fakelet": (n.get("Labels") or {}).get(FAKELET_LABEL) == "true"}
             for n in state.node_table()]
    pgs = []
    for pg_id, row in state.placement_group_table().items():
        if row.get("state") == "REMOVED":
            continue
        pgs.append({"id": pg_id, "name": row.get("name") or "", "state": row.get("state"),
                    "strategy": row.get("strategy"),
                    "gpus": sum(float(b.get("GPU", 0)) for b in row.get("bundles", {}).values()),
                    "nodes": sorted(set(row.get("bundles_to_node_id", {}).values()))})
    actors = [{"id": a_id, "name": a.get("Name") or "", "class": a.get("ActorClassName") or "",
               "state": a.get("State"), "job_id": a.get("JobID")}
              for a_id, a in state.actor_table(None).items() if a.get("State") != "DEAD"]
    jobs = []
    for raw in state._connect_and_get_accessor().get_job_table(skip_submission_job_info_field=True,
                                                               skip_is_running_tasks_field=True):
        j = gcs_pb2.JobTableData.FromString(raw)
        if not j.is_dead:
            jobs.append({"job_id": j.job_id.hex(), "driver_pid": j.driver_pid,
                         "run": dict(j.config.metadata).get(JOB_MARK)})
    return {"address": address, "ray_version": ray.__version__, "nodes": nodes, "placement_groups": pgs,
            "actors": actors, "jobs": jobs}


def _draining(address: str) -> set[str]:
    try:
        from ray._raylet import GcsClient
        return {n if isinstance(n, str) else n.hex() for n in GcsClient(address=address).get_draining_nodes()}
    except Exception:  # noqa: BLE001 - an older GCS without the call: nothing reported as draining
        return set()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fakes.ray.survey GCS_ADDRESS", file=sys.stderr)
        return 2
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)           # whatever Ray prints stays out of the JSON
    try:
        found = read(argv[0])
    except Exception as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    out.write(json.dumps(found) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
