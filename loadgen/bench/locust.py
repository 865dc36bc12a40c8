"""Benchmark: the highest open-loop send rate one (and two) Locust processes sustain.

For each rate a trace of evenly spaced 1-GPU jobs from 8 tenants is sent for --seconds to a
no-op target (loadgen.locust.noop) by `locust --headless`; a rate passes when the generator's
lateness (actual minus scheduled send time, measured in the submission greenlet) has p99.9
under --limit-ms and every job was sent. Prints one JSON line per trial and a summary. The
machine's load average is recorded with each trial (lateness depends on getting a CPU in time),
and so is the CPU the driver spent per job beyond a 10 jobs/s baseline, which does not; "floor"
is the lateness of the same schedule on a bare gevent loop measured right after, i.e. what the
machine allowed at that moment.

    python -m loadgen.bench.locust [--processes 1,2] [--seconds 10] [--limit-ms 5]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from loadgen.input.traces import export_jsonl
from loadgen.model.job import Job

TENANTS = 8
SCALE = 60.0
WRAPPER = textwrap.dedent('''
    from loadgen.model.registry import register
    register("kube", "noop", "loadgen.locust.noop:NoopTarget")
    from loadgen.locust.locustfile import *  # noqa: F401,F403
''')


def trial(rate: float, seconds: float, processes: int, work: Path, port: int) -> dict:
    d = work / f"r{int(rate)}-p{processes}"
    d.mkdir(parents=True, exist_ok=True)
    n = int(rate * seconds)
    jobs = [Job(id=i, tenant=f"t{i % TENANTS}", queue="q", cls="small", members=1, gpus_per_member=1,
                duration_s=60.0, submit_s=(i + 1) / rate * SCALE, min_available=1) for i in range(n)]
    export_jsonl(jobs, d / "trace.jsonl")
    (d / "s.yaml").write_text(
        f"name: bench\nduration_h: {seconds * SCALE / 3600}\ndrain_h: {1.0 * SCALE / 3600}\nwarmup_h: 0\n"
        f"fleet: {{nodes: 100}}\nworkload: {{trace: {d / 'trace.jsonl'}, tenants: {TENANTS}}}\n")
    (d / "lf.py").write_text(WRAPPER)
    cmd = [sys.executable, "-m", "locust", "-f", str(d / "lf.py"), "--headless", "-u", str(TENANTS),
           "-r", str(TENANTS), "--scenario", str(d / "s.yaml"), "--backend", "noop", "--schedulers", "kube",
           "--time-scale", str(SCALE), "--results-dir", str(d / "out"), "--exit-code-on-error", "0",
           "--only-summary", "--loglevel", "WARNING"]
    if processes > 1:
        cmd += ["--processes", str(processes), "--master-bind-host", "127.0.0.1",
                "--master-bind-port", str(port), "--master-port", str(port)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    with open(d / "locust.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=d, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=seconds + 90)
        except subprocess.TimeoutExpired:
            pass            # no summary.json then: reported as a failed trial
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
            proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = d / "out" / "summary.json"
    if not summary.exists():
        return {"processes": processes, "rate_per_s": rate, "jobs": n, "sent": 0, "lateness_p999_ms": None,
                "error": f"no summary.json (see {d / 'locust.log'})", "cpu_s": round(cpu, 2)}
    s = json.loads(summary.read_text())["schedulers"]["kube"]
    late = s["generator_lateness_wall_s"]
    if not late["count"]:
        return {"processes": processes, "rate_per_s": rate, "jobs": n, "sent": 0, "lateness_p999_ms": None,
                "error": f"nothing sent (see {d / 'locust.log'})", "cpu_s": round(cpu, 2)}
    return {"processes": processes, "rate_per_s": rate, "jobs": n, "sent": late["count"],
            "lateness_p50_ms": round(late["p50"] * 1000, 3), "lateness_p99_ms": round(late["p99"] * 1000, 3),
            "lateness_p999_ms": round(late["p999"] * 1000, 3), "lateness_max_ms": round(late["max"] * 1000, 3),
            "cpu_s": round(cpu, 2), "cpu_ms_per_job": round(cpu * 1000 / max(n, 1), 4),
            "loadavg_1m_before": round(load, 2), "cpus": os.cpu_count()}


FLOOR = textwrap.dedent('''
    import json, sys, time
    import gevent
    rate, seconds = float(sys.argv[1]), float(sys.argv[2])
    late = []
    def send():
        t0 = time.monotonic() + 0.2
        for i in range(int(rate * seconds)):
            s = (i + 1) / rate
            while (d := s - (time.monotonic() - t0)) > 0:
                gevent.sleep(d)
            gevent.spawn(lambda s=s: late.append(time.monotonic() - t0 - s))
    gevent.spawn(send).join()
    gevent.sleep(0.1)
    late.sort()
    print(json.dumps({"p99_ms": late[int(0.99 * len(late))] * 1000, "p999_ms": late[int(0.999 * len(late))] * 1000}))
''')


def floor(rate: float, seconds: float) -> dict:
    """The same schedule on a bare gevent loop (no Locust, no target): what the machine allows right now."""
    out = subprocess.run([sys.executable, "-c", FLOOR, str(rate), str(seconds)], capture_output=True, text=True,
                         timeout=seconds + 60, start_new_session=True)
    return {k: round(v, 3) for k, v in json.loads(out.stdout).items()} if out.returncode == 0 else {}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.locust")
    p.add_argument("--processes", default="1,2", help="comma-separated process counts (default 1,2)")
    p.add_argument("--rates", default="250,500,1000,1500,2000,3000,4000,6000,8000")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--limit-ms", type=float, default=5.0)
    p.add_argument("--port", type=int, default=5671)
    p.add_argument("--stop-at-first-fail", action="store_true")
    args = p.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    best = {}
    with tempfile.TemporaryDirectory(prefix="gangstorm-bench-") as tmp:
        for procs in [int(x) for x in args.processes.split(",")]:
            best[procs] = None
            base = trial(10.0, args.seconds, procs, Path(tmp), args.port)   # start-up and idle CPU
            print(json.dumps({"baseline": True, **base}), flush=True)
            for rate in rates:
                r = trial(rate, args.seconds, procs, Path(tmp), args.port)
                # CPU each extra job costs the driver, whatever else runs on the machine
                r["marginal_cpu_ms_per_job"] = None if r["sent"] == 0 else round(
                    (r["cpu_s"] - base["cpu_s"]) * 1000 / (r["jobs"] - base["jobs"]), 4)
                r["pass"] = (r["sent"] == r["jobs"] and r["lateness_p999_ms"] is not None
                             and r["lateness_p999_ms"] < args.limit_ms)
                r["floor"] = floor(rate, min(args.seconds, 5.0))
                print(json.dumps(r), flush=True)
                if r["pass"]:
                    best[procs] = rate
                elif args.stop_at_first_fail:
                    break
    for procs, rate in best.items():
        print(f"{procs} process(es): highest rate with lateness p99.9 < {args.limit_ms:g} ms: "
              f"{'none of the tried rates' if rate is None else f'{rate:g} jobs/s'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
