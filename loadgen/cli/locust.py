"""gangstorm locust SCENARIO: the Locust driver (web UI, or --headless), results in results/<run-id>/.

A thin layer: validate flags and the scenario here (one-line errors, exit 2), then run
`python -m locust -f loadgen/locust/locustfile.py ...` in its own process group, bound to 127.0.0.1.
Locust is never imported in this process (it monkey-patches the interpreter with gevent).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from loadgen.cli.common import UsageError, add_overrides, add_targets, parse_schedulers, positive_int, scenario_from
from loadgen.input.overrides import OVERRIDES
from loadgen.model.registry import SCHEDULERS, target_class

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locust" / "locustfile.py"
_TIMESPAN = re.compile(r"^\s*(?:\d+\s*)$|^\s*(?:\d+h)?\s*(?:\d+m(?:in)?)?\s*(?:\d+s)?\s*$")


def add_parser(sub) -> None:
    p = sub.add_parser("locust", help="drive the schedulers with Locust (web UI or --headless)")
    p.add_argument("scenario", help="scenario YAML (see scenarios/)")
    add_targets(p, default_help="kube")
    add_overrides(p, "nodes", "seed", "churn", "time_scale", "ray_nodes")
    p.add_argument("--headless", action="store_true", help="no web UI; start at once, write CSV/HTML/summary.json")
    p.add_argument("-t", "--run-time", help="stop after e.g. 300s, 5m, 1h30m (default: the scenario's length)")
    p.add_argument("-u", "--users", type=positive_int, help="Locust users (default: one per tenant)")
    p.add_argument("--processes", type=positive_int, help="fork N Locust worker processes (tenants split across them)")
    p.add_argument("--master", action="store_true", help="run as a master waiting for --worker processes")
    p.add_argument("--worker", action="store_true", help="run as a worker of a master on --master-port")
    p.add_argument("--expect-workers", type=positive_int, help="--master --headless: wait for this many workers")
    p.add_argument("--master-port", type=positive_int, default=5557)
    p.add_argument("--web-port", type=positive_int, default=8089)
    p.add_argument("--out", help="output directory (default results/<run-id>)")
    p.set_defaults(func=main)


def build_command(args, scenario, names: list[str], out: Path) -> list[str]:
    if args.run_time is not None and not _TIMESPAN.match(args.run_time):
        raise UsageError(f"--run-time: expected e.g. 300s, 5m or 1h30m, got {args.run_time!r}")
    if args.worker and (args.master or args.processes):
        raise UsageError("--worker: cannot be combined with --master or --processes")
    users = args.users or scenario.data["workload"]["tenants"]
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
           "--scenario", scenario.path, "--schedulers", ",".join(names), "--backend", args.backend,
           "--time-scale", repr(args.time_scale), "--results-dir", str(out),
           "--web-host", "127.0.0.1", "--web-port", str(args.web_port),
           "--exit-code-on-error", "0"]
    for dest in ("nodes", "seed", "churn"):
        if getattr(args, dest) is not None:
            cmd += [OVERRIDES[dest].flag, str(getattr(args, dest))]
    if args.profile:
        cmd += ["--sim-profile", args.profile]
    if args.worker:
        return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
                "--master-host", "127.0.0.1", "--master-port", str(args.master_port)]
    cmd += ["-u", str(users), "-r", str(users)]
    if args.headless:
        cmd += ["--headless", "--csv", str(out / "locust"), "--html", str(out / "locust.html")]
    if args.run_time:
        cmd += ["-t", args.run_time.replace(" ", "")]
    if args.processes:
        cmd += ["--processes", str(args.processes), "--master-bind-host", "127.0.0.1",
                "--master-bind-port", str(args.master_port), "--master-port", str(args.master_port)]
    elif args.master:
        cmd += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(args.master_port)]
        if args.expect_workers:
            cmd += ["--expect-workers", str(args.expect_workers)]
    return cmd


def run_group(cmd: list[str], grace_s: float = 60.0) -> int:
    """Run cmd in its own process group; on SIGINT/SIGTERM ask it to finish, then kill the group."""
    proc = subprocess.Popen(cmd, start_new_session=True)
    stopping = []

    def _stop(signum, _frame):
        stopping.append(signum)
        try:
            proc.send_signal(signal.SIGTERM)   # Locust shuts down cleanly and writes its results
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                return proc.wait(timeout=grace_s if stopping else None)
            except subprocess.TimeoutExpired:
                break
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 130


def main(args) -> int:
    from loadgen.cli.existing import attached_schedulers, existing_from, preflight
    from loadgen.output.storage import check_out_dir, fresh_run_dir, new_run_id
    existing = existing_from(args)
    if args.dry_run:
        raise UsageError("--dry-run: not used with locust (try it on `gangstorm run` with the same flags)")
    scenario = scenario_from(args)
    names = (existing and attached_schedulers(args.schedulers, existing)) or \
        parse_schedulers(args.schedulers or "kube", scenario)
    alone = [n for n in names if not target_class(n, args.backend).shares_one_watch]
    if existing is not None and (args.processes or args.master) and alone:
        watchers = [n for n in SCHEDULERS if target_class(n, "real").shares_one_watch]
        watchers = ", ".join(watchers[:-1]) + " and " + watchers[-1] if len(watchers) > 1 else watchers[0]
        raise UsageError(f"--processes/--master: several Locust processes on one existing cluster observe it "
                         f"once for all (one watch or poller): {watchers} only, not {', '.join(alone)}")
    if args.out is not None:
        check_out_dir(args.out)
    out = Path(args.out) if args.out else fresh_run_dir("results", new_run_id(scenario.name))
    if existing is not None:       # foreign workloads, nodes, Volcano: refused before Locust starts
        from loadgen.input.plan import plan_run
        preflight(scenario, names, args.backend, plan_run(scenario), existing, args.time_scale)
    cmd = build_command(args, scenario, names, out)
    if existing is not None:
        import dataclasses
        import json
        cmd += ["--existing", json.dumps(dataclasses.asdict(existing))]
    if not args.worker:
        check_out_dir(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--out {out}: cannot create the run folder ({e.strerror})") from None
        where = "headless" if args.headless else f"web UI at http://127.0.0.1:{args.web_port}"
        print(f"gangstorm: locust {where}; results in {out}/", file=sys.stderr)
    code = run_group(cmd)
    md = out / "summary.md"
    if not args.worker and md.exists():
        print(md.read_text())
        print(f"results: {out}/summary.json, summary.md, jobs.csv, timeseries.csv"
              + (", locust_stats.csv, locust.html" if args.headless else ""))
    return code
