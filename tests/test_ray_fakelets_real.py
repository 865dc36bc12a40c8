"""Fakelets: fake raylets that the real Ray GCS schedules placement groups on.

The pure part (the bundle book, the syncer descriptor rebuilt from Ray's binaries) is checked with
exact numbers. The rest runs a real head (GCS + a resource-less raylet) with NODES fakelets and
runs on them the gang, chaos and clean-up checks test_ray_real.py runs on raylets
(support/ray_gangs.py): what holds for real raylets must hold for fakelets.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from fakes.ray.fakelets import wire
from fakes.ray.fakelets.book import Book
from fakes.real.procfs import listeners, peers
from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet
from loadgen.model.startup.spec import ImageSpec, StartupSpec
from loadgen.model.target import TargetContext
from support import ray_gangs
from support.fuzzkit import run_cli
from support.ray_fleet import NODES, ray_or_fail, started

PG = bytes(range(18))
NODE = {"GPU": 8.0, "CPU": 96.0}


# -- the wire: what the wheel has no stub for ---------------------------------------------------
def test_syncer_descriptor_matches_the_gcs_and_raylet_binaries():
    gcs = wire.gcs_binary()
    assert gcs.exists(), f"{gcs} missing: run `make venv` (pyproject depends on ray[default])"
    assert wire.matches_binary(gcs)
    assert wire.matches_binary(gcs.parents[1] / "raylet" / "raylet")


def test_health_request_names_the_node_and_answers_are_two_bytes():
    assert wire.health_service(b"\x0a\x04abcd") == "abcd"
    assert wire.health_service(b"") == ""
    assert (wire.SERVING, wire.NOT_SERVING) == (b"\x08\x01", b"\x08\x02")


def test_view_batch_is_never_empty_and_carries_the_version():
    with pytest.raises(ValueError):
        wire.batch([])
    batch = wire.batch([wire.view_message(b"n" * 28, 7, {"GPU": 8.0}, {"GPU": 8.0}, {"k": "v"})])
    assert len(batch.messages) == 1
    m = batch.messages[0]
    assert (m.version, m.message_type, m.node_id) == (7, wire.RESOURCE_VIEW, b"n" * 28)
    view = wire.ResourceViewSyncMessage.FromString(m.sync_message)
    assert dict(view.resources_available) == {"GPU": 8.0} and dict(view.labels) == {"k": "v"}


# -- the book: one node's bundle accounting ----------------------------------------------------
def test_prepare_commit_remove_returns_every_gpu():
    b = Book(NODE)
    assert b.prepare([((PG, 0), {"GPU": 3.0, "CPU": 36.0}), ((PG, 1), {"GPU": 2.0})])
    assert b.available["GPU"] == 3.0 and b.available["CPU"] == 60.0
    assert b.commit([(PG, 0), (PG, 1)]) == 2
    assert b.remove([(PG, 0), (PG, 1)]) == 2
    assert b.available == NODE and b.total == NODE and b.bundles == 0


def test_prepare_is_all_or_nothing():
    b = Book(NODE)
    assert not b.prepare([((PG, 0), {"GPU": 6.0}), ((PG, 1), {"GPU": 6.0})])
    assert b.available == NODE and b.bundles == 0
    assert b.prepare([((PG, 0), {"GPU": 8.0})])
    assert not b.prepare([((PG, 1), {"GPU": 1.0})])


def test_commit_adds_the_groups_formatted_resources_like_a_raylet():
    b = Book(NODE)
    b.prepare([((PG, 0), {"GPU": 2.0}), ((PG, 3), {"GPU": 1.0})])
    b.commit([(PG, 0), (PG, 3)])
    h = PG.hex()
    assert b.total[f"GPU_group_0_{h}"] == 2.0 and b.total[f"GPU_group_3_{h}"] == 1.0
    assert b.total[f"GPU_group_{h}"] == 3.0                  # the wildcard sums the node's bundles
    assert b.total[f"bundle_group_{h}"] == 2000.0
    b.remove([(PG, 0)])
    assert b.total[f"GPU_group_{h}"] == 1.0 and f"GPU_group_0_{h}" not in b.total
    b.remove([(PG, 3)])
    assert b.total == NODE


def test_release_unused_keeps_only_the_listed_bundles():
    b = Book(NODE)
    b.prepare([((PG, 0), {"GPU": 1.0}), ((PG, 1), {"GPU": 1.0}), ((PG, 2), {"GPU": 1.0})])
    b.commit([(PG, 0)])
    assert b.release_unused([(PG, 1)]) == 2
    assert list(b.prepared) == [(PG, 1)] and b.available["GPU"] == 7.0


def test_version_grows_once_per_change_and_not_on_a_no_op():
    b = Book(NODE)
    v = b.version
    b.prepare([((PG, 0), {"GPU": 1.0})])
    b.commit([(PG, 0)])
    b.commit([(PG, 0)])              # already committed: nothing changes
    b.remove([(PG, 9)])              # unknown bundle
    assert b.version == v + 2


# -- refusals ----------------------------------------------------------------------------------
def test_auto_settings_follow_the_fleet_size():
    from fakes.ray.fleet_settings import fleet_settings
    got = {n: (lambda s: (s.syncer, s.gcs_load_poll_ms, s.front, s.gcs_config))(fleet_settings({"nodes": "fakelet"}, n))
           for n in (8, 256, 257, 1000, 1001, 10000)}
    poll = "RAY_gcs_pull_resource_loads_period_milliseconds"
    assert got == {8: ("node", 1000, "python", {}), 256: ("node", 1000, "python", {}),
                   257: ("shared", 1000, "python", {}), 1000: ("shared", 1000, "python", {}),
                   1001: ("shared", 1001, "go", {poll: "1001"}), 10000: ("shared", 10000, "go", {poll: "10000"})}
    pinned = fleet_settings({"nodes": "fakelet", "fakelet_syncer": "node", "gcs_load_poll_ms": 1000,
                             "fakelet_front": "python"}, 10000)
    assert (pinned.syncer, pinned.gcs_load_poll_ms, pinned.front, pinned.gcs_config) == ("node", 1000, "python", {})


def test_fleets_beyond_one_machine_are_refused_with_the_limit():
    from fakes.ray.fleet_settings import fleet_settings
    fake, real = fleet_settings({"nodes": "fakelet"}, 1), fleet_settings({"nodes": "raylet"}, 1)
    assert fake.capacity_error(20_001, None) == ("20001 fakelets is beyond what one machine holds (max 20000); "
                                                 "pass a smaller --nodes")
    assert real.capacity_error(257, None) == ("257 raylets is beyond what one machine holds (max 256); pass a "
                                              "smaller --nodes or schedulers.ray.nodes: fakelet")
    assert fake.capacity_error(10_000, 5_000) == ("10000 fakelets need ~5400 MiB, 5000 MiB available; "
                                                  "pass a smaller --nodes")
    assert fake.capacity_error(20_000, None) is None and real.capacity_error(64, 64 * 200 + 400) is None


def test_members_on_fakelets_are_refused_in_one_line():
    from fakes.ray.target import RealRay
    ctx = TargetContext(fleet=Fleet(nodes=4), config={"nodes": "fakelet"}, control_plane={}, seed=0,
                        startup=StartupSpec(image=ImageSpec(image_gb=1.0)))
    with pytest.raises(UserError, match="schedulers.ray.nodes: fakelet cannot start members"):
        RealRay(ctx)


def test_ray_nodes_flag_takes_only_raylet_or_fakelet():
    o = run_cli(["run", "{dir}/s.yaml", "--ray-nodes", "x", "--out", "{dir}/out"],
                {"s.yaml": b"fleet: {nodes: 16}\n"})
    assert o.code == 2
    assert o.stderr.strip().endswith("argument --ray-nodes: expected one of raylet, fakelet, got 'x'")


# -- a real GCS scheduling on fakelets ----------------------------------------------------------

@pytest.fixture(scope="module")
def target(tmp_path_factory):
    ray_or_fail()
    yield from started(TargetContext(
        fleet=Fleet(nodes=NODES, leaf_size=4), control_plane={}, seed=7,
                                     run_dir=tmp_path_factory.mktemp("ray-fakelets"),
        config={"multi_node_strategy": "STRICT_SPREAD", "single_node_strategy": "PACK",
                "nodes": "fakelet", "fakelet_syncer": "node", "fakelets_per_process": 5}))


@pytest.mark.real
def test_fakelets_register_as_the_fleets_gpu_nodes(target):
    shards = target.fleet.fakelets
    assert len(shards.pids()) == 2, "8 nodes at 5 per process are two processes"
    assert [n["name"] for n in target.fleet.nodes] == [Fleet(nodes=NODES).node_name(i) for i in range(NODES)]
    deadline = time.monotonic() + 20
    while target.cp.get("raylets_alive") != NODES and time.monotonic() < deadline:
        target.advance(0.0)
        time.sleep(0.2)
    assert target.cp.get("raylets_alive") == NODES, target.cp


@pytest.mark.real
def test_every_fakelet_listens_and_talks_on_loopback_only(target):
    pids = target.fleet.fakelets.pids()
    socks = listeners(pids)
    assert len(socks) == NODES, f"one listening port per fakelet expected: {socks}"
    assert {a for a, _, _ in socks} == {"127.0.0.1"}
    remote = peers(pids)
    assert remote and {a for _, a, _, _ in remote} == {"127.0.0.1"}, f"traffic off loopback: {remote}"


@pytest.mark.real
def test_fakelet_processes_carry_no_raylet_node_id_flag(target):
    # the driver finds its local raylet by `--node_id` in the process list: only the head may match
    for pid in target.fleet.fakelets.pids():
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert "fakes.ray.fakelets.serve" in cmd and "node_id" not in cmd and "raylet" not in cmd


# test_ray_real's gang and chaos checks (support/ray_gangs.py) on the fakelet fleet, in this order:
# a bimodal trace, a killed node's bundle rescheduled by the GCS, prefill + node_recover, evict.
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
def test_the_gcs_made_no_call_a_fakelet_does_not_answer(target):
    stats = target.fleet.fakelets.stats()
    assert stats["unimplemented"] == {}, stats
    assert stats["calls"].get("/ray.rpc.NodeManagerService/PrepareBundleResources", 0) > 0
    assert stats["calls"].get("/grpc.health.v1.Health/Check", 0) > 0
    assert stats["views_sent"] > 0 and stats["syncer_messages_received"] > 0
    assert stats["loop_lag_max_s"] < 2.0
    assert stats["gc_frozen_objects"] > 0          # the long-lived fleet is out of the collector's reach


@pytest.mark.real
def test_stop_leaves_no_ray_process(target):
    ray_gangs.stop_leaves_no_ray_process(target)
