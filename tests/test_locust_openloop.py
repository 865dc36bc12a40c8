"""Open loop: a target that serves one submission at a time, slower than jobs arrive.

A closed-loop generator would wait for each call and send later and later (its lateness would
grow to seconds) while reporting only the service time. gangstorm's users keep the schedule
(small lateness) and measure from the scheduled time, so the queueing shows up in SUBMIT and
ADMIT latencies.
"""
from __future__ import annotations

import json
import textwrap

import pytest

from loadgen.input.traces import export_jsonl
from loadgen.model.job import Job
from support.locust_process import locust_rows

SERVICE_S = 0.05          # one submission at a time, 50 ms each: 20/s capacity
RATE = 40.0               # jobs per wall second offered: twice the capacity
SEND_S = 8.0              # wall seconds of arrivals
SCALE = 60.0

SLOW_TARGET = f'''
import threading, time
from loadgen.model.events import Event, Kind
from loadgen.model.target import Snapshot, Target

class SlowTarget(Target):
    """A single-server backend: submit holds one lock for {SERVICE_S} s (gevent-patched under Locust)."""
    name, backend = "kube", "real"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.lock = threading.Lock()
        self.done = []
        self.sent = 0

    def submit(self, job, now):
        self.sent += 1
        with self.lock:
            time.sleep({SERVICE_S})
        self.done.append(job.id)
        return [Event(now, job.id, Kind.SUBMITTED)]

    def advance(self, now):
        out, self.done = [Event(now, j, Kind.ADMITTED, 1) for j in self.done], []
        return out

    def snapshot(self, now):
        return Snapshot(now, 0, 0, 0, self.sent, 0, 0, {{"served": self.sent}})
'''


@pytest.mark.slow
def test_slow_target_keeps_schedule_and_measures_queueing(tmp_path, run_locust):
    (tmp_path / "slowtarget.py").write_text(SLOW_TARGET)
    (tmp_path / "lf.py").write_text(textwrap.dedent('''
        from loadgen.model.registry import REGISTRY
        REGISTRY[("kube", "real")] = "slowtarget:SlowTarget"
        from loadgen.locust.locustfile import *  # noqa: F401,F403
    '''))
    n = int(RATE * SEND_S)
    jobs = [Job(id=i, tenant="t0", queue="q", cls="small", members=1, gpus_per_member=1,
                duration_s=3600.0, submit_s=(1 + i) / RATE * SCALE, min_available=1) for i in range(n)]
    export_jsonl(jobs, tmp_path / "trace.jsonl")
    wall_total = SEND_S + n * SERVICE_S          # last job served at about n x service
    (tmp_path / "s.yaml").write_text(textwrap.dedent(f'''
        name: slow-target
        duration_h: {SEND_S * SCALE / 3600}
        drain_h: {(wall_total - SEND_S + 4) * SCALE / 3600}
        warmup_h: 0
        fleet: {{nodes: 100}}
        workload: {{trace: {tmp_path / "trace.jsonl"}, tenants: 1}}
    '''))
    out = tmp_path / "out"
    p = run_locust("-f", "lf.py", "--headless", "-u", "1", "-r", "1", "--scenario", "s.yaml",
                   "--schedulers", "kube", "--backend", "real", "--time-scale", str(SCALE),
                   "--results-dir", str(out), "--csv", str(out / "locust"), "--exit-code-on-error", "0",
                   "--only-summary", env={"PYTHONPATH": str(tmp_path)})
    assert p.wait(timeout=wall_total + 60) == 0, p.output()[-3000:]

    s = json.loads((out / "summary.json").read_text())["schedulers"]["kube"]
    assert s["jobs"]["submitted"] == n and s["jobs"]["admitted"] == n, s["jobs"]
    late = s["generator_lateness_wall_s"]
    # sends keep their schedule although every call queues behind the previous ones: a closed loop
    # would be seconds late by the end (the ~8 s queue below); the bounds leave room for a GC pause
    # or a busy CI core, not for lateness that grows with the queue
    assert late["p99"] < 0.1 and late["max"] < 1.0, late
    # ... and the latency from the scheduled time includes the queue: job i waits for i earlier jobs
    # (about i x (service - 1/rate)), so the last ones wait ~ n x 0.025 s = 8 s
    adm = s["admission_s"]
    expected_max = n * SERVICE_S - SEND_S
    assert adm["max"] > 0.7 * expected_max, adm
    assert adm["p50"] > 10 * SERVICE_S, adm
    stats = locust_rows(out / "locust_stats.csv")
    submit = stats[("SUBMIT", "kube/small")]
    assert int(submit["Request Count"]) == n
    assert float(submit["Max Response Time"]) > 0.7 * expected_max * 1000, submit
    assert float(submit["50%"]) > 10 * SERVICE_S * 1000, submit
