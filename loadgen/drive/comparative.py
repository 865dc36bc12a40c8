"""A comparative run: one run plan (jobs, chaos, window) replayed on each scheduler in turn.

The summary is rewritten after every scheduler (and on interruption), so a killed run still
leaves results/<run-id>/summary.json with "complete": false and what it had measured.
"""
from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.drive.lifecycle import Lifecycle
from loadgen.drive.runner import VirtualClock, WallClock
from loadgen.drive.runner import run as drive
from loadgen.drive.timescale import scaled_chaos, scaled_job
from loadgen.input.plan import RunPlan, plan_run
from loadgen.input.scenario import Scenario
from loadgen.live.prometheus import RunPrometheus
from loadgen.live.prometheus import exact as promrun_exact
from loadgen.measure import hostcpu
from loadgen.measure.recorder import Recorder
from loadgen.model.errors import BackendError, UserError
from loadgen.model.registry import target_class
from loadgen.model.target import ClusterRefused, Existing, TargetContext
from loadgen.output import markdown as report
from loadgen.output.storage import RunStore, fresh_run_dir, new_run_id
from loadgen.output.summary import header, scheduler_result

RESULTS_ROOT = Path("results")


@dataclass
class RunOptions:
    schedulers: list[str]
    backend: str = "sim"                       # "sim" or "real" (applies to every scheduler)
    out_dir: Path | None = None                # default results/<run-id>
    results_root: Path = RESULTS_ROOT
    time_scale: float = 60.0                   # wall-clock backends: virtual seconds per wall second
    trace: str | None = None
    progress: Callable[[str, float], None] | None = None
    jobs_csv: bool = True
    report: bool = True                        # report.html at the end (ceiling points skip it)
    on_start: Callable[[Path], None] | None = None   # called once the run folder exists
    existing: Existing | None = None           # attach the real targets to this cluster
    run_id: str = ""                           # labels what the run creates (default: the run id)
    # wall-clock runs: serve gangstorm's metrics and the fake DCGM exporter on these 127.0.0.1
    # ports while running (None: not served; 0: any free port)
    metrics_port: int | None = None
    dcgm_port: int | None = None
    prometheus: bool = False                   # wall-clock runs: a real Prometheus per scheduler (promrun.py)
    exposed: Any = None                        # set by run(): loadgen.live.endpoint.Exposed
    extra: dict = field(default_factory=dict)


def run(scenario: Scenario, opts: RunOptions, plan: RunPlan | None = None) -> dict:
    """Every scheduler on one plan (built here unless the caller validated and built it already)."""
    t_start, started = time.monotonic(), time.time()
    plan = plan or plan_run(scenario, opts.trace)
    run_id = new_run_id(scenario.name)
    out = Path(opts.out_dir) if opts.out_dir else fresh_run_dir(opts.results_root, run_id)
    if not opts.run_id:
        # unique per run even for two started in the same second: the label is all that tells
        # two runs' objects apart on a shared cluster
        opts = replace(opts, run_id=f"{run_id}-{secrets.token_hex(3)}")
    summary = header(run_id, scenario, plan)
    store = RunStore.create(out, summary)
    if opts.on_start:
        opts.on_start(out)
    exposed = None
    if opts.backend == "real" and (opts.metrics_port is not None or opts.dcgm_port is not None or opts.prometheus):
        from loadgen.live.endpoint import Exposed
        spec = scenario.startup().scaled(opts.time_scale).activity
        exposed = Exposed(plan.fleet, spec, opts.metrics_port or 0, opts.dcgm_port or 0)
        opts = replace(opts, exposed=exposed)
        summary["metrics_endpoints"] = {"gangstorm": exposed.gangstorm.address, "dcgm": exposed.dcgm.address}
        print(f"gangstorm: metrics on http://{exposed.gangstorm.address}/metrics, "
              f"fake DCGM exporter on http://{exposed.dcgm.address}/metrics", file=sys.stderr)
    try:
        for name in opts.schedulers:
            summary["running"] = name
            store.write_summary(summary)
            try:
                result, rec = run_one(scenario, name, opts, plan, store)
            except Interrupted as cut:          # kept, marked partial; "running" still names it
                summary["schedulers"][name] = cut.result
                summary["wall_s"] = round(time.monotonic() - t_start, 3)
                store.commit(summary, [(name, opts.backend, cut.recorder)] if opts.jobs_csv else [])
                raise
            summary["schedulers"][name] = result
            summary["running"] = None
            summary["wall_s"] = round(time.monotonic() - t_start, 3)
            try:
                store.commit(summary, [(name, opts.backend, rec)] if opts.jobs_csv else [])
            except UserError:                   # not written (a full disk): cut short, its rows absent
                summary["schedulers"].pop(name, None)
                summary["running"] = name
                raise
        summary["complete"] = True
    finally:
        if exposed is not None:
            exposed.stop()
        summary["wall_s"] = round(time.monotonic() - t_start, 3)
        store.write_summary(summary)
        store.write_text("summary.md", report.render(summary))
    summary["_dir"] = str(out)
    if in_results_root(out, opts.results_root):
        add_to_index(Path(opts.results_root), summary, out, started)
    if opts.report:
        write_report(out)
    return summary


