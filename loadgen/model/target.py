"""The Target interface every scheduler backend implements, simulated or real.

One measurement path, many backends: a runner (virtual-time or wall-clock) feeds jobs in with
`submit`, moves time with `advance`, injects chaos with `chaos`, samples state with `snapshot`,
and hands every returned Event to the recorder. Targets never read a clock of their own:
`now` is always passed in (virtual seconds for sim targets, wall seconds since run start for
real ones), so the same recorder and metrics work on both.

Sim targets finish jobs themselves (they know each job's duration); real targets hold the
allocation for the job's (already time-scaled) duration on the backend and report FINISHED
when the backend releases it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet
from loadgen.model.job import Job
from loadgen.model.startup.spec import StartupSpec


@dataclass(frozen=True)
class ChaosAction:
    """One timed chaos step. kind is one of CHAOS_KINDS; params depend on the kind."""
    t: float
    kind: str
    params: dict[str, Any] = field(default_factory=dict)


CHAOS_KINDS = (
    "evict",         # params: members (int): evict that many random running members
    "node_fail",     # params: nodes (list[int]): nodes go NotReady/DOWN, their jobs are lost
    "node_recover",  # params: nodes (list[int])
    "etcd_fill",     # params: bytes (int), object_bytes (int): large objects written to etcd
    "etcd_recover",  # compaction + defrag + alarm disarm
    "prefill",       # params: placements (list[[node, gpus]]), duration_s: pinned small jobs
)


@dataclass
class Snapshot:
    """State sampled by the runner at a fixed interval; feeds utilization and fragmentation."""
    t: float
    gpus_allocated: int          # GPUs held by anything (running jobs, partial gangs, reservations)
    gpus_partial: int            # GPUs held by gangs that are not yet fully bound
    gpus_stranded: int           # free GPUs no member of the smallest pending gang can use
    pending_jobs: int
    partial_gangs: int
    running_jobs: int
    control_plane: dict[str, Any] = field(default_factory=dict)
    # fleets with node pools only (GPU sharing), in GPUs: capacity_gpus, allocated_compute_gpus and
    # allocated_memory_gpus (slices at their compute / memory share), fragmented_gpus (ATC '23:
    # free capacity a task of the workload's shape mix cannot use), stranded_gpus (free capacity on
    # partly used GPUs that no pending member can use)
    gpu_sharing: dict[str, float] | None = None


@dataclass(frozen=True)
class Existing:
    """A cluster gangstorm did not start (`--kubeconfig`, `--slurm-conf`, `--ray-address`): where it
    is, which of its nodes gangstorm may drive, and whether it may run next to foreign workloads.

    A real target given one attaches instead of launching: it never stops the cluster, labels
    everything it creates with the run label, touches nothing else, and removes what it created
    on every exit path (see docs/existing-clusters.md)."""
    kubeconfig: str | None = None
    context: str | None = None
    node_selector: str | None = None   # kube family: drive existing fake nodes with these labels
    etcd_endpoint: str | None = None   # kube family: etcd for quota recovery (else via the apiserver)
    slurm_conf: str | None = None
    partition: str | None = None       # slurm: the partition whose nodes jobs and chaos use
    ray_address: str | None = None
    allow_foreign: bool = False        # run next to workloads gangstorm did not create


RUN_LABEL = "gangstorm.io/run"         # every object a run creates carries RUN_LABEL=<run label>


def run_label(run_id: str) -> str:
    """A run id as a label value and name fragment: [a-z0-9-], at most 40 characters, ends alnum."""
    out = "".join(c if c.isalnum() else "-" for c in run_id.lower())[-40:].strip("-")
    return out or "run"


@dataclass
class TargetContext:
    fleet: Fleet
    config: dict[str, Any]            # the scenario's schedulers.<name> section, defaults filled in
    control_plane: dict[str, Any]     # the scenario's control_plane section
    seed: int
    run_dir: Path | None = None       # where real backends put their config, logs and state
    time_scale: float = 1.0           # virtual seconds per wall second (real backends)
    existing: Existing | None = None  # attach to this cluster instead of launching one
    run_id: str = "gangstorm"         # run_label() of it labels what the run creates
    # Several Locust processes on one existing cluster: "submit" sends jobs and observes nothing,
    # "observe" sends nothing, watches the cluster once for all, runs chaos and cleans up; "all" both.
    role: str = "all"
    # Image pull, rendezvous and GPU activity (loadgen/model/startup/spec.py), already time-scaled for
    # a wall-clock backend. A target reports READY when every member's container runs.
    startup: StartupSpec = field(default_factory=StartupSpec.off)


class ClusterRefused(Exception):
    """An existing cluster cannot be used as asked (too few matching nodes, a scheduler that is not
    installed); str() is the one line the CLI prints (exit status 2), before anything is created."""


class ForeignWorkloads(ClusterRefused):
    """An existing cluster holds workloads gangstorm did not create and the user did not opt in."""


class ChaosUnsupported(Exception):
    """Raised by a target for a chaos kind its backend cannot express; the runner records it."""


class Target(ABC):
    name: ClassVar[str]       # "kube" | "volcano" | "ray" | "slurm"
    backend: ClassVar[str]    # "sim" | "real" (or a test double's own name)
    # "virtual": the runner jumps from event to event (simulated schedulers);
    # "wall": time passes for real, jobs and chaos are time-scaled onto the wall clock.
    timebase: ClassVar[str] = "wall"
    # Several Locust processes on one attached cluster can submit while one of them observes it
    # for all (a watch of the cluster's own objects); without it each process needs its own fleet.
    shares_one_watch: ClassVar[bool] = False

    # What the driver and the output ask of a scheduler without running it; each scheduler declares
    # these once for its simulated and real targets (fakes/<name>/traits.py).
    @classmethod
    def topology(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        """The scheduler's settings that decide how gangs land on the leaf/spine fabric."""
        return {}

    @classmethod
    def placement_policies(cls, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The placement policies the scheduler offers (GPU sharing results name them): policy name ->
        the settings of its scenario section that select it, starting from `cfg`."""
        return {"default": {}}

    @classmethod
    def placement_policy(cls, cfg: dict[str, Any]) -> str:
        """The name of the placement policy `cfg` selects (one of placement_policies' names)."""
        return "default"

    @classmethod
    def prometheus_queries(cls, window: str) -> dict[str, str]:
        """PromQL of the scheduler's own metrics over `window` (e.g. "300s"), beside gangstorm's."""
        return {}

    @classmethod
    def fleet_kind(cls, cfg: dict[str, Any]) -> str:
        """What the fleet's nodes are, when not the scheduler's usual ones (e.g. "fakelets")."""
        return ""

    def __init__(self, ctx: TargetContext):
        self.ctx = ctx
        self._out: list[Event] = []

    def _emit(self, t: float, job_id: int, kind: Kind, members: int = 0, reason: str = "",
              backend_t: float | None = None, nodes: tuple[int, ...] = ()) -> None:
        """Queue one event; submit/advance/chaos hand the queue to the runner (_take)."""
        self._out.append(Event(t, job_id, kind, members, reason, backend_t, tuple(nodes)))

    def _take(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    def start(self) -> None:  # noqa: B027 (optional hook: a target with nothing to bring up keeps the no-op)
        """Bring the backend up (real) or build the model state (sim)."""

    @abstractmethod
    def submit(self, job: Job, now: float) -> list[Event]:
        """Hand one job to the scheduler at `now`."""

    @abstractmethod
    def advance(self, now: float) -> list[Event]:
        """Run the scheduler up to `now` (sim) or drain what the backend reported (real)."""

    def next_wakeup(self) -> float | None:
        """Earliest time the target has something to do on its own (sim); None if idle or real."""
        return None

    def chaos(self, action: ChaosAction, now: float) -> list[Event]:
        """One dispatch for every backend: the method `_chaos_<kind>` does the work and queues
        its events; a target without that method does not support the kind."""
        handler = getattr(self, f"_chaos_{action.kind}", None)
        if handler is None:
            raise ChaosUnsupported(f"{self.name}/{self.backend} does not support chaos kind {action.kind!r}")
        handler(action, now)
        return self._take()

    def restart(self, job_id: int, now: float, reason: str) -> list[Event]:
        """Send a running gang back to its scheduler as a whole (a failed start under a requeue
        policy, loadgen/drive/lifecycle.py): EVICTED and REQUEUED now, ADMITTED again later."""
        raise ChaosUnsupported(f"{self.name}/{self.backend} cannot requeue a gang")

    @abstractmethod
    def snapshot(self, now: float) -> Snapshot:
        """Current allocation, partial gangs, stranded GPUs and control-plane figures."""

    def control_plane(self) -> dict[str, Any]:
        """Final control-plane figures for summary.json (RPC counts, etcd size, 429s, ...)."""
        return {}

    def after_stop(self) -> dict[str, Any]:
        """Figures only known once stop() ran: {"left_behind": {kind: count}} on an existing cluster
        (what the run created and could not delete; all zeros when clean)."""
        return {}

    def metrics_endpoints(self) -> list[dict[str, Any]]:
        """The backend's own Prometheus endpoints a scraper may read, once started: dicts with
        name, url and optionally cert_file, key_file, tls_insecure (loadgen/live/prometheus.py)."""
        return []

    def preflight(self) -> list[str]:
        """Read-only checks of an existing cluster before anything is created: lines saying what
        was found (nodes, foreign workloads, installed schedulers). Raises ForeignWorkloads when the
        cluster holds workloads not created by gangstorm and Existing.allow_foreign is False."""
        return []

    def stop(self) -> None:  # noqa: B027 (optional hook: a target with nothing to release keeps the no-op)
        """Release everything; real targets stop every process they started. On an existing
        cluster: delete every object carrying the run label, and report what could not be
        deleted in after_stop()["left_behind"]."""
