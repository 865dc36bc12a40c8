"""Ray's placement-group performance release test, replicated here with the real GCS.

    python -m fakes.ray.pgperf --bundles 1,10,20,40 [--groups 100] [--nodes 5] [--repeat 3]
        [--kind raylet|fakelet] --out results/fidelity-scale/ray

The shape of Ray's release/benchmarks placement_group_performance_test (the figures of
ray-project/ray PR #63839): a cluster of 5 nodes declaring {"custom": 100}; per bundle count B, one
iteration creates 100 SPREAD placement groups of B bundles {"custom": 0.001}, waits for each, then
removes each; Ray's own `timeit` helper (ray._private.ray_microbenchmark_helpers, shipped in the
wheel: 1 s of warm-up iterations, then 4 trials of at least 2 s) gives groups per second as the mean
over its 4 trials. Here the 5 nodes are real raylets (or fakelets, --kind) on 127.0.0.1 beside a
resource-less head that holds the GCS, as every gangstorm fleet has.

The driver is this module run as `python -m fakes.ray.pgperf --driver ADDRESS B GROUPS` in its own
process (it imports ray; the orchestrating process never does). Around each bundle count the GCS's
event-loop statistics (fakes/ray/gcsstats.py) give its own timings of the calls involved, and the
placement-group table gives each created group's scheduling and creation latency.

Writes bench-pg-<groups>x<B>.json per bundle count: {"figure": groups/s (median of the repeats'
means), "unit", "command", "started", "load_avg", "repeats": [...]}; with --add, this run's repeats
join the file's (the figure is then the median of all, each run listed under "runs"): on two shared
cores one run's three repeats can differ 2.5x.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

CUSTOM_PER_NODE = 100.0       # the release test asserts custom >= 0.01 x groups x bundles
CUSTOM_PER_BUNDLE = 0.001
STRATEGY = "SPREAD"
DRIVER_TIMEOUT_S = 900.0


# -- the driver (imports ray) -------------------------------------------------------------------
def drive(address: str, bundles: int, groups: int) -> dict[str, Any]:
    import ray
    from ray._private.ray_microbenchmark_helpers import timeit
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    ray.init(address=address, log_to_driver=False, logging_level="WARNING", include_dashboard=False)
    made: list[str] = []
    iterations: list[float] = []

    def create_wait_remove() -> None:
        t = time.perf_counter()
        pgs = [placement_group([{"custom": CUSTOM_PER_BUNDLE}] * bundles, strategy=STRATEGY) for _ in range(groups)]
        for pg in pgs:
            pg.wait(timeout_seconds=30)
        for pg in pgs:
            remove_placement_group(pg)
        made.extend(pg.id.hex() for pg in pgs)
        iterations.append(time.perf_counter() - t)

    (_, mean, sd), = timeit(f"placement group create per second ({groups} x {bundles} bundles)",
                            create_wait_remove, groups, warmup_time_sec=0)
    table = placement_group_table()
    stats = [table[h]["stats"] for h in made if h in table and table[h].get("stats")]
    sched = sorted(s["scheduling_latency_ms"] for s in stats)
    e2e = sorted(s["end_to_end_creation_latency_ms"] for s in stats)
    ray.shutdown()
    return {"groups_per_s": round(float(mean), 3), "sd": round(float(sd), 3), "iterations": len(iterations),
            "iteration_s_median": round(median(iterations), 4), "groups_created": len(made),
            "gcs_scheduling_ms_p50": _nearest(sched, 0.5), "gcs_scheduling_ms_p99": _nearest(sched, 0.99),
            "gcs_creation_ms_p50": _nearest(e2e, 0.5), "stats_read": len(stats)}


def _nearest(xs: list[float], q: float) -> float | None:
    """The release test's quantile: xs[int(len(xs) * q)] of the sorted values."""
    return round(float(xs[min(int(len(xs) * q), len(xs) - 1)]), 4) if xs else None