def in_results_root(out: Path, root: Path) -> bool:
    """A run folder directly in the results folder (the default results/<run-id>, or --out
    results/<name>) is indexed; one elsewhere (a tmp dir, a ceiling point) is not."""
    try:
        return Path(out).resolve().parent == Path(root).resolve()
    except OSError:
        return False


def add_to_index(root: Path, summary: dict, out: Path, started: float) -> None:
    """results/index.jsonl gets the finished run. The run is on disk already: an index that cannot
    be written is a warning."""
    from loadgen.output import index
    try:
        index.append(root, index.entry(summary, out, started))
    except (OSError, ValueError) as e:
        print(f"gangstorm: warning: {root}/{index.INDEX} not updated ({e})", file=sys.stderr)


def with_host_cpu(cp: dict, share: float | None, drive_s: float, window_s: float) -> dict:
    """A wall-clock run's control-plane figures with this machine's CPU while it was driven: the
    share of all cores busy, and as busy_s["host-cpu"] the same share of the arrival window, so
    the ceiling's load table puts the machine next to the scheduler's own components."""
    if share is None:
        return cp
    cp = dict(cp)
    cp["host_cpu"] = {"busy_share": share, "cores": hostcpu.cores(), "driven_s": round(drive_s, 3)}
    cp["busy_s"] = {**(cp.get("busy_s") or {}), "host-cpu": round(share * window_s, 6)}
    return cp


def write_report(out: Path) -> Path | None:
    """report.html of a finished run (`gangstorm report` rebuilds it, also for a partial run). The
    results are already on disk, so a report that fails to build is a warning, not a failed run."""
    from loadgen.output.html import build
    try:
        return build(out)
    except Exception as e:          # noqa: BLE001 (the run's own files stand without the page)
        print(f"gangstorm: warning: report.html not written ({type(e).__name__}: {e}); "
              f"retry with `gangstorm report {out}`", file=sys.stderr)
        return None


def target_context(scenario: Scenario, name: str, plan: RunPlan, opts: RunOptions, run_dir: Path | None,
                   scale: float, run_id: str) -> TargetContext:
    return TargetContext(fleet=plan.fleet, config=scenario.scheduler_config(name),
                         control_plane=scenario.section("control_plane"), seed=scenario.seed, run_dir=run_dir,
                         time_scale=scale, existing=opts.existing if opts.backend == "real" else None,
                         run_id=run_id, startup=scenario.startup().scaled(scale))


class Interrupted(KeyboardInterrupt):
    """A signal during a real or attached scheduler's run (minutes to hours of a control plane's
    measurements): it still ends the run as an interrupt, carrying that scheduler's result and
    rows so far, marked partial, for the run folder to keep."""

    def __init__(self, result: dict, recorder: Recorder):
        super().__init__()
        self.result, self.recorder = result, recorder


def partial_result(rec: Recorder, scenario: Scenario, name: str, backend: str, plan: RunPlan, cut: float,
                   scale: float, target) -> tuple[dict, Recorder]:
    """The result of a wall-clock run cut at `cut` seconds: the jobs sent so far (a job not yet
    submitted has no row), their measurements up to the cut, and `partial` saying what is missing."""
    rec.close(cut)
    sent = rec.subset(np.flatnonzero(~np.isnan(rec.sent)))
    try:
        cp = target.control_plane()
    except Exception:               # noqa: BLE001 (a control plane that is stopping: figures absent)
        cp = {}
    result = scheduler_result(sent, scenario, name, backend, cut, plan.fleet, cp)
    result["partial"] = {"reason": "interrupted", "cut_at_s": round(cut, 3), "jobs_sent": len(sent.jobs),
                         "jobs_planned": len(rec.jobs),
                         "note": "rows and figures of the jobs sent before the signal, measured up to it"}
    result["time_scale"] = scale
    result["latency_clock"] = "wall seconds (real control-plane latency, not scaled)"
    return result, sent


