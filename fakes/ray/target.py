"""RealRay: gangs as Ray placement groups on a local fleet of fake-GPU raylets.

A gang is one placement group of `members` bundles {GPU: gpus_per_member, CPU: cpus_per_member}
(a member with a share asks for its fraction, {GPU: 0.25}: fakes/ray/share.py),
strategy multi_node_strategy for multi-member gangs, single_node_strategy for 1-member jobs (the
same ctx.config keys the simulated ray reads). Admission = job.submit_s to the moment pg.ready()
resolves; the group is held for job.duration_s and then removed.

Placement-to-ready (ctx.startup.image with an image or a container start): once a group is CREATED,
the target's image model (fakes/ray/readiness.py) gives each bundle's ready time and the driver
starts one actor per bundle that is up no earlier than that (fakes/ray/members.py); READY is when
the last one answers. Without it no actor runs and READY is the ADMITTED instant. restart() sends a
running gang back as a whole: its actors and group are removed and the group created again.

This module never imports ray: the fleet's launcher (fakes/ray/serve.py, through RayFleet) and the
driver (fakes/ray/driver.py) each run in their own session, so the target works from a
gevent-patched Locust process too. All I/O here is non-blocking pipe reads in advance().

Fakelets (ctx.config nodes: fakelet, fakes/ray/fakelets/): the fleet's nodes are fake raylets
that the real GCS schedules groups on, up to fleet_settings.MAX_FAKELETS on one machine; the driver, the head and
everything above stay as they are. Nothing can run on a fakelet, so a startup section with an image
(one actor per bundle) is refused there.

Attached (ctx.existing.ray_address, fakes/ray/attach.py): no fleet is launched; the driver connects
to that GCS, scenario node i is the i-th alive GPU node by name, every group is named
gs-<run label>-<id>, stop() removes them all and never stops the cluster, and preflight() (a
read-only survey subprocess) refuses foreign workloads unless allowed. node_fail/node_recover
raise ChaosUnsupported there (gangstorm does not own the raylets).

Several Locust processes on one attached cluster (ctx.role, fakes/ray/real/shared.py): "submit"
processes' drivers own their groups and poll nothing; the one "observe" process's driver polls the
GCS's placement group table for the whole run, and its target runs the chaos plan (evict is
refused there: the groups belong to the submitters' drivers) and counts what is left at stop."""
from __future__ import annotations

import itertools
import queue
from collections import deque
from pathlib import Path
from typing import Any

from fakes.ray.fleet import RayFleet
from fakes.ray.fleet_settings import fleet_settings
from fakes.ray.pipe import JsonPipe
from fakes.ray.readiness import Readiness
from fakes.ray.real.chaos import RayChaos
from fakes.ray.real.cluster import RayCluster
from fakes.ray.real.common import COUNTERS
from fakes.ray.real.groups import RayGroups
from fakes.ray.real.shared import RayShared
from fakes.ray.real.slices import RaySlices
from fakes.ray.real.usage import RayUsage
from fakes.ray.share import check_fleet
from fakes.ray.traits import RayTraits
from fakes.real.base import RealTarget
from loadgen.model.errors import UserError
from loadgen.model.job import Job
from loadgen.model.target import TargetContext, run_label


class RealRay(RayTraits, RayCluster, RayGroups, RayShared, RayChaos, RaySlices, RayUsage, RealTarget):
    name = "ray"

    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        check_fleet(ctx.fleet)
        self.n = ctx.fleet.nodes
        self.run_dir = Path(ctx.run_dir) if ctx.run_dir else None
        self.settings = fleet_settings(self.cfg, self.n)
        self.nodes_kind, self.fakelet_syncer = self.settings.kind, self.settings.syncer
        self.gcs_load_poll_ms = self.settings.gcs_load_poll_ms
        self.fleet = RayFleet(ctx.fleet, workdir=self.run_dir, kind=self.nodes_kind, syncer=self.fakelet_syncer,
                              per_process=self.settings.per_process, gcs_config=self.settings.gcs_config,
                              front=self.settings.front_binary(),
                              boot_timeout_s=max(600.0, self.n * 0.1))   # the nodes of the base's fleet model
        self.existing = ctx.existing if ctx.existing and ctx.existing.ray_address else None
        self.label = run_label(ctx.run_id)
        self.address = ""                                        # the GCS the driver connects to
        self.left_behind: dict[str, int | None] | None = None   # attached: what stop() could not remove
        self.node_ids: list[str] = []                            # attached: cluster node per scenario node
        self.proc = None                                         # the driver process
        self.driver: JsonPipe | None = None
        self.dead = self.down                                    # nodes whose raylet chaos killed
        self.jobs: dict[int, Job] = {}                 # submitted, not finished or failed
        self.pending: dict[int, Job] = {}              # submitted, not (or no longer) ready
        self.running: dict[int, list[int]] = {}        # job id -> node index per bundle
        self.partial: dict[int, int] = {}              # job id -> members still bound while rescheduling
        self.lost_bundles: dict[int, set[int]] = {}    # job id -> bundles a dead raylet held, until placed again
        self.placed: dict[int, list[int]] = {}         # job id -> node index per bundle, first admission
        self.prefill: dict[int, tuple[int, int]] = {}  # prefill id -> (node, gpus), held
        self._prefill_wanted: dict[int, tuple[int, int]] = {}
        self._prefill_ids = itertools.count(-1, -1)
        self.node_index: dict[str, int] = {}
        self._restarted: queue.SimpleQueue = queue.SimpleQueue()   # (node, node id or None, error)
        self.ready_t: deque[float] = deque(maxlen=100_000)
        self.sched_ms: list[float] = []                # GCS's own per-group scheduling latency
        self.e2e_ms: list[float] = []                  # GCS: creation request to created (incl. retries)
        self.attempts: list[int] = []
        self.cp: dict[str, Any] = {}
        self.errors: list[str] = []
        self.node_fail_log: list[dict[str, Any]] = []
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._init_slices()
        self.readiness = Readiness(ctx.startup.image, self.n, ctx.seed)
        if self.nodes_kind == "fakelet" and self.readiness.active:
            raise UserError("schedulers.ray.nodes: fakelet cannot start members (no worker runs on a fake raylet); "
                            "drop startup.image or use nodes: raylet")
        self.member_pids: dict[int, list[int]] = {}    # job id -> pid of each member's actor worker, once READY
        self.role = ctx.role
        self.expected: dict[int, Job] = {}             # observe role: the jobs other processes submit
        self.group_of: dict[int, str] = {}             # observe role: job id -> its group's id, as last seen
        self.admitted_at: dict[int, float] = {}        # observe role: job id -> ADMITTED of the current group
        self.removed_unfinished = 0                    # observe role: groups removed before their hold ended
        if self.role != "all" and self.readiness.active:
            raise UserError("ray: several Locust processes on one cluster cannot start members (startup.image): "
                            "the member actors would need the group's owner; run one process")
