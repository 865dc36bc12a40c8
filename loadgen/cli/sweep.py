"""gangstorm sweep SPEC: a grid of runs (scenarios x schedulers x seeds x churn x profiles x nodes),
every cell a run folder, side by side on local cores or as tasks on a Ray cluster (docs/sweep.md)."""
from __future__ import annotations

import sys
from pathlib import Path

from loadgen.cli.common import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of scenarios x schedulers x seeds x churn x profiles x nodes, "
                       "cells side by side (local cores or a Ray cluster); rerun with the same --out to resume",
                       description="Every cell is a `gangstorm run` folder under OUT/cells/; OUT/index.jsonl lists "
                                   "the cells with their status, OUT/summary.json, summary.md and report.html compare "
                                   "them (medians and intervals over seeds). A killed sweep resumes: the same "
                                   "command with the same --out keeps every complete cell and runs the rest.")
    p.add_argument("spec", help="sweep spec YAML (docs/sweep.md)")
    p.add_argument("--out", help="sweep folder (default results/<time>-sweep-<name>); an existing sweep folder of "
                   "the same spec is resumed")
    p.add_argument("--jobs", metavar="J", help="cells at once on local cores, each in its own process "
                   "(default: os.cpu_count())")
    p.add_argument("--ray-address", dest="ray_address", metavar="HOST:PORT",
                   help="run every cell as a Ray task on the cluster whose GCS is there (127.0.0.1:PORT; "
                        "its workers must import this gangstorm checkout); Ray runs as many cells at once as "
                        "the cluster has CPUs")
    p.add_argument("--allow-remote", dest="allow_remote", action="store_true",
                   help="allow a --ray-address outside 127.0.0.0/8")
    p.add_argument("--quiet", action="store_true", help="no line per cell")
    p.set_defaults(func=main)


def main(args) -> int:
    from loadgen.drive.sweep import Local, default_jobs, run_sweep
    from loadgen.input.sweep import load
    from loadgen.output.storage import check_out_dir, new_run_id
    if args.out is not None and not (Path(args.out) / "sweep.json").is_file():
        check_out_dir(args.out)
    if args.ray_address is not None:
        from loadgen.cli.existing import _check_hostport
        _check_hostport("--ray-address", args.ray_address, args.allow_remote)
        if args.jobs is not None:
            raise UsageError("--jobs: not used with --ray-address (Ray runs as many cells at once as the cluster "
                             "has CPUs)")
    elif args.allow_remote:
        raise UsageError("--allow-remote: only used with --ray-address")
    jobs = default_jobs()
    if args.jobs is not None:
        s = str(args.jobs).strip()
        if not (s.isascii() and s.isdigit()) or int(s) < 1:
            raise UsageError(f"--jobs: expected a positive integer (cells at once), got {args.jobs!r}")
        jobs = int(s)
    sweep = load(args.spec)                      # every cell checked before anything is written
    out = Path(args.out) if args.out else Path("results") / new_run_id(f"sweep-{sweep.name}")
    if args.ray_address is not None:
        from loadgen.drive.sweep_ray import Ray
        executor = Ray(args.ray_address)
    else:
        executor = Local(jobs)
    progress = None if args.quiet else Progress(sweep, args.spec)
    summary = run_sweep(sweep, out, executor, progress)
    out = Path(summary["_dir"])
    print((out / "summary.md").read_text())
    page = ", report.html" if (out / "report.html").exists() else ""
    print(f"results: {out}/summary.json, summary.md{page}, index.jsonl; each cell: {out}/cells/<name>/")
    return 0 if summary["complete"] else 1


class Progress:
    """A line on stderr when the sweep starts and as each cell ends."""

    def __init__(self, sweep, spec: str, stream=sys.stderr):
        self.cells = {c.index: c for c in sweep.cells}
        self.spec, self.stream = spec, stream
        self.total = self.finished = 0

    def __call__(self, kind: str, index, *detail) -> None:
        if kind == "plan":
            total, kept, todo, out, resumed = detail
            self.total, self.finished = total, kept
            again = f"; {kept} complete from before, {todo} to run" if resumed else ""
            self._line(f"gangstorm: sweep {self.spec}: {total} cells{again} -> {out}/ "
                       f"(resume with the same --out {out})")
            return
        if kind == "connected":
            msg = detail[0]
            self._line(f"  Ray cluster: {msg.get('cpus', 0):g} CPUs on {msg.get('nodes')} nodes (a cell a CPU)")
            return
        if kind not in ("done", "stopped"):
            return
        self.finished += 1
        c, out = self.cells[index], detail[0]
        word = "done" if kind == "done" else out.status
        self._line(f"  cell {c.index:04d} {c.scenario.name} {c.scheduler} churn {c.churn:g} seed {c.seed} "
                   f"{c.profile} {c.nodes:,} nodes: {word} in {out.wall_s:.1f} s  [{self.finished}/{self.total}]")

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
