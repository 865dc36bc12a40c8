"""What the run holds and what the GCS reports: GPUs per node, live gangs, the driver's and the
fakelets' control-plane figures."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fakes.ray.real.common import _pct, _ray_version
from fakes.ray.real.shared import POLL_S
from fakes.ray.share import slice_figures
from fakes.ray.survey import pg_prefix
from loadgen.model.job import Job


class RayUsage:
    """Part of RealRay (fakes/ray/target.py); reads and sets its attributes."""

    # -- observation -------------------------------------------------------------------------
    def used_per_node(self) -> np.ndarray:
        used = np.zeros(self.n, dtype=np.int64)
        for gid, nodes in self.running.items():
            job = self.jobs.get(gid)
            for n in nodes:
                if job and 0 <= n < self.n:
                    used[n] += job.gpus_per_member
        for node, gpus in self.prefill.values():
            used[node] += gpus
        used[sorted(self.dead)] = 0        # a killed raylet's reservations are gone with it
        return np.minimum(used, self.ctx.fleet.gpus_per_node)

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        return ((job, self.partial.get(gid, 0), gid not in self.pending) for gid, job in self.jobs.items())

    def live_control_plane(self) -> dict[str, Any]:
        gcs = self.cp.get("gcs_groups", {})
        since = self.clock.now() - 10.0
        return {"pending_groups": len(self.pending),
                "groups_per_s": round(sum(1 for t in reversed(self.ready_t) if t >= since) / 10.0, 3),
                "raylets_alive": self.cp.get("raylets_alive"),
                "gcs_pending_groups": gcs.get("PENDING", 0) + gcs.get("RESCHEDULING", 0),
                "infeasible_groups": gcs.get("INFEASIBLE", 0), **self._slices_read_back()}

    def _slices_read_back(self) -> dict[str, float]:
        """A fleet that shares GPUs, on fakelets: where the slices sit now, read from the fakelets'
        books (which GPU each bundle holds), so the run records slice-level allocation as the GCS
        and the raylet rules made it (fakes/ray/share.py slice_figures)."""
        if self.fleet.fakelets is None or not self.ctx.fleet.shared:
            return {}
        try:
            return slice_figures(self.fleet.gpu_slices() or [])
        except Exception as e:  # noqa: BLE001 - a sample is best effort; the run goes on
            self.errors.append(f"slices: {type(e).__name__}: {e}"[:300])
            return {}

    def control_plane(self) -> dict[str, Any]:
        self._observe(self.clock.now())
        if self.role == "submit":       # the cluster's figures come from the observing process, once
            return {}
        rt = np.array(self.ready_t)
        span = float(rt.max() - rt.min()) if len(rt) > 1 else 0.0
        return {
            "model": "real", "ray_version": _ray_version(),
            "nodes_kind": "attached" if self.existing else self.nodes_kind,
            "raylets": self.n, "raylets_alive": self.cp.get("raylets_alive"),
            **self._fakelet_figures(),
            "gcs_groups_by_state": self.cp.get("gcs_groups", {}),
            **self.counters,
            "groups_created": self.counters["groups_ready"],      # the simulated Ray's name for it
            "infeasible_groups": self.cp.get("gcs_groups", {}).get("INFEASIBLE", 0),
            "groups_per_s_mean": round(len(rt) / span, 3) if span > 0 else None,
            "gcs_scheduling_ms_p50": _pct(self.sched_ms, 50), "gcs_scheduling_ms_p99": _pct(self.sched_ms, 99),
            "gcs_creation_ms_p50": _pct(self.e2e_ms, 50), "gcs_creation_ms_p99": _pct(self.e2e_ms, 99),
            "scheduling_attempts_max": max(self.attempts) if self.attempts else None,
            "node_failures": self.node_fail_log,
            "fleet_boot_s": round(self.fleet.boot_s, 2) if self.fleet.boot_s else None,
            "attached": self.address if self.existing else None,
            "placement_group_prefix": pg_prefix(self.label),
            **({"role": "observe", "gcs_poll_s": POLL_S,
                "removed_unfinished": self.removed_unfinished} if self.role == "observe" else {}),
            **({"gpu_slices": self.slice_figures()} if self.slices is not None else {}),
            "errors": self.errors[-10:],
            **self.readiness.figures(),
            # the GCS's own scheduling latency of every created group, summed: its busy time
            "busy_s": {"gcs-placement-groups": round(sum(self.sched_ms) / 1000.0, 6)},
        }

    def _fakelet_figures(self) -> dict[str, Any]:
        shards = self.fleet.fakelets
        if shards is None:
            return {}
        try:
            stats = shards.stats()
        except Exception as e:  # noqa: BLE001 - the figures are best effort at the end of a run
            stats = {"error": f"{type(e).__name__}: {e}"}
        alive = self.cp.get("raylets_alive")
        if isinstance(stats.get("alive"), int) and alive is not None:
            # nodes the GCS declared dead while their fakelet was answering: the fleet fell behind
            stats["false_deaths"] = max(0, stats["alive"] - alive)
        return {"fakelets": {"syncer": self.fakelet_syncer, "front": self.settings.front,
                             "processes": len(shards.procs),
                             "gcs_load_poll_ms": self.gcs_load_poll_ms,
                             "boot_s": round(shards.boot_s, 2), "head_boot_s": round(self.fleet.head_boot_s, 2),
                             **stats}}
