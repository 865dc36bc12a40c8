"""Slurm's chaos kinds through scontrol: node failure and recovery (DOWN, RESUME; never a node a
foreign job runs on), member evictions (requeue) and prefill jobs."""
from __future__ import annotations

import math

from fakes.slurm.hostlist import expand
from fakes.slurm.real.tracked import Tracked
from loadgen.model.events import Kind
from loadgen.model.target import ChaosAction, ChaosUnsupported


class SlurmChaos:
    """Part of RealSlurm (fakes/slurm/target.py); reads and sets its attributes."""

    # ---- chaos -----------------------------------------------------------------------------
    def _nodes(self, action: ChaosAction) -> tuple[list[int], list[str]]:
        nodes = [int(i) for i in action.params.get("nodes", [])]
        return nodes, [self.names[i] for i in nodes]

    def _spare_foreign(self, nodes: list[int], names: list[str], now: float, kind: str) -> tuple[list[int], list[str]]:
        """Attached: drop the nodes a job without the run's label runs on (a DOWN node would kill it),
        recorded in chaos_skipped; ChaosUnsupported when none is left."""
        busy = {n for j in self.cluster.queued(names) if j.comment != self.comment for n in expand(j.nodelist)}
        busy &= set(names)
        if not busy:
            return nodes, names
        self.chaos_skipped.append({"t": round(now, 3), "kind": kind, "nodes": sorted(busy),
                                   "reason": "a job gangstorm did not create runs there"})
        keep = [(i, n) for i, n in zip(nodes, names) if n not in busy]
        if not keep:
            raise ChaosUnsupported(f"slurm/real: {kind} on {', '.join(sorted(busy))} skipped: a job gangstorm "
                                   f"did not create runs there (never touched on an existing cluster)")
        return [i for i, _ in keep], [n for _, n in keep]

    def _running(self) -> list[Tracked]:
        return [tr for tr in self.active.values() if tr.started and not tr.done]

    def _evict(self, victims: list[Tracked], now: float, reason: str) -> None:
        for tr in victims:
            tr.evicted = True
            self._emit(now, tr.job.id, Kind.EVICTED, 0, reason)

    def _chaos_node_fail(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        if self.attached:       # gangstorm does not own these slurmds: DOWN through scontrol only
            nodes, names = self._spare_foreign(nodes, names, now, "node_fail")
        else:
            self.cluster.kill_slurmds(names)
        self.client.set_nodes(names, "DOWN", "gangstorm-node_fail")
        self.held.update(dict.fromkeys(names, "DOWN"))
        self.down |= set(nodes)
        # Slurm requeues the whole batch job (--requeue): nothing stays bound, as in the sim.
        self._evict([tr for tr in self._running() if set(names) & set(tr.nodes)], now, "node_fail")

    def _chaos_node_recover(self, action: ChaosAction, now: float) -> None:
        nodes, names = self._nodes(action)
        names = [n for n in names if self.held.get(n) == "DOWN"]      # not those node_fail spared
        if not self.attached:
            for n in names:
                self.cluster.start_slurmd(n)
        if names:
            self.client.set_nodes(names, "RESUME")
        for n in names:
            del self.held[n]
        self.down -= set(nodes)

    def _chaos_evict(self, action: ChaosAction, now: float) -> None:
        """Drain the nodes of random running jobs covering `members` members and requeue the jobs;
        the nodes are resumed drain_s (wall seconds once time-scaled) later."""
        want, running = int(action.params.get("members", 1)), self._running()
        self.rng.shuffle(running)
        victims, got = [], 0
        for tr in running:
            if got >= want:
                break
            victims.append(tr)
            got += tr.job.members
        if not victims:
            return
        nodes = sorted({n for tr in victims for n in tr.nodes})
        self.client.set_nodes(nodes, "DRAIN", "gangstorm-evict")
        for n in nodes:
            self.held.setdefault(n, "DRAIN")
        self.client.requeue([tr.slurm_id for tr in victims])
        self.resume_at.append((now + float(action.params.get("drain_s", 10.0)) / float(self.ctx.time_scale or 1.0),
                               nodes))
        self._evict(victims, now, "evict")

    def _chaos_prefill(self, action: ChaosAction, now: float) -> None:
        dur = float(action.params.get("duration_s", 60))        # the runner already scaled it to wall seconds
        for node, gpus in action.params.get("placements", []):
            self._sbatch(None, self.client.batch_argv(
                f"gs-{self.label}-prefill", dur, *self._scope(), f"--nodelist={self.names[int(node)]}", "--nodes=1",
                f"--gres=gpu:{int(gpus)}", f"--time={max(1, math.ceil(dur / 60) + 1)}"), int(gpus))
