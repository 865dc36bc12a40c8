"""The compiled front of the fakelets (schedulers.ray.fakelet_front: go, fakes/ray/fakelets/front/):
fakelet-front answers health checks and load polls itself and forwards every other call to the
Python shard; a real GCS schedules on it exactly as on the Python servers (the gang, chaos and
clean-up checks of support/ray_gangs.py that test_ray_real runs on raylets), and nothing outlives
the shard. Needs `make fakelet-front`.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import grpc
import pytest

from fakes.ray.fakelets import wire
from fakes.ray.fakelets.front import Front, binary_path, missing_message
from fakes.real.procfs import listeners
from fakes.real.procs import session_pids
from loadgen.model.fleet import Fleet
from loadgen.model.target import TargetContext
from support import ray_gangs
from support.ray_fleet import NODES, ray_or_fail, started

LOAD = "/ray.rpc.NodeManagerService/GetResourceLoad"
PREPARE = "/ray.rpc.NodeManagerService/PrepareBundleResources"


def _front_or_fail():
    if not binary_path().exists():
        pytest.fail(missing_message(binary_path()), pytrace=False)


def _call(port: int, method: str, data: bytes) -> bytes:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        return ch.unary_unary(method)(data, timeout=5)


def test_front_answers_health_and_load_itself_and_forwards_the_rest(tmp_path):
    _front_or_fail()
    forwarded = []

    async def answer(node, method, data):
        forwarded.append((node, method, data))
        return (0, b"\x08\x01") if method == PREPARE else (12, b"")

    async def scenario():
        front = await Front(binary_path(), answer).start()
        try:
            port = await front.open(3, 0)
            front.set_load(3, b"load-bytes")
            loop = asyncio.get_running_loop()
            health = await loop.run_in_executor(None, _call, port, wire.HEALTH_CHECK, b"")
            load = await loop.run_in_executor(None, _call, port, LOAD, b"")
            prepared = await loop.run_in_executor(None, _call, port, PREPARE, b"\x0a\x00")
            with pytest.raises(grpc.RpcError) as unimplemented:
                await loop.run_in_executor(None, _call, port, "/ray.rpc.NodeManagerService/RequestWorkerLease", b"")
            calls = await front.calls()
            await front.close(3)
            with pytest.raises(grpc.RpcError) as closed:
                await loop.run_in_executor(None, _call, port, wire.HEALTH_CHECK, b"")
            return health, load, prepared, unimplemented.value.code(), calls, closed.value.code()
        finally:
            await front.stop()

    health, load, prepared, unimplemented, calls, closed = asyncio.run(scenario())
    assert (health, load, prepared) == (wire.SERVING, b"load-bytes", b"\x08\x01")
    assert unimplemented == grpc.StatusCode.UNIMPLEMENTED and closed == grpc.StatusCode.UNAVAILABLE
    assert calls == {wire.HEALTH_CHECK: 1, LOAD: 1}          # answered by the front, not forwarded
    assert forwarded == [(3, PREPARE, b"\x0a\x00"), (3, "/ray.rpc.NodeManagerService/RequestWorkerLease", b"")]


def test_front_exits_when_its_shard_dies():
    _front_or_fail()
    # the shard's stand-in: a Python process that starts the front and is then SIGKILLed
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE); "
            "print(p.pid, flush=True); time.sleep(60)")
    shard = subprocess.Popen([sys.executable, "-c", code, str(binary_path())], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        front_pid = int(shard.stdout.readline())
        os.kill(shard.pid, signal.SIGKILL)
        shard.wait(10)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{front_pid}") and time.monotonic() < deadline:
            try:
                os.waitpid(front_pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if open(f"/proc/{front_pid}/stat").read().split(") ")[1].startswith("Z"):
                break
            time.sleep(0.1)
        alive = os.path.exists(f"/proc/{front_pid}") and \
            not open(f"/proc/{front_pid}/stat").read().split(") ")[1].startswith("Z")
        assert not alive, "fakelet-front outlived its shard"
    finally:
        for pid in session_pids(shard.pid):
            os.kill(pid, signal.SIGKILL)


# -- a real GCS scheduling on fakelets behind the front ------------------------------------------

@pytest.fixture(scope="module")
def target(tmp_path_factory):
    ray_or_fail()
    _front_or_fail()
    yield from started(TargetContext(
        fleet=Fleet(nodes=NODES, leaf_size=4), control_plane={}, seed=7, run_dir=tmp_path_factory.mktemp("ray-front"),
        config={"multi_node_strategy": "STRICT_SPREAD", "single_node_strategy": "PACK", "nodes": "fakelet",
                "fakelet_syncer": "node", "fakelets_per_process": 5, "fakelet_front": "go"}))


@pytest.mark.real
def test_the_fronts_hold_every_listener_on_loopback(target):
    shards = target.fleet.fakelets.pids()
    fronts = [p for s in shards for p in session_pids(s) if p not in shards]
    assert len(fronts) == 2, f"one fakelet-front per shard expected: {fronts}"
    assert not listeners(shards), "the shards themselves listen on nothing"
    socks = listeners(fronts)
    assert len(socks) == NODES and {a for a, _, _ in socks} == {"127.0.0.1"}, socks


@pytest.mark.real
def test_bimodal_trace_all_gangs_admitted(target):
    ray_gangs.bimodal_trace_all_gangs_admitted(target)


@pytest.mark.real
def test_raylet_kill_reschedules_the_gangs_bundle(target):
    ray_gangs.raylet_kill_reschedules_the_gangs_bundle(target)


@pytest.mark.real
def test_prefill_pins_bundles_and_node_recover(target):
    ray_gangs.prefill_pins_bundles_and_node_recover(target)


@pytest.mark.real
def test_evict_restarts_the_whole_group(target):
    ray_gangs.evict_restarts_the_whole_group(target)


@pytest.mark.real
def test_health_checks_went_to_the_front_and_bundles_to_the_books(target):
    stats = target.fleet.fakelets.stats()
    assert stats["unimplemented"] == {}, stats
    assert stats["calls"].get(wire.HEALTH_CHECK, 0) > 0 and stats["calls"].get(LOAD, 0) > 0
    assert stats["calls"].get(PREPARE, 0) > 0 and stats["views_sent"] > 0


@pytest.mark.real
def test_stop_leaves_no_ray_process(target):
    ray_gangs.stop_leaves_no_ray_process(target)
