"""Submission: one sbatch per gang from a small thread pool, labelled with the run."""
from __future__ import annotations

import math

from fakes.slurm import gres, prolog
from fakes.slurm.real.tracked import Tracked
from loadgen.model.events import Event
from loadgen.model.job import Job


class SlurmSubmit:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    # ---- submission ------------------------------------------------------------------------
    def sbatch_argv(self, job: Job) -> list[str]:
        limit_min = max(1, math.ceil(job.duration_s * float(self.cfg.get("time_limit_factor", 1.5)) / 60))
        opts = ["--requeue", f"--time={limit_min}", f"--nodes={job.members}", "--ntasks-per-node=1",
                *gres.request(job.gpu_share, job.gpus_per_member, self.fleet, job.gpu_models)]
        if job.tenant and not self.attached:      # an existing cluster may enforce its own accounts
            opts.append(f"--account={job.tenant}")
        if job.whole_node:
            opts.append("--exclusive")
        elif job.cpus_per_member:
            opts.append(f"--cpus-per-task={job.cpus_per_member}")
        switches = int(self.cfg.get("switches", 0) or 0)
        if switches > 0 and job.members >= int(self.cfg.get("switches_min_members", 8)):
            wait = int(round(float(self.cfg.get("switches_max_wait_s", 300)) / float(self.ctx.time_scale or 1.0)))
            opts.append(f"--switches={switches}@{wait // 60}:{wait % 60:02d}")
        argv = self.client.batch_argv(f"{self.prefix}{job.id}", job.duration_s, *self._scope(), *opts)
        if self.prolog_path is not None:    # hold for the duration counted from allocation, pull included
            assert argv[-2] == "--wrap", argv
            argv[-1] = prolog.job_command(self.prolog_path, job.duration_s)
        return argv

    def submit(self, job: Job, now: float) -> list[Event]:
        self.clock.sync(now)
        self.jobs[job.id] = tr = Tracked(job)
        self._count_shape(job)
        self._sbatch(tr, self.sbatch_argv(job))
        return self._take()

    def _sbatch(self, tr: Tracked | None, argv: list[str], gpus: int = 0) -> None:
        """sbatch on the pool; the outcome reaches _observe. tr=None: a prefill job of `gpus`."""
        def call() -> None:
            sid, err = self.client.sbatch(argv, self._stop)
            self._sbatched.put((tr, sid, self.clock.now(), err, gpus))
            if self.ready is not None and sid is not None:      # after put: a report never precedes it
                self.ready.register(sid, workload=tr is not None)
        self._inflight += 1
        self._pool.submit(call)