# -- the orchestrator (never imports ray) -------------------------------------------------------
def bench(out: dict[str, Any], kind: str, nodes: int, bundle_counts: list[int], groups: int, repeat: int,
          logs: Path, gcs_stats: bool = False) -> None:
    """Fills `out` as it goes: what was measured survives an interruption."""
    from fakes.ray import gcsstats
    from fakes.ray.fleet import RayFleet
    from fakes.ray.fleet_settings import fleet_settings
    from loadgen.model.fleet import Fleet

    settings = fleet_settings({"nodes": kind}, nodes)
    extra = {i: {"custom": CUSTOM_PER_NODE, **({"pending": 1.0} if i == 0 else {})} for i in range(nodes)}
    fleet = RayFleet(Fleet(nodes=nodes), workdir=logs, kind=kind, syncer=settings.syncer,
                     per_process=settings.per_process,
                     gcs_config={**settings.gcs_config, **(gcsstats.PRINT_ENV if gcs_stats else {})},
                     front=settings.front_binary(), extra_resources=extra)
    out.update(kind=kind, nodes=nodes, gcs_stats=gcs_stats, per_bundles={b: [] for b in bundle_counts})
    try:
        fleet.start()
        out["boot_s"] = round(fleet.boot_s, 1)
        gcs_out = lambda: sorted(Path(fleet.ray_tmpdir, "ray").glob("session_*/logs/gcs_server.out"))[-1]  # noqa: E731
        for k in range(repeat):
            for b in bundle_counts:
                before = gcsstats.read(gcs_out())[0] if gcs_stats else {}
                load = os.getloadavg()[0]
                proc = subprocess.run([sys.executable, "-m", "fakes.ray.pgperf", "--driver", fleet.address, str(b),
                                       str(groups)], env={**os.environ, **fleet.env()}, capture_output=True,
                                      text=True, timeout=DRIVER_TIMEOUT_S)
                if proc.returncode != 0:
                    raise RuntimeError(f"driver ({b} bundles) exited {proc.returncode}: {proc.stderr[-600:]}")
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                # the first print after the driver (none without --gcs-stats)
                after = _next_print(gcs_out, gcsstats.read(gcs_out())[1])[0] if gcs_stats else {}
                d = gcsstats.diff(after, before)
                main = d.get(gcsstats.MAIN, {})
                n = max(res["groups_created"], 1)

                def per_group(handler: str, main=main, n=n) -> float | None:
                    s = main.get(handler)
                    return round(s.exec_ms / n, 4) if s else None
                res.update(repeat=k + 1, load_avg_1m=round(load, 2),
                           gcs_prepare_rpc_ms_mean=gcsstats.rpc_mean_ms(d, "PrepareBundleResources")[0],
                           gcs_commit_rpc_ms_mean=gcsstats.rpc_mean_ms(d, "CommitBundleResources")[0],
                           gcs_remove_bundles_rpc_ms_mean=gcsstats.rpc_mean_ms(d, "RemovePlacementGroupBundles")[0],
                           gcs_main_busy_ms_per_group=round(gcsstats.busy_ms(main) / n, 4) if main else None,
                           gcs_create_handler_ms_per_group=per_group(
                               "PlacementGroupInfoGcsService.grpc_server.CreatePlacementGroup"),
                           gcs_remove_handler_ms_per_group=per_group(
                               "PlacementGroupInfoGcsService.grpc_server.RemovePlacementGroup"),
                           gcs_table_write_callbacks_ms_per_group=per_group("GcsInMemoryStore.Put"))
                out["per_bundles"][b].append(res)
                print(json.dumps({"bundles": b, **res}), flush=True)
    finally:
        fleet.stop()


