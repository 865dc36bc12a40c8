"""Prototype orchestrator: real head (GCS + 1 raylet), a fake-raylet fleet, a separate driver.

Every child runs in its own session; all are stopped (and checked gone) at the end.
  python proto.py basic --nodes 3            # register, STRICT_SPREAD 2x{GPU:8}, stats
  python proto.py kill --nodes 3             # + kill a fake node holding a bundle
  python proto.py mem --sizes 1,200,1000     # PSS of fleet and GCS per fleet size
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = "/work/main/.venv/bin/python"
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0",
    "RAY_enable_metrics_collection": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    "RAY_agent_register_timeout_ms": "120000",
}
CHILDREN: list[subprocess.Popen] = []
LOG = open(HERE / "proto-run.log", "a")


def log(*a):
    line = f"[{time.strftime('%H:%M:%S')}] " + " ".join(str(x) for x in a)
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def spawn(args, env, name):
    errf = open(HERE / f"{name}.stderr.log", "w")
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, env=env,
                         start_new_session=True, text=True, bufsize=1)
    CHILDREN.append(p)
    log(f"spawned {name} pid={p.pid} (own session)")
    return p


def readline(p, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"pid {p.pid} closed stdout (rc={p.poll()})")
            return line
        if p.poll() is not None:
            raise RuntimeError(f"pid {p.pid} exited rc={p.returncode}")
    raise TimeoutError(f"no line from pid {p.pid} in {timeout}s")


def read_event(p, want, timeout):
    deadline = time.monotonic() + timeout
    while True:
        line = readline(p, max(0.1, deadline - time.monotonic()))
        try:
            msg = json.loads(line)
        except ValueError:
            log("  (non-json)", line.rstrip()[:200])
            continue
        if want is None or msg.get("event") == want or want in msg:
            return msg


def send(p, **cmd):
    p.stdin.write(json.dumps(cmd) + "\n")
    p.stdin.flush()


def pss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return None


def rss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None


def session_procs(sid):
    out = subprocess.run(["ps", "-eo", "pid=,sid=,args="], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and int(parts[1]) == sid:
            rows.append((int(parts[0]), parts[2] if len(parts) > 2 else ""))
    return rows


def gcs_pid(head):
    for pid, cmd in session_procs(head.pid):
        if "gcs_server" in cmd.split()[0]:
            return pid


def cpu_ticks(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except OSError:
        return None


def gcs_nodes(addr, cluster_hex=None):
    import grpc
    from ray.core.generated import gcs_service_pb2 as gs
    ch = grpc.insecure_channel(addr)
    if cluster_hex is None:
        get_cluster_id = ch.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId",
                                        request_serializer=gs.GetClusterIdRequest.SerializeToString,
                                        response_deserializer=gs.GetClusterIdReply.FromString)
        cluster_hex = get_cluster_id(gs.GetClusterIdRequest(), timeout=10).cluster_id.hex()
    rep = ch.unary_unary("/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
                         request_serializer=gs.GetAllNodeInfoRequest.SerializeToString,
                         response_deserializer=gs.GetAllNodeInfoReply.FromString)(
        gs.GetAllNodeInfoRequest(), metadata=(("ray_cluster_id", cluster_hex),), timeout=30)
    ch.close()
    return rep.node_info_list


def stop_all():
    for p in CHILDREN:
        if p.poll() is None:
            try:
                p.stdin.close()        # head: Cluster.shutdown(); fleet: stops on EOF
            except Exception:
                pass
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(p.poll() is None for p in CHILDREN):
        time.sleep(0.3)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in CHILDREN:
            try:
                os.killpg(p.pid, sig)          # own session => pgid == pid
            except ProcessLookupError:
                pass
            for pid, _ in session_procs(p.pid):   # stragglers that left the group
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(1.0)
    left = [(p.pid, session_procs(p.pid)) for p in CHILDREN]
    log("left after stop:", [(sid, rows) for sid, rows in left if rows] or "none")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["basic", "kill", "mem"])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--sizes", default="1,200")
    ap.add_argument("--no-sync", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="r16-", dir="/tmp")
    env = {**os.environ, **RAY_ENV, "RAY_TMPDIR": tmp}
    log(f"=== proto {a.mode} nodes={a.nodes} sizes={a.sizes} no_sync={a.no_sync} tmp={tmp}")
    try:
        head = spawn([PY, str(HERE / "head.py")], env, f"head-{a.mode}")
        t = time.monotonic()
        h = read_event(head, "address", 240)
        log(f"head up in {time.monotonic() - t:.1f}s: {h}")
        addr = h["address"]
        gp = gcs_pid(head)
        log(f"gcs pid {gp} PSS {pss_kb(gp)} kB")
        head_info = [n for n in gcs_nodes(addr)][0]
        (HERE / "head_node_info.txt").write_text(str(head_info))

        sizes = [int(x) for x in a.sizes.split(",")] if a.mode == "mem" else [a.nodes]
        for n in sizes:
            args = [PY, str(HERE / "fakelet.py"), "--gcs", addr, "--nodes", str(n),
                    "--sync-channels", str(max(1, n // 100))] + (["--no-sync"] if a.no_sync else [])
            gcs_before = pss_kb(gp)
            fleet = spawn(args, env, f"fleet-{a.mode}-{n}")
            t = time.monotonic()
            reg = read_event(fleet, "registered", 600)
            log(f"fleet of {n}: registered in {reg['s']}s (wall {time.monotonic() - t:.1f}s): {json.dumps(reg)[:600]}")
            time.sleep(2)
            alive = [x for x in gcs_nodes(addr) if x.state == 0]
            log(f"GCS alive nodes: {len(alive)} (head + fakes)")
            if a.mode == "mem":
                time.sleep(8)
                c0f, c0g, t0 = cpu_ticks(fleet.pid), cpu_ticks(gp), time.monotonic()
                time.sleep(10)
                dt = time.monotonic() - t0
                hz = os.sysconf("SC_CLK_TCK")
                log(f"MEM n={n}: fleet PSS {pss_kb(fleet.pid)} kB RSS {rss_kb(fleet.pid)} kB; GCS PSS {pss_kb(gp)} kB "
                    f"(before fleet {gcs_before}); "
                    f"idle CPU over {dt:.0f}s: fleet {100 * (cpu_ticks(fleet.pid) - c0f) / hz / dt:.1f}%, GCS "
                    f"{100 * (cpu_ticks(gp) - c0g) / hz / dt:.1f}%; "
                    f"fds fleet {len(os.listdir(f'/proc/{fleet.pid}/fd'))} gcs {len(os.listdir(f'/proc/{gp}/fd'))}")
                d = subprocess.run([PY, str(HERE / "driver.py"), addr, "basic"], env=env,
                                   capture_output=True, text=True,
                                   timeout=600, start_new_session=True)
                log(f"driver at n={n} rc={d.returncode}: {d.stdout.strip()[-1500:]}")
                if d.returncode:
                    log("driver stderr:", d.stderr[-3000:])
                send(fleet, op="stats")
                log("fleet stats:", json.dumps(read_event(fleet, "stats", 30))[:1500])
                send(fleet, op="stop")
                read_event(fleet, "stopped", 60)
                continue
            d = subprocess.run([PY, str(HERE / "driver.py"), addr, "basic"], env=env, capture_output=True, text=True,
                               timeout=600, start_new_session=True)
            log(f"driver rc={d.returncode}: {d.stdout.strip()}")
            if d.returncode:
                log("driver stderr:", d.stderr[-4000:])
            send(fleet, op="stats")
            log("fleet stats:", json.dumps(read_event(fleet, "stats", 30)))
            if a.mode == "kill":
                drv = spawn([PY, str(HERE / "driver.py"), addr, "hold", "45"], env, "driver-hold")
                first = read_event(drv, "pg", 120)
                log("hold driver pg:", json.dumps(first))
                victim_id = sorted(first["pg"]["bundles_to_node"].values())[0]
                victim = next(x["i"] for x in reg["nodes"] if x["id"] == victim_id)
                send(fleet, op="kill", node=victim)
                k = read_event(fleet, "killed", 30)
                log(f"killed fake node {victim} ({victim_id}) at {k['t']:.3f}")
                res = read_event(drv, "pg_history", 120)
                log("hold driver after kill:", json.dumps(res))
                send(fleet, op="stats")
                log("fleet stats:", json.dumps(read_event(fleet, "stats", 30)))
        gl = Path(h["session_dir"]) / "logs" / "gcs_server.out"
        if gl.exists():
            (HERE / f"gcs_server-{a.mode}.out").write_text(gl.read_text(errors="replace"))
            log(f"copied {gl} -> gcs_server-{a.mode}.out")
        for f in (Path(h["session_dir"]) / "logs").glob("raylet.out"):
            (HERE / f"head_raylet-{a.mode}.out").write_text(f.read_text(errors="replace"))
    finally:
        stop_all()


if __name__ == "__main__":
    main()
