"""`--dry-run`: what a run would create and disrupt, in words, from its plan and the targets' read-only
preflight. Pure: the caller collects the preflight lines; nothing here touches a cluster."""
from __future__ import annotations

from collections import Counter

from loadgen.input.plan import RunPlan
from loadgen.model.target import RUN_LABEL, ChaosAction

# what one job becomes on each backend
OBJECTS = {"kube": "one pod per member (no gang object)", "volcano": "one Volcano Job per job, one pod per member",
           "ray": "one placement group per job, one bundle per member",
           "slurm": "one sbatch job per job, one node per member",
           "kueue": "one Kueue pod group (Workload) per job, one gated pod per member"}

# Node chaos a backend does not run on a cluster it attached to, and why (recorded as unsupported).
NO_NODE_CHAOS_ATTACHED = {"ray": "gangstorm does not own the raylets, and Ray's drain removes a node for good"}


def describe(plan: RunPlan, names: list[str], label: str, preflight: dict[str, list[str]], scale: float,
             attached: bool) -> str:
    jobs, members = len(plan.jobs), sum(j.members for j in plan.jobs)
    window = plan.end_s / scale
    where = "on the existing cluster" if attached else "on clusters it starts and stops itself"
    out = [f"dry run: nothing was created. The run would label everything it creates {RUN_LABEL}={label} "
           f"{where}, and delete all of it at exit."]
    for name in names:
        out.append(f"{name}:")
        out += [f"  found: {line}" for line in preflight.get(name, [])]
        unit = "wall" if attached or scale != 1.0 else "simulated"
        out.append(f"  would create: {jobs:,} jobs with {members:,} members, {OBJECTS[name]}, "
                   f"over {window:,.0f} {unit} seconds")
        lines = chaos_lines(plan.chaos, scale)
        if attached and name in NO_NODE_CHAOS_ATTACHED:
            lines = [f"skip: {line} ({NO_NODE_CHAOS_ATTACHED[name]})"
                     if line.startswith(("fail ", "recover ")) else line
                     for line in lines]
        out += [f"  would disrupt: {line}" for line in lines] or ["  would disrupt: nothing (no chaos)"]
    return "\n".join(out)


def chaos_lines(chaos: list[ChaosAction], scale: float) -> list[str]:
    """One line per chaos kind: how often, when, and on what (only the run's own objects)."""
    by_kind: dict[str, list[ChaosAction]] = {}
    for a in chaos:
        by_kind.setdefault(a.kind, []).append(a)
    lines = []
    for kind, acts in by_kind.items():
        first, last = acts[0].t / scale, acts[-1].t / scale
        span = f"at {first:,.0f} s" if len(acts) == 1 else f"{len(acts)} times from {first:,.0f} s to {last:,.0f} s"
        if kind == "evict":
            n = sum(int(a.params.get("members", 1)) for a in acts)
            lines.append(f"evict {n} running members of its own jobs, {span}")
        elif kind in ("node_fail", "node_recover"):
            nodes = Counter(n for a in acts for n in a.params.get("nodes", []))
            verb = "fail" if kind == "node_fail" else "recover"
            lines.append(f"{verb} {len(nodes)} of its own fake nodes ({_few(sorted(nodes))}), {span}")
        elif kind == "etcd_fill":
            b = sum(int(a.params.get("bytes", 0)) for a in acts)
            lines.append(f"write {b / 2**20:,.0f} MiB of labelled ConfigMaps (etcd quota pressure), {span}")
        elif kind == "etcd_recover":
            lines.append(f"delete its ConfigMaps, compact and defragment etcd, {span}")
        elif kind == "prefill":
            g = sum(int(p[1]) for a in acts for p in a.params.get("placements", []))
            lines.append(f"pin {g:,} GPUs of small labelled jobs on its own nodes (fragmentation), {span}")
        else:
            lines.append(f"{kind} {span}")
    return lines


def _few(items: list, k: int = 6) -> str:
    shown = ", ".join(map(str, items[:k]))
    return shown + (f", ... {len(items) - k} more" if len(items) > k else "")