def _next_print(gcs_out, prints: int, wait_s: float = 6.0):
    from fakes.ray import gcsstats
    deadline = time.monotonic() + wait_s
    while True:
        snap, n = gcsstats.read(gcs_out())
        if n > prints or time.monotonic() > deadline:
            if n > prints:
                time.sleep(0.5)                      # let the GCS finish writing that print
                snap, n = gcsstats.read(gcs_out())
            return snap, n
        time.sleep(0.2)


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two runs of the same shape as one result: every repeat kept, the figure their median; the
    newer run's command, start and load on top, each run's under "runs"."""
    if old.get("shape") != new.get("shape") or old.get("gcs_stats") != new.get("gcs_stats"):
        raise ValueError("not the same benchmark shape")
    runs = old.get("runs") or [{k: old[k] for k in ("command", "started",
                                                    "load_avg")} | {"repeats": len(old["repeats"])}]
    repeats = old["repeats"] + new["repeats"]
    return {**new, "figure": round(median(r["groups_per_s"] for r in repeats), 3), "repeats": repeats,
            "spread": [min(r["groups_per_s"] for r in repeats), max(r["groups_per_s"] for r in repeats)],
            "runs": runs + [{k: new[k] for k in ("command", "started", "load_avg")} | {"repeats": len(new["repeats"])}]}


def write(out: dict[str, Any], groups: int, folder: Path, command: str, started: str,
          load_before: list[float], add: bool = False) -> list[Path]:
    paths = []
    after = [round(x, 2) for x in os.getloadavg()]
    for b, runs in out["per_bundles"].items():
        if not runs:
            continue
        figure = median(r["groups_per_s"] for r in runs)
        doc = {"figure": round(figure, 3), "unit": "groups/s", "command": command, "started": started,
               "load_avg": {"before": load_before, "after": after},
               "shape": {"groups": groups, "bundles": b, "strategy": STRATEGY,
                         "bundle": {"custom": CUSTOM_PER_BUNDLE}, "nodes": out["nodes"], "kind": out["kind"],
                         "custom_per_node": CUSTOM_PER_NODE, "head": "a separate resource-less node holding the GCS"},
               "figure_is": "median over the repeats of Ray's timeit mean (4 trials of >= 2 s each)",
               "spread": [min(r["groups_per_s"] for r in runs), max(r["groups_per_s"] for r in runs)],
               "gcs_stats": out["gcs_stats"], "repeats": runs, "boot_s": out.get("boot_s")}
        suffix = ("" if out["kind"] == "raylet" else f"-{out['kind']}") + ("-gcsstats" if out["gcs_stats"] else "")
        path = folder / f"bench-pg-{groups}x{b}{suffix}.json"
        if add and path.exists():
            doc = merged(json.loads(path.read_text()), doc)
        path.write_text(json.dumps(doc, indent=1) + "\n")
        paths.append(path)
    return paths


def _terminated(signum, frame) -> None:
    sys.exit(128 + signum)            # the finally block stops the fleet


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--driver"]:
        address, b, groups = argv[1], int(argv[2]), int(argv[3])
        print(json.dumps(drive(address, b, groups)), flush=True)
        return 0
    p = argparse.ArgumentParser(prog="python -m fakes.ray.pgperf", description=__doc__.splitlines()[0])
    p.add_argument("--bundles", default="1,10,20,40")
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--kind", default="raylet", choices=("raylet", "fakelet"))
    p.add_argument("--gcs-stats", action="store_true",
                   help="have the GCS print its event-loop statistics (INFO logging: five log lines per bundle, "
                        "which slows it; the figure is measured without)")
    p.add_argument("--out", type=Path, default=Path("results/fidelity-scale/ray"))
    p.add_argument("--logs", type=Path, default=None, help="the fleet's and Ray's logs (default: a new /tmp folder)")
    p.add_argument("--add", action="store_true",
                   help="add this run's repeats to the result files already there (the figure: the median of all)")
    p.add_argument("--quiet-load", type=float, default=1.5,
                   help="first wait until the 1-minute load average is below this (a previous fleet keeps it up)")
    p.add_argument("--quiet-wait-s", type=float, default=900.0, help="... for at most this long (then run anyway)")
    a = p.parse_args(argv)
    try:
        bundle_counts = [int(x) for x in a.bundles.split(",")]
        if min(bundle_counts) < 1 or a.groups < 1 or a.nodes < 1 or a.repeat < 1:
            raise ValueError
    except ValueError:
        print("--bundles: comma-separated positive integers; --groups, --nodes, --repeat >= 1", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
    a.out.mkdir(parents=True, exist_ok=True)
    command = "python -m fakes.ray.pgperf " + " ".join(shlex.quote(x) for x in argv)
    t_wait = time.monotonic()
    while os.getloadavg()[0] >= a.quiet_load and time.monotonic() - t_wait < a.quiet_wait_s:
        time.sleep(5)
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    load_before = [round(x, 2) for x in os.getloadavg()]
    logs = a.logs or Path(tempfile.mkdtemp(prefix="gs-pgperf-"))
    out: dict[str, Any] = {}
    try:
        bench(out, a.kind, a.nodes, bundle_counts, a.groups, a.repeat, logs, a.gcs_stats)
    finally:
        for path in write(out, a.groups, a.out, command, started, load_before, a.add) if out.get("per_bundles") else []:
            doc = json.loads(path.read_text())
            print(f"{path}: {doc['figure']} groups/s (repeats {doc['spread']})")
    print(f"logs: {logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
