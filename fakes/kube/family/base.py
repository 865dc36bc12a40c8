"""What the real kube and Volcano adapters share: a KWOK cluster, one pod watch, etcd and node chaos.

The real counterpart of fakes/sim/kubefamily.py, split by concern the way KWOK splits its runtime
base: cluster.py brings the cluster up (fakes/kube/cluster.py) with the scenario's apiserver flags
and etcd quota, registers the fleet as KWOK nodes and waits until they are Ready; watch.py turns
each pod change into GPUs held per node and into gang events (BOUND per member, ADMITTED and
STARTED once min_available members are bound, FINISHED once every member Succeeded, EVICTED and
REQUEUED when a bound member is lost); calls.py runs client calls on a pool (pods and gang
objects are POSTed through fakes/kube/poster.py) and reports back through the same inbox as the
watch, so job state stays on the caller's thread; scrape.py keeps apiserver, etcd and scheduler
figures; chaos.py and cleanup.py do what their names say.

A subclass implements:
  submit(job, now)               create the job's objects on self.pool (events via _emit)
  scheduler_profile()            KubeSchedulerConfiguration for kube-scheduler, or None to run none
  cluster_options()              more ClusterSpec fields (feature gates, runtime config, scheduler binary)
  _start_scheduler(run_dir)      start a scheduler of its own once the nodes are Ready
  _scheduler_figures()           the scheduler's /metrics, condensed
  _lost(gang, t, pod, reason)    a bound member went away (it calls _requeue)
  _delete(gang)                  remove an ended gang's objects (on the pool)
"""
from __future__ import annotations

import itertools
import queue
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from fakes.kube import chaos as cluster_chaos
from fakes.kube.cluster import KubeCluster
from fakes.kube.family.calls import ClientCalls
from fakes.kube.family.chaos import ClusterChaos
from fakes.kube.family.cleanup import Cleanup
from fakes.kube.family.cluster import ClusterSetup
from fakes.kube.family.gang import NS, Gang
from fakes.kube.family.scrape import ControlPlaneScrape
from fakes.kube.family.watch import PodEvents
from fakes.kube.pods import PodView, PodWatch
from fakes.kube.poster import JsonPoster
from fakes.real.base import RealTarget
from loadgen.model.job import Job
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.target import TargetContext, run_label


class RealKubeFamily(ClusterSetup, PodEvents, ClientCalls, ControlPlaneScrape, ClusterChaos, Cleanup, RealTarget):
    def __init__(self, ctx: TargetContext):
        super().__init__(ctx)
        self.cp = dict(ctx.control_plane or {})
        self.rng = random.Random(ctx.seed)
        self.gangs: dict[int, Gang] = {}                # job id -> every live job
        self.pods: dict[str, PodView] = {}              # uid -> latest view, until deleted
        self.used = np.zeros(self.fleet.nodes, dtype=np.int32)
        # An existing cluster (--kubeconfig): everything the run creates carries the run label and
        # lives in namespaces of its own; its nodes are either created here (run-labelled, driven
        # by a kwok of its own) or chosen with --node-selector. stop() deletes all of it.
        self.existing = ctx.existing if ctx.existing and ctx.existing.kubeconfig else None
        self.label = run_label(ctx.run_id)
        self.ns = f"gangstorm-{self.label}"[:63].rstrip("-") if self.existing else NS
        self.fill_ns = f"{self.ns}-fill"[:63] if self.existing else cluster_chaos.FILL_NS
        self.node_names = [self.fleet.node_name(i) for i in range(self.fleet.nodes)]
        self.node_selector: dict[str, str] = {}             # pods go only to the run's nodes
        self.left_behind: dict[str, int] | None = None      # labelled objects still there after stop()
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        self.role = ctx.role
        self.expected: dict[int, Job] = {}               # observe role: jobs other processes send
        self.ended: set[int] = set()                     # finished, failed or rejected job ids
        self.figures: dict[str, Any] = {}
        self.readmission_s: list[float] = []            # lost members -> admitted again
        self.cluster: KubeCluster | None = None
        self.api = None                                 # kubernetes CoreV1Api
        self.poster: JsonPoster | None = None           # pod and gang-object creates (fakes/kube/poster.py)
        self.pool: ThreadPoolExecutor | None = None
        self._chaos_pool: ThreadPoolExecutor | None = None
        self.watch: PodWatch | None = None
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()   # (fn, args) for the caller's thread
        self._stop = threading.Event()
        self._live: dict[str, Any] = {}
        self._final: dict[str, Any] | None = None
        self._prefills = itertools.count()
        self._tmp: str | None = None
        # Placement-to-ready: each bound pod's node pulls the image (loadgen/model/startup/imagecache.py,
        # time-scaled); KWOK's pod-ready-after Stage makes the pod Ready after the delay it computes.
        image = ctx.startup.image
        self.startup = image.pulls or image.container_start_s > 0
        self.images = ImageCache(image, self.fleet.nodes, ctx.seed)

    # --- subclass hooks ---------------------------------------------------------------------------
    def scheduler_profile(self) -> dict | None:
        return None

    def cluster_options(self) -> dict[str, Any]:
        """More ClusterSpec fields (feature gates, alpha API groups, another scheduler binary)."""
        return {}

    def _start_scheduler(self, run_dir: Path) -> None:
        """kube-scheduler, when there is one, came up with the cluster."""

    def _scheduler_figures(self) -> dict[str, Any]:
        return {}

    def _lost(self, gang: Gang, t: float, pod: PodView, reason: str) -> None:
        raise NotImplementedError

    def _delete(self, gang: Gang) -> None:
        raise NotImplementedError

    def _placed(self, t: float, pod: PodView) -> None:
        """A pod started holding its GPUs on a node."""

    def _released(self, t: float, pod: PodView) -> None:
        """A pod stopped holding its GPUs (it ended or was deleted)."""
