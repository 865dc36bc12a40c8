"""The Ray GCS cost curve next to its twin, and the costs measured from it.

    python -m loadgen.calibration.raycurve [--dir results/fidelity-scale/ray] [--profile local] [--write]

`python -m fakes.ray.costcurve` measures the real GCS on fakelets (curve-<nodes>n.json: per bundle
count, groups created one at a time, the GCS's own scheduling-latency statistic). This module runs
the simulated GCS (the "ray" sim target, found through the registry) on the same workload: the same
number of nodes, the same groups one at a time, strategy and bundle shape; it writes the twin's
value of the same statistic into each file's "sim" (with real/sim ratios, `--write`) and prints the
table nodes | bundles | real | sim | ratio.

`node_costs(curves)` is the least-squares fit of the real statistic over (nodes, bundles) that gives
the GCS's per-node costs as measured on fakelets (gcs_per_node_us, and gcs_per_node_scored_ns per
node and bundle: Schedule() scores every node once per bundle), over the sizes this machine did not
limit (`machine_limit`).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.drive.runner import run_virtual
from loadgen.input.profile import Profile
from loadgen.input.profile import load as load_profile
from loadgen.input.scenario import from_dict
from loadgen.measure.recorder import Recorder
from loadgen.model.job import Job
from loadgen.model.registry import target_class
from loadgen.model.target import TargetContext

STAT = "gcs_scheduling_ms_p50"
SPACING_S = 5.0                # one group in flight: far longer than any attempt


def curves(folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(folder.glob("curve-*n.json"), key=lambda p: int(p.stem[6:-1])):
        doc = json.loads(path.read_text())
        doc["_path"] = str(path)
        out.append(doc)
    return out


def twin_stat(profile: Profile, nodes: int, bundles: int, groups: int, strategy: str,
              stat: str = STAT) -> float:
    """The simulated GCS's `stat` on `groups` groups of `bundles` x {GPU 1, CPU 1} made one at a time."""
    sc = from_dict({}, "<ray cost curve>", profile).with_overrides(**{
        "fleet.nodes": nodes, "duration_h": 1.0, "warmup_h": 0.0, "drain_h": 0.0,
        "schedulers.ray.multi_node_strategy": strategy, "schedulers.ray.single_node_strategy": strategy})
    jobs = [Job(id=i, tenant="curve", queue="curve", cls="large" if bundles > 1 else "small", members=bundles,
                gpus_per_member=1, duration_s=1e-3, submit_s=i * SPACING_S, min_available=bundles,
                cpus_per_member=1) for i in range(groups)]
    target = target_class("ray", "sim")(TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("ray"),
                                                      control_plane=sc.section("control_plane"), seed=sc.seed))
    rec = Recorder(jobs)
    target.start()
    end = groups * SPACING_S + 60.0
    run_virtual(target, jobs, [], end, end, rec)
    return float(target.control_plane()[stat])


