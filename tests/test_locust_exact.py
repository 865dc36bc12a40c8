"""Fast checks of the Locust driver's pieces, in-process and without importing Locust.

- the percentile rule installed into Locust equals metrics.exact_quantile (ties, integer ranks);
- two shards driven on one gevent loop merge into one summary whose tails equal the ADMIT
  latencies the lanes reported to Locust;
- bad flags: one line, exit status 2.
"""
from __future__ import annotations

import sys
from argparse import Namespace
from collections import Counter

import gevent
import numpy as np
import pytest

from loadgen.locust.collect import Collector, merge_cp
from loadgen.locust.options import OptionError, settings
from loadgen.locust.plan import assign_tenants, build
from loadgen.locust.process import Process
from loadgen.locust.stats import REPORT, ms, nearest_rank
from loadgen.measure.statistics import exact_quantile
from support.paths import ROOT


@pytest.mark.parametrize("n", [1, 7, 1000, 2000, 12345])
def test_nearest_rank_on_counts_equals_exact_quantile(n):
    rng = np.random.default_rng(n)
    values = [ms(x) for x in rng.lognormal(0, 2, size=n)]
    values += values[: n // 3]                       # ties
    counts = Counter(values)
    for q in REPORT:
        assert nearest_rank(counts, len(values), q) == exact_quantile(values, q), q


def test_merge_cp_sums_counters_keeps_settings():
    assert merge_cp([{"writes": 3, "api_qps": 50.0, "model": "simulated"},
                     {"writes": 4, "api_qps": 50.0, "model": "simulated"}]) == \
        {"api_qps": 50.0, "model": "simulated", "writes": 7}
    assert merge_cp([{"queues": {"q-a": {"workloads_admitted": 2}}}, {"queues": {"q-b": {"workloads_admitted": 5}}}]) \
        == {"queues": {"q-a": {"workloads_admitted": 2}, "q-b": {"workloads_admitted": 5}}}


def _opts(path, **kw):
    base = dict(scenario=str(path), schedulers="kube,slurm", backend="sim", churn="", time_scale="3600",
                seed="", nodes="", results_dir="")
    return Namespace(**{**base, **kw})


SCENARIO = "name: t\nseed: 5\nduration_h: 1\ndrain_h: 0.5\nwarmup_h: 0.1\nfleet: {nodes: 300}\nworkload: {tenants: 5}\n"


@pytest.mark.parametrize("names", ["kube,slurm", "kube-gang,coscheduling,kueue"])
def test_two_shards_merge_into_exact_summary(tmp_path, names):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    st = settings(_opts(path, schedulers=names))
    plan = build(st)
    fired: list[tuple] = []

    def fire(kind, name, rt, exc):
        fired.append((kind, name, rt, exc))

    owner = assign_tenants(plan.jobs, plan.tenants, 2)
    assert set(owner.values()) == {0, 1}
    collector = Collector(plan, "test-run", tmp_path / "out")
    procs = [Process(st, fire, i, 2, plan=plan) for i in range(2)]
    assert sum(p.shard.fleet.nodes for p in procs) >= plan.fleet.nodes - 1
    # one "user" per tenant, claiming like TenantUser does
    senders = [gevent.spawn(p.run_tenant, t) for p in procs for t in iter(p.claim, None)]
    gevent.joinall(senders, timeout=30)
    gevent.sleep(plan.wall_duration_s + 1.0)          # lead-in + drain
    for i, p in enumerate(procs):
        p.finalize()
        collector.ingest(p.take(), i)
    assert collector.done(2)
    s = collector.summary(complete=True, write_jobs=True)
    assert (tmp_path / "out" / "summary.json").is_file() and (tmp_path / "out" / "jobs.csv").is_file()
    for name in names.split(","):
        r = s["schedulers"][name]
        assert r["jobs"]["submitted"] == len(plan.jobs)
        for cls, by in r["by_class"].items():
            admit = [rt for kind, n, rt, exc in fired if kind == "ADMIT" and n == f"{name}/{cls}" and exc is None]
            assert len(admit) == by["admission_s"]["count"]
            assert round(by["admission_s"]["p999"] * 1000, 3) == pytest.approx(exact_quantile(admit, 0.999), abs=2e-3)
        late = r["generator_lateness_wall_s"]
        assert late["count"] == len(plan.jobs) and late["p50"] >= 0
    if "kueue" in names:
        # each shard runs its own tenants' ClusterQueues: the summary has every tenant's queue once
        queues = s["schedulers"]["kueue"]["control_plane"]["queues"]
        assert len(queues) == len(plan.tenants)
        # a Workload preempted on the wall clock's timing is admitted again: once per preemption at most
        admitted = sum(q["workloads_admitted"] for q in queues.values())
        evictions = sum(q["evictions"] for q in queues.values())
        assert len(plan.jobs) <= admitted <= len(plan.jobs) + evictions


@pytest.mark.parametrize("field,value,msg", [
    ("schedulers", "kube,nope", "--schedulers: expected a comma-separated list"),
    ("time_scale", "fast", "--time-scale: expected a number"),
    ("churn", "-1", "--churn: expected a positive number"),
    ("backend", "cloud", "--backend: expected sim or real"),
])
def test_bad_options_are_one_line(tmp_path, field, value, msg):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    with pytest.raises(OptionError) as e:
        settings(_opts(path, **{field: value}))
    assert str(e.value).startswith(msg) and "\n" not in str(e.value)


def test_cli_bad_input_exits_2(tmp_path, capsys):
    from loadgen.cli.main import main
    assert main(["locust", str(tmp_path / "missing.yaml")]) == 2
    baseline = str(ROOT / "scenarios" / "baseline-3x.yaml")
    assert main(["locust", baseline, "--schedulers", "kube,x"]) == 2
    assert main(["locust", baseline, "-t", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("gangstorm: error: ") for line in err)
    assert "locust" not in sys.modules, "the gangstorm CLI must not import Locust"
