"""Bringing a Slurm cluster up or attaching to one, the read-only preflight, and stopping: on an
attached cluster, cancelling the run's jobs and resuming its nodes."""
from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fakes.slurm import prolog
from fakes.slurm.existing import NodeInfo
from fakes.slurm.real.tracked import _few
from loadgen.model.errors import BackendError
from loadgen.model.job import Job
from loadgen.model.signals import signals_held
from loadgen.model.target import RUN_LABEL, ClusterRefused, ForeignWorkloads


class SlurmCluster:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self.role != "all" and not self.attached:
            raise ValueError(f"slurm: the {self.role} role needs an existing cluster (--slurm-conf)")
        if self.attached and self.fleet.pools:
            raise ClusterRefused(f"{self.cluster.conf}: GPU sharing (fleet.pools) needs a cluster gangstorm "
                                 "launches: it writes the GRES each pool advertises")
        if self.attached:
            self._attach()
        else:
            if self.cfg.get("accounting_storage", "none") != "none":
                raise RuntimeError("slurm/real: accounting_storage 'slurmdbd' is simulated only: this backend "
                                   "runs no SlurmDBD (set schedulers.slurm.accounting_storage: none)")
            if self.ready is not None:      # the prolog names the service's port: bound first
                self.ready.start()
                prolog.write_script(self.prolog_path, self.ready.port)
            try:
                self.cluster.start(timeout_s=float(self.cfg.get("boot_timeout_s", 1200)))
            except BaseException:
                if self.ready is not None:
                    self.ready.stop()
                raise
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sbatch")
        if self.role != "submit":           # a submitter polls nothing: the observer's squeue sees its jobs
            self._watcher = threading.Thread(target=self._watch, name="squeue", daemon=True)
            self._watcher.start()

    def expect(self, jobs: dict[int, Job]) -> None:
        """Observe role: the jobs other processes submit; each is tracked from the first squeue
        that lists it by its name (SlurmWatch._adopt)."""
        self.expected = dict(jobs)

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._watcher is not None:
            self._watcher.join(timeout=30)
        if self.attached:
            if self.role != "submit":       # the observer cancels every job of the run, the submitters' too
                self._remove_own()
            return
        self.cluster.stop()
        if self.ready is not None:          # after the fleet: no prolog is left to ask
            self.ready.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- an existing cluster ---------------------------------------------------------------
    def preflight(self) -> list[str]:
        """Attached: read-only look at the partition and the queue (see Target.preflight)."""
        if not self.attached:
            return []
        part, nodes = self.cluster.nodes()
        jobs = self.cluster.queued()
        foreign = [j.id for j in jobs if not j.comment.startswith(RUN_LABEL + "=")]
        if foreign and not self.allow_foreign:
            raise ForeignWorkloads(f"{self.cluster.conf}: {len(foreign)} jobs gangstorm did not create (ids "
                                   f"{_few(foreign)}): pass --allow-foreign-workloads to run next to them "
                                   f"(they are never touched)")
        self._check_fits(part, nodes)
        states = ", ".join(f"{k} {s}" for s, k in sorted(Counter(n.state for n in nodes).items()))
        others = len(jobs) - len(foreign)
        n = self.fleet.nodes
        return [f"{len(nodes)} nodes in partition {part} ({states}), {len(foreign)} foreign jobs"
                + (f", {others} jobs of other gangstorm runs" if others else ""),
                f"the run drives {n} of them ({nodes[0].name} .. {nodes[n - 1].name}, {self.fleet.gpus_per_node} "
                f"GPUs each)" + (f"; its jobs exclude the other {len(nodes) - n}" if len(nodes) > n else "")]

    def after_stop(self) -> dict[str, Any]:
        return {} if self.left_behind is None else {"left_behind": self.left_behind, **self.left_detail}

    def _check_fits(self, part: str, nodes: list[NodeInfo]) -> None:
        n, g = self.fleet.nodes, self.fleet.gpus_per_node
        if len(nodes) < n:
            raise ClusterRefused(f"{self.cluster.conf}: partition {part} has {len(nodes)} nodes, the scenario's "
                                 f"fleet needs {n} (pass --nodes {len(nodes)} or fewer, or another --partition)")
        short = [x for x in nodes[:n] if x.gpus < g]
        if short:
            raise ClusterRefused(f"{self.cluster.conf}: partition {part}: node {short[0].name} has {short[0].gpus} "
                                 f"GPUs (gres), the scenario's nodes have {g} ({len(short)} such nodes among the "
                                 f"first {n})")

    def _attach(self) -> None:
        if self.role != "submit":          # the observer checked; a submitter's own run may already be queued
            self.preflight()                            # the same refusals when not started by the CLI
        self.partition, nodes = self.cluster.nodes()
        self._check_fits(self.partition, nodes)
        self.names = [x.name for x in nodes[:self.fleet.nodes]]
        self.excluded = [x.name for x in nodes[self.fleet.nodes:]]
        self.index = {name: i for i, name in enumerate(self.names)}

    def _scope(self) -> list[str]:
        """sbatch options every job of the run carries: its label and, attached, where it may run."""
        opts = [f"--comment={self.comment}"]
        if self.attached:
            opts.append(f"--partition={self.partition}")
        if self.excluded:
            opts.append(f"--exclude={','.join(self.excluded)}")
        return opts

    def _own_jobs(self) -> list[str]:
        return [j.id for j in self.cluster.queued() if j.comment == self.comment]

    def _remove_own(self) -> None:
        """Cancel every job carrying the run's label, resume every node it drained or downed, and
        record what is still there in left_behind. The cluster itself keeps running."""
        with signals_held():
            try:
                own = self._own_jobs()
                self.client.cancel(own)
                if self.held:
                    self.client.set_nodes(sorted(self.held), "RESUME")
                deadline = time.monotonic() + 30
                while True:
                    own = self._own_jobs()
                    stuck = [x.name for x in self.cluster.nodes()[1] if x.name in self.held
                             and ("drain" in x.state or "down" in x.state)]
                    if (not own and not stuck) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                self.left_behind = {"jobs": len(own), "nodes_not_resumed": len(stuck)}
                if own or stuck:
                    self.left_detail = {"left_behind_jobs": own[:50], "left_behind_nodes": stuck[:50]}
                self.held = {n: s for n, s in self.held.items() if n in stuck}
            except BackendError as e:       # the controller stopped answering: nothing could be counted
                self.left_behind = {"jobs": None, "nodes_not_resumed": None}
                self.left_detail = {"stop_error": str(e)}