def compare(doc: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """The twin's figures for one curve file, per bundle count, with real/sim."""
    work = doc["workload"]
    rows = {}
    for ph in doc["metrics"].get("phases", []):
        real = ph.get(STAT)
        sim = twin_stat(profile, doc["nodes"], ph["bundles"], work["groups"], work["strategy"])
        rows[str(ph["bundles"])] = {STAT: round(sim, 4), "real": real,
                                    "ratio": round(real / sim, 3) if real and sim else None}
    return {"profile": profile.name, "by_bundles": rows}


def table(docs: list[dict[str, Any]]) -> str:
    lines = ["| nodes | bundles | real GCS scheduling p50 ms | sim | ratio (real / sim) | GCS CPU % (phase) | "
             "fleet CPU % | machine busy % | load avg |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for doc in docs:
        sim = doc.get("sim", {}).get("by_bundles", {})
        for ph in doc["metrics"].get("phases", []):
            s = sim.get(str(ph["bundles"]), {})
            lines.append(f"| {doc['nodes']:,} | {ph['bundles']} | {ph.get(STAT)} | {s.get(STAT)} | {s.get('ratio')} | "
                         f"{ph.get('gcs_cpu_pct')} | {ph.get('fleet_cpu_pct')} | {ph.get('machine_busy_pct')} | "
                         f"{ph.get('load_avg_1m')} |")
    return "\n".join(lines)


# A size whose own background work (the GCS's health checks and polls, the fakelets' answers, the
# driver's samples) keeps more than half of this 2-core machine busy with nothing to schedule, or
# that started on a loaded machine, measures the machine, not the GCS.
IDLE_OWN_LIMIT_PCT = 100.0          # % of one core
START_LOAD_LIMIT = 1.5


def machine_limit(doc: dict[str, Any]) -> str | None:
    """Why a curve file measures this machine rather than the GCS, or None."""
    m = doc.get("metrics", {})
    idle, fakelets = m.get("idle", {}), m.get("fakelets") or {}
    if doc.get("error"):
        return f"the run failed: {doc['error']}"
    if any(ph.get("created") != ph.get("groups") for ph in m.get("phases", [])):
        return "not every group was created"
    if fakelets.get("false_deaths"):
        return f"the GCS declared {fakelets['false_deaths']} answering fakelets dead (the fleet fell behind)"
    own = sum(idle.get(f"{k}_cpu_pct") or 0.0 for k in ("gcs", "fleet", "driver"))
    if own >= IDLE_OWN_LIMIT_PCT:
        return (f"with nothing to schedule the GCS took {idle.get('gcs_cpu_pct')}% of a core, the fakelets "
                f"{idle.get('fleet_cpu_pct')}%, the driver {idle.get('driver_cpu_pct')}% (the machine: "
                f"{idle.get('machine_busy_pct')}% of its 2 cores busy)")
    start = (doc.get("load_avg") or {}).get("before", [0.0])[0]
    if start >= START_LOAD_LIMIT:
        return f"it started at a 1-minute load average of {start} (another job shared the machine)"
    return None


def node_costs(docs: list[dict[str, Any]]) -> tuple[float, float, str]:
    """gcs_per_node_us and gcs_per_node_scored_ns from the curve files the machine did not limit
    (measured without the GCS's statistics printing, which logs per bundle), and their provenance.

    Least squares of the GCS scheduling latency p50 = c_B + nodes x (per_node + per_scored x B):
    one intercept per bundle count (what a group of B bundles costs apart from the nodes, round trips
    to the fakelets included), the node terms shared; relative error, every coefficient >= 0."""
    use = [d for d in docs if not d.get("gcs_stats") and machine_limit(d) is None]
    bundles = sorted({ph["bundles"] for d in use for ph in d["metrics"]["phases"]})
    rows, ys = [], []
    for d in use:
        for ph in d["metrics"]["phases"]:
            onehot = [1.0 if ph["bundles"] == b else 0.0 for b in bundles]
            rows.append(onehot + [d["nodes"], d["nodes"] * ph["bundles"]])
            ys.append(ph[STAT])
    x, y = np.array(rows), np.array(ys)
    coef = _nonneg_lstsq(x, y)
    per_node_us, scored_ns = coef[-2] * 1e3, coef[-1] * 1e6
    sizes = sorted(d["nodes"] for d in use)
    left = sorted(d["nodes"] for d in docs if not d.get("gcs_stats") and machine_limit(d) is not None)
    src = (f"GCS placement-group scheduling latency p50 (placement_group_table stats) of SPREAD groups created "
           f"one at a time on fakelets, least squares over {len(ys)} points at {sizes} nodes x {bundles} bundles "
           f"(one intercept per bundle count, node terms shared; rms relative error "
           f"{float(np.sqrt(np.mean(((x @ coef) / y - 1) ** 2))):.2f})"
           + (f"; {left} nodes left out: this machine, not the GCS, was the limit there" if left else ""))
    return float(per_node_us), float(scored_ns), src


def _nonneg_lstsq(x: np.ndarray, y: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """Least squares of the error relative to `scale` (default y: small and large latencies count
    alike) with coefficients >= 0 (a cost is never negative): drops the most negative coefficient
    and refits until none is negative."""
    w = 1.0 / (y if scale is None else scale)
    active = list(range(x.shape[1]))
    while True:
        c, *_ = np.linalg.lstsq(x[:, active] * w[:, None], y * w, rcond=None)
        if (c >= 0).all():
            out = np.zeros(x.shape[1])
            out[active] = c
            return out
        active.pop(int(np.argmin(c)))


# The release-test shape's runs whose GCS statistics give the per-group and per-bundle costs:
# the fit anchors of the local profile (loadgen/calibration/anchors.py); the 20-bundle run is held out.
FIT_BUNDLES = (1, 10, 40)
BENCH = "bench-pg-100x{b}{suffix}.json"
COSTCURVE_CMD = "python -m fakes.ray.costcurve --sizes 500,2000,5000,10000 --bundles 1,4,16,64 --groups 30"
PGPERF_CMD = "python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 3 [--add]"
PGPERF_STATS_CMD = "python -m fakes.ray.pgperf --bundles 1,10,20,40 --repeat 1 --gcs-stats"


def _bench(folder: Path, b: int, suffix: str = "") -> dict[str, Any] | None:
    path = folder / BENCH.format(b=b, suffix=suffix)
    return json.loads(path.read_text()) if path.exists() else None


def _same_node(bundles: int, nodes: int) -> int:
    """sum of k^2 over the nodes of a SPREAD group of `bundles` bundles on `nodes` nodes."""
    per, extra = divmod(bundles, nodes)
    return (nodes - extra) * per * per + extra * (per + 1) ** 2 if bundles >= nodes else bundles


def bench_costs(folder: Path, per_node_us: float, scored_ns: float) -> dict[tuple[str, str], tuple[float, str, str]]:
    """gcs_base_ms, gcs_per_bundle_ms, gcs_per_bundle_sq_us, commit_rtt_ms and gcs_followup_ratio from
    the fit runs of the release-test shape on 5 raylets: {(section, key): (value, source, command)}."""
    nodes = 5
    runs = {b: _bench(folder, b) for b in FIT_BUNDLES}
    if not all(runs.values()):
        return {}
    sched = {b: float(np.median([r["gcs_scheduling_ms_p50"] for r in d["repeats"]])) for b, d in runs.items()}
    extra = {b: float(np.median([r["iteration_s_median"] * 1e3 / d["shape"]["groups"] - r["gcs_scheduling_ms_p50"]
                                 for r in d["repeats"]])) for b, d in runs.items()}
    stats = _bench(folder, min(FIT_BUNDLES), "-gcsstats")
    rpc = [(r["gcs_prepare_rpc_ms_mean"] + r["gcs_commit_rpc_ms_mean"]) / 2 for r in (stats or {}).get("repeats", [])
           if r.get("gcs_prepare_rpc_ms_mean") and r.get("gcs_commit_rpc_ms_mean")]
    rtt = float(np.median(rpc)) if rpc else 0.0
    # the nodes' part is known from the curve; the rest is a + per_bundle x B + sq x sum(k^2), and a
    # is the two round trips (as the GCS's statistics time its calls, at most a / 2 each) plus the base
    x = np.array([[1.0, b, _same_node(b, nodes)] for b in sched])
    y = np.array([sched[b] - per_node_us * nodes / 1e3 - scored_ns * nodes * b / 1e6 for b in sched])
    a, per_bundle, sq = _nonneg_lstsq(x, y, np.array(list(sched.values())))
    rtt_mean, rtt = rtt, float(min(rtt, a / 2))
    base = a - 2 * rtt
    what = (f"GCS placement-group scheduling latency p50 (placement_group_table stats) in Ray's placement-group "
            f"release-test shape on 5 raylets, bundles {list(FIT_BUNDLES)} (median of the repeats: "
            + ", ".join(f"{b}: {v:.3f} ms" for b, v in sched.items()) + "), less the per-node costs; least squares "
            f"a + per_bundle x B + sq x sum(k^2) (SPREAD over 5 nodes), base = a {a:.3f} ms - two round trips")
    out = {("ray", "gcs_base_ms"): (float(base), what, PGPERF_CMD),
           ("ray", "gcs_per_bundle_ms"): (float(per_bundle), what, PGPERF_CMD),
           ("ray", "gcs_per_bundle_sq_us"): (float(sq * 1e3), what, PGPERF_CMD),
           ("ray", "gcs_followup_ratio"): (float(np.median([extra[b] / sched[b] for b in sched])),
                                         "the benchmark's time per group beyond the GCS scheduling latency, over that "
                                         "latency (create + wait + remove: " + ", ".join(
                                             f"{b} bundles {extra[b]:.3f} / {sched[b]:.3f} ms" for b in sched)
                                         + "), median; the GCS's event-loop statistics (--gcs-stats) put most of it on "
                                         "its main thread: the nodes' resource views after prepare and commit "
                                         "(GcsResourceManager::Update, 2.9 ms each), table-write callbacks; "
                                         "RemovePlacementGroup itself 0.3-2.6 ms a group",
                                         PGPERF_CMD)}
    out[("ray", "commit_per_node_ms")] = (0.0, "not separable from the per-bundle costs on 5 raylets (a SPREAD "
                                          "group of 10 or 40 bundles calls all 5); a fakelet fleet's is measured "
                                          "(loadgen/calibration/raycurve.py fakelet_costs)", PGPERF_CMD)
    if rpc:
        out[("ray", "commit_rtt_ms")] = (rtt, "mean duration of the GCS's PrepareBundleResources and "
                                         "CommitBundleResources calls to the raylets (its event-loop statistics, "
                                         f"NodeManagerService.grpc_client.*) for {min(FIT_BUNDLES)}-bundle groups "
                                         f"of the release-test shape on 5 raylets ({rtt_mean:.3f} ms), at most half "
                                         f"that shape's {min(FIT_BUNDLES)}-bundle scheduling latency p50",
                                         PGPERF_STATS_CMD)
    return out


def fakelet_costs(docs: list[dict[str, Any]], folder: Path, profile: Profile) -> dict[tuple[str, str], float]:
    """What a fakelet fleet costs per group and per node called in place of `profile`'s raylets:
    least squares over the one-at-a-time curve points (the sizes the machine did not limit; SPREAD,
    one bundle per node) of latency - the profile's node costs = a + 2 x per_node_called x B, a being
    the base and the profile's two round trips; its follow-up ratio from the release-test shape on 5
    fakelets (bench-pg-100x<B>-fakelet.json). The GCS's own node costs are the profile's: only who
    answers the GCS changes. (On 5 fakelets, 8 bundles to a node, the per-bundle cost is far lower:
    a fakelet process answers per call, not per bundle.)"""
    r = {k: profile.params["ray"][k].value for k in profile.params["ray"]}
    rows, ys, scale = [], [], []
    for d in docs:
        if not d.get("gcs_stats") and machine_limit(d) is None:
            for ph in d["metrics"]["phases"]:
                b, n = ph["bundles"], d["nodes"]
                rows.append([1.0, 2.0 * min(b, n)])
                ys.append(ph[STAT] - r["gcs_per_node_us"] * n / 1e3 - r["gcs_per_node_scored_ns"] * n * b / 1e6)
                scale.append(ph[STAT])
    if not rows:
        return {}
    a, per_called = _nonneg_lstsq(np.array(rows), np.array(ys), np.array(scale))
    rtt = min(r["commit_rtt_ms"], a / 2)
    out = {("ray", "gcs_base_ms"): float(a - 2 * rtt), ("ray", "commit_rtt_ms"): float(rtt),
           ("ray", "gcs_per_bundle_ms"): 0.0, ("ray", "gcs_per_bundle_sq_us"): 0.0,
           ("ray", "commit_per_node_ms"): float(per_called)}
    ratios = []
    for b in FIT_BUNDLES:
        doc = _bench(folder, b, "-fakelet")
        for run in doc["repeats"] if doc else []:
            per = run["iteration_s_median"] * 1e3 / doc["shape"]["groups"]
            ratios.append((per - run["gcs_scheduling_ms_p50"]) / run["gcs_scheduling_ms_p50"])
    if ratios:
        out[("ray", "gcs_followup_ratio")] = float(np.median(ratios))
    return out


def fakelet_profile(profile: Profile, folder: Path) -> Profile:
    """`profile` with a fakelet fleet's per-group and per-bundle costs (fakelet_costs) in place of its
    raylets': the twin of a run on fakelets."""
    from loadgen.calibration.calibrate import with_values
    docs = [d for d in curves(folder) if not d.get("gcs_stats")]
    return with_values(profile, fakelet_costs(docs, folder, profile))


def write_profile(path: Path, docs: list[dict[str, Any]], folder: Path, command: str) -> Profile:
    """The profile at `path` with the Ray costs these files measured."""
    from loadgen.calibration.calibrate import with_values
    from loadgen.input.profile import Param, dump
    prof = load_profile(str(path))
    per_node, scored, src = node_costs(docs)
    values: dict[tuple[str, str], tuple[float, str, str]] = {
        ("ray", "gcs_per_node_us"): (per_node, src, COSTCURVE_CMD),
        ("ray", "gcs_per_node_scored_ns"): (scored, src, COSTCURVE_CMD)}
    values.update(bench_costs(folder, per_node, scored))
    for (section, key), (v, source, cmd) in values.items():
        old = prof.params[section][key]
        prof.params[section][key] = Param(round(v, 6), old.unit, "measured", source, f"{cmd}; {command}")
    path.write_text(dump(prof))
    return with_values(prof, {})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.calibration.raycurve", description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=Path("results/fidelity-scale/ray"))
    p.add_argument("--profile", default="local")
    p.add_argument("--write", action="store_true", help="write the twin's figures into each file's \"sim\"")
    p.add_argument("--write-profile", type=Path, default=None,
                   help="first write the Ray costs the curve and benchmark files measured into this profile")
    a = p.parse_args(argv)
    docs = [d for d in curves(a.dir) if not d.get("gcs_stats")]
    if not docs:
        print(f"{a.dir}: no curve-<nodes>n.json (run python -m fakes.ray.costcurve first)", file=sys.stderr)
        return 2
    if a.write_profile:
        command = "python -m loadgen.calibration.raycurve " + " ".join(argv if argv is not None else sys.argv[1:])
        write_profile(a.write_profile, docs, a.dir, command)
    profile = fakelet_profile(load_profile(str(a.write_profile) if a.write_profile else a.profile), a.dir)
    for doc in docs:
        doc["sim"] = compare(doc, profile)
        if a.write:
            path = Path(doc.pop("_path"))
            path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"twin: profile {a.profile} with the fakelet fleet's own costs (fakelet_costs): "
          + ", ".join(f"{k} {profile.params['ray'][k].value:.4g}" for k in
                      ("gcs_base_ms", "gcs_per_bundle_ms", "gcs_per_bundle_sq_us", "gcs_per_node_us",
                       "gcs_per_node_scored_ns", "commit_rtt_ms", "commit_per_node_ms", "gcs_followup_ratio")) + "\n")
    print(table(docs))
    for doc in docs:
        why = machine_limit(doc)
        if why:
            print(f"{doc['nodes']} nodes: {why}")
    per_node, scored, src = node_costs(docs)
    print(f"\ngcs_per_node_us {per_node:.4g}, gcs_per_node_scored_ns {scored:.4g}: {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