def run_one(scenario: Scenario, name: str, opts: RunOptions, plan: RunPlan,
            store: RunStore | None) -> tuple[dict, Recorder]:
    """One scheduler on the plan: its summary entry and its recorder. Writes nothing itself (a real
    backend keeps its logs under the store's folder). A signal while a wall-clock target is driven
    ends in Interrupted, carrying what it measured until then."""
    cut: dict = {}
    try:
        return _run_one(scenario, name, opts, plan, store, cut)
    except KeyboardInterrupt:
        if "at" not in cut:
            raise
        raise Interrupted(*partial_result(cut["rec"], scenario, name, opts.backend, plan, cut["at"], cut["scale"],
                                          cut["target"])) from None


def _run_one(scenario: Scenario, name: str, opts: RunOptions, plan: RunPlan, store: RunStore | None,
             cut: dict) -> tuple[dict, Recorder]:
    cls = target_class(name, opts.backend)
    wall = cls.timebase == "wall"
    scale = opts.time_scale if wall else 1.0
    run_dir = store.dir / f"{name}-{opts.backend}" if store else None
    if wall and run_dir:
        run_dir.mkdir(parents=True, exist_ok=True)
    ctx = target_context(scenario, name, plan, opts, run_dir, scale, opts.run_id or scenario.name)
    target = Lifecycle(cls(ctx), ctx.startup, plan.fleet, scenario.seed)
    jobs = [scaled_job(j, scale) for j in plan.jobs] if wall else plan.jobs
    chaos = scaled_chaos(plan.chaos, scale) if wall else plan.chaos
    rec = Recorder(jobs, ctx.startup.activity, plan.fleet.pools)
    if wall and opts.exposed is not None:
        opts.exposed.publisher.attach(name, rec)
    prom = scraped = None
    lo, hi = plan.window
    rec.set_window(lo / scale, hi / scale)
    sample_s = max(scenario.data["sample_every_s"] / scale, 0.5) if wall else scenario.data["sample_every_s"]
    progress = (lambda f: opts.progress(name, f)) if opts.progress else None
    t0 = time.monotonic()
    try:
        try:
            target.start()
        except (KeyboardInterrupt, UserError):
            raise
        except ClusterRefused as e:
            raise UserError(str(e)) from None
        except Exception as e:
            if not wall:
                raise
            logs = f"; logs in {run_dir}" if run_dir else ""
            raise BackendError(f"{name} ({opts.backend}) did not start: {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}{logs}") from e
        clock = WallClock() if wall else VirtualClock()
        cpu0, d0 = (hostcpu.read(), time.monotonic()) if wall else (None, 0.0)
        if wall and opts.prometheus and opts.exposed is not None:
            prom = RunPrometheus(run_dir / "prometheus", opts.exposed.gangstorm.address, opts.exposed.dcgm.address,
                                 target.metrics_endpoints())
            prom.start()
        try:
            end = drive(target, jobs, chaos, plan.end_s / scale, sample_s, rec, clock, progress, stop_when_done=wall)
        except KeyboardInterrupt:
            if wall:                    # a real or attached run keeps what it recorded (see Interrupted)
                cut.update(at=clock.now(), rec=rec, target=target, scale=scale)
            raise
        if prom is not None:
            opts.exposed.publisher.refresh(end)
            scraped = prom.harvest(name)
        cp = target.control_plane()
        if wall:
            cp = with_host_cpu(cp, hostcpu.busy_share(cpu0, hostcpu.read()), time.monotonic() - d0, (hi - lo) / scale)
    finally:
        if prom is not None:
            prom.stop()
        target.stop()
        left = target.after_stop().get("left_behind") or {}
        if any(left.values()):
            print(f"gangstorm: warning: {name} left objects labelled with its run on the existing cluster: "
                  + ", ".join(f"{v} {k}" for k, v in left.items() if v), file=sys.stderr)
    cp = {**cp, **target.after_stop()}
    result = scheduler_result(rec, scenario, name, opts.backend, end, plan.fleet, cp)
    result["wall_s"] = round(time.monotonic() - t0, 3)
    if scraped is not None:
        result["prometheus"] = {**scraped, "exact": promrun_exact(result)}
    if wall:
        result["time_scale"] = scale
        result["latency_clock"] = "wall seconds (real control-plane latency, not scaled)"
    return result, rec
