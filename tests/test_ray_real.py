"""Real Ray: placement-group gangs on a local fleet of fake-GPU raylets (all on 127.0.0.1).

One fleet of NODES raylets serves the whole module (booting raylets is the slow part); tests run
in file order and the last one stops it and checks that no Ray process is left. The gang, chaos and
clean-up checks are support/ray_gangs.py's, run on the fakelet fleets too.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fakes.real.procfs import listeners, peers
from fakes.real.procs import session_pids
from loadgen.model.fleet import Fleet
from loadgen.model.target import TargetContext
from support import ray_gangs
from support.ray_fleet import NODES, ray_or_fail, started

pytestmark = pytest.mark.real

CONFIG = {"multi_node_strategy": "STRICT_SPREAD", "single_node_strategy": "PACK"}


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    ray_or_fail()
    yield from started(TargetContext(fleet=Fleet(nodes=NODES, leaf_size=4), config=dict(CONFIG), control_plane={},
                                     seed=7, run_dir=tmp_path_factory.mktemp("ray-real")))


def test_target_module_does_not_import_ray():
    # The Locust driver imports the target in a gevent-patched process: ray must stay out of it.
    code = ("import sys, fakes.ray.target, fakes.ray.fleet; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1]).returncode == 0


def test_every_listener_and_peer_on_loopback(target):
    pids = [p for s in target.sessions for p in session_pids(s)]
    socks = listeners(pids)
    names = {Path(f"/proc/{p}/comm").read_text().strip() for _, _, p in socks if Path(f"/proc/{p}").exists()}
    assert len(socks) >= 3 * NODES, f"too few listeners found: {socks}"
    assert {a for a, _, _ in socks} == {"127.0.0.1"}, f"non-loopback listeners: {socks}"
    assert "raylet" in names and "gcs_server" in names, names
    remote = peers(pids)
    assert remote, "expected connections between the Ray processes"
    assert {a for _, a, _, _ in remote} == {"127.0.0.1"}, f"traffic off loopback: {remote}"


def test_bimodal_trace_all_gangs_admitted(target):
    ray_gangs.bimodal_trace_all_gangs_admitted(target)


def test_raylet_kill_reschedules_the_gangs_bundle(target):
    ray_gangs.raylet_kill_reschedules_the_gangs_bundle(target)


def test_prefill_pins_bundles_and_node_recover(target):
    ray_gangs.prefill_pins_bundles_and_node_recover(target)


def test_evict_restarts_the_whole_group(target):
    ray_gangs.evict_restarts_the_whole_group(target)


def test_stop_leaves_no_ray_process(target):
    ray_gangs.stop_leaves_no_ray_process(target)
