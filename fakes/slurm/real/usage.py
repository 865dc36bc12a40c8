"""What the run holds and what slurmctld reports: GPUs per node, live gangs, sdiag figures."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fakes.slurm.hostlist import expand
from fakes.slurm.real.tracked import RUNNING, lock_busy
from loadgen.model.job import Job


class SlurmUsage:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    # ---- state -----------------------------------------------------------------------------
    def _node_usage(self) -> dict[str, int]:
        """GPUs held per node name, as the last squeue listed them (prefill jobs included)."""
        used: dict[str, int] = {}
        for sid, row in self._rows.items():
            if row.state in RUNNING:
                tr = self.by_slurm.get(sid)
                per = tr.job.gpus_per_member if tr else self.prefill.get(sid, 0)
                for n in expand(row.nodelist):
                    used[n] = used.get(n, 0) + per
        return used

    def used_per_node(self) -> np.ndarray:
        used = np.zeros(self.fleet.nodes, dtype=np.int64)
        for name, gpus in self._node_usage().items():
            if name in self.index:          # attached: foreign jobs may run elsewhere in the cluster
                used[self.index[name]] += gpus
        return used

    def live_gangs(self) -> Iterable[tuple[Job, int, bool]]:
        return ((tr.job, 0, tr.started) for tr in self.jobs.values() if not tr.done)

    def live_control_plane(self) -> dict[str, Any]:
        return {"sbatch_inflight": self._inflight, "squeue_calls": self.client.calls("squeue"), **self._sdiag}

    def control_plane(self) -> dict[str, Any]:
        if self.role == "submit":       # the cluster's figures come from the observing process, once
            return {}
        d = self.client.sdiag()
        d["client"] = {**self.client.summary(), "submit_workers": self.workers, "poll_s": self.poll_s}
        d["fleet"] = {"nodes": self.fleet.nodes, "boot_s": getattr(self.cluster, "boot_s", None)}
        d["run_label"] = self.comment
        d.update(self._ready_figures(), restarts_requested=self.restarts)
        if self.slices is not None:
            d["gpu_slices_read"] = self.slice_figures()
        if self.attached:
            d["existing"] = {"slurm_conf": str(self.cluster.conf), "partition": self.partition,
                             "nodes": len(self.names), "excluded_nodes": len(self.excluded)}
            d["chaos_skipped"] = self.chaos_skipped
        d["lock_busy_s"], d["busy_s"] = lock_busy(d)
        return d
