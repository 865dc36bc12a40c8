"""What a Ray fleet of N nodes is started with, from the scenario's schedulers.ray keys: pure.

Shared by the run target (fakes/ray/target.py) and `gangstorm cluster up ray` (fakes/ray/launch.py),
so a cluster that outlives the command is the fleet a run would have started.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from loadgen.model.errors import UserError

MAX_RAYLETS = 256
MIB_PER_RAYLET = 200          # measured PSS per raylet with its two agents: ~150 MiB (docs/ray.md)
MAX_FAKELETS = 20_000
# measured at 1,000 nodes: ~0.12 MB per fakelet in its process, ~0.17 MB per node in the GCS
# (docs/design/ray-fakelets.md (c)); rounded up
MIB_PER_FAKELET = 0.5
# "auto" GetResourceLoad period: Ray's 1 s up to this many fakelets, then one poll per node per
# (nodes / this) s, i.e. about this many polls a second: a 2-core machine's Python fleet falls behind
# the GCS's health checks at 5,000 nodes polled every second (docs/ray-fakelets.md)
FAKELET_LOAD_POLLS_PER_S = 1000
FAKELET_NODE_STREAMS_UP_TO = 256   # "auto": one resource-view stream per fakelet up to this many (quadratic fan-out)
# "auto" front: Python's own gRPC servers up to this many fakelets (the size the fakelets were
# calibrated and run at, docs/ray-fakelets.md), fakelet-front above: at 10,000 nodes the Python
# servers spend about a core on health checks and load polls alone
FAKELET_PYTHON_FRONT_UP_TO = 1000


@dataclass(frozen=True)
class FleetSettings:
    kind: str                    # raylet | fakelet
    syncer: str                  # fakelets: node | shared
    per_process: int             # fakelets per process
    gcs_load_poll_ms: int
    gcs_config: dict[str, str] = field(default_factory=dict)   # RAY_<setting> for the head's processes
    front: str = "python"        # fakelets: python (grpc.aio servers) | go (fakelet-front answers health and load)

    @property
    def fake(self) -> bool:
        return self.kind == "fakelet"

    def front_binary(self) -> str | None:
        """fakelet-front's path with front go (UserError, one line, when it is not built), else None."""
        if not self.fake or self.front != "go":
            return None
        from fakes.ray.fakelets.front import binary_path, missing_message
        path = binary_path()
        if not path.exists():
            raise UserError(missing_message(path))
        return str(path)

    def capacity_error(self, nodes: int, avail_mib: int | None) -> str | None:
        """Why one machine cannot hold this fleet, or None."""
        most, what = (MAX_FAKELETS, "fakelets") if self.fake else (MAX_RAYLETS, "raylets")
        if nodes > most:
            return (f"{nodes} {what} is beyond what one machine holds (max {most}); pass a smaller --nodes"
                    + ("" if self.fake else " or schedulers.ray.nodes: fakelet"))
        need = int(2 * MIB_PER_RAYLET + nodes * (MIB_PER_FAKELET if self.fake else MIB_PER_RAYLET))
        if avail_mib is not None and need > avail_mib:
            return f"{nodes} {what} need ~{need} MiB, {avail_mib} MiB available; pass a smaller --nodes"
        return None


def fleet_settings(cfg: dict, nodes: int) -> FleetSettings:
    kind = cfg.get("nodes", "raylet")
    syncer = cfg.get("fakelet_syncer", "auto")
    if syncer == "auto":
        syncer = "node" if nodes <= FAKELET_NODE_STREAMS_UP_TO else "shared"
    poll = cfg.get("gcs_load_poll_ms")
    if poll is None:
        poll = 1000 if kind == "raylet" else max(1000, round(nodes * 1000 / FAKELET_LOAD_POLLS_PER_S))
    poll = int(poll)
    front = cfg.get("fakelet_front", "auto")
    if front == "auto":
        front = "python" if nodes <= FAKELET_PYTHON_FRONT_UP_TO else "go"
    return FleetSettings(kind=kind, syncer=syncer, per_process=int(cfg.get("fakelets_per_process", 2000)),
                         gcs_load_poll_ms=poll, front=front,
                         gcs_config={} if poll == 1000
                         else {"RAY_gcs_pull_resource_loads_period_milliseconds": str(poll)})
