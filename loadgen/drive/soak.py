"""`gangstorm soak`: one scenario driven without pause against one scheduler, in rolling windows.

The target (an attached cluster, or one the real backend launches) is started once and driven on
one wall clock for the whole soak. Window k (1-based, [start, end) in seconds since the soak
began) offers a fresh workload of the scenario, drawn with seed `seed + k - 1` at the churn the
schedule gives for its start, time-scaled as `gangstorm run` does; its job ids are
k * ID_STRIDE + the generated id, so no two windows share a name on the cluster.

Jobs straddling a boundary: a job belongs to the window its intended submit time falls in, and
admission is measured, open loop, from that intended time. When a window closes, its row and
folder say what was known then: the jobs admitted by the close give its quantiles; the jobs still
waiting are counted (`pending_at_close`, summary.json's never_admitted, and admission_s_incl_pending
with each censored at its age at the close). They keep running on the cluster; a later admission
shows in the live histograms (counted when it happens) but does not rewrite the closed window.
The fleet-wide figures of a window (GPUs held by partial gangs, etcd's size) come from its
samples, whatever window the jobs holding them belong to.

SIGINT or SIGTERM closes the current window as partial (the jobs sent so far, measured up to the
signal: verify checks it as an interrupted run's), stops the target, which deletes everything
labelled with the soak's run label, counts what is left into soak.json, and stops every process
the soak started.
"""
from __future__ import annotations

import math
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.drive.comparative import RESULTS_ROOT, RunOptions, in_results_root, target_context
from loadgen.drive.lifecycle import Lifecycle
from loadgen.drive.runner import WallClock
from loadgen.drive.timescale import scaled_job
from loadgen.input.plan import RunPlan
from loadgen.input.scenario import Scenario
from loadgen.input.soak import ChurnSchedule, SoakBounds
from loadgen.input.workload import generate
from loadgen.live.endpoint import MetricsEndpoint
from loadgen.live.soak import SoakExposition
from loadgen.measure.recorder import Recorder
from loadgen.model.errors import BackendError, UserError
from loadgen.model.registry import component, target_class
from loadgen.model.signals import signals_held
from loadgen.model.target import ClusterRefused, Existing
from loadgen.output import markdown
from loadgen.output import soak as soakfiles
from loadgen.output.storage import RunStore, check_out_dir, fresh_run_dir, new_run_id
from loadgen.output.summary import header, scheduler_result

ID_STRIDE = 10_000_000        # window k's job ids start at k * ID_STRIDE (a window plans far fewer)
SCRAPE_S = 2.0                # the soak's Prometheus scrapes and evaluates its rules this often


@dataclass
class SoakOptions:
    scheduler: str
    bounds: SoakBounds
    churn: ChurnSchedule
    backend: str = "real"
    time_scale: float = 60.0
    until_epoch: float | None = None         # --until as a deadline (epoch seconds); sets bounds.until_s
    existing: Existing | None = None
    results_root: Path = RESULTS_ROOT
    out_dir: Path | None = None
    metrics_port: int = 0                    # gangstorm's endpoint, always served (0: any free port)
    prometheus: bool = False                 # the project's Prometheus, with gangstorm's rules
    clock: Any = None                        # default WallClock(); tests pass one on a simulated clock
    epoch: Callable[[], float] = time.time   # for the rows' UTC times
    on_start: Callable[[dict], None] | None = None      # the soak.json head, once the folder exists
    on_window: Callable[[dict], None] | None = None     # each closed window's row
    extra: dict = field(default_factory=dict)


def window_scenario(scenario: Scenario, k: int, churn: float) -> Scenario:
    return scenario.with_overrides(**{"seed": scenario.seed + k - 1, "workload.churn_multiplier": churn})


def window_plan(scenario: Scenario, k: int, start_s: float, end_s: float, scale: float) -> RunPlan:
    """Window k's workload in virtual seconds since the soak began (its scenario already carries
    the window's seed and churn)."""
    jobs, info = generate(scenario, duration_h=(end_s - start_s) * scale / 3600.0)
    jobs = [replace(j, id=k * ID_STRIDE + j.id, submit_s=j.submit_s + start_s * scale) for j in jobs]
    return RunPlan(jobs=jobs, workload_info=info.as_dict(), fleet=scenario.fleet(), chaos=[],
                   horizon_s=(end_s - start_s) * scale, end_s=(end_s - start_s) * scale, warmup_s=0.0)


class Book:
    """Which window's recorder each job's events go to (a job keeps its window)."""

    def __init__(self) -> None:
        self.owner: dict[int, Recorder] = {}

    def add(self, rec: Recorder) -> None:
        for j in rec.jobs:
            self.owner[j.id] = rec

    def record(self, events) -> None:
        for e in events:
            rec = self.owner.get(e.job_id)
            if rec is not None:
                rec.record([e])

    def forget_settled(self) -> None:
        done = {id(r) for r in set(self.owner.values())
                if bool((~np.isnan(r.finish) | r.failed | r.rejected).all())}
        self.owner = {j: r for j, r in self.owner.items() if id(r) not in done}


class Soak:
    def __init__(self, scenario: Scenario, opts: SoakOptions):
        self.scenario, self.opts = scenario, opts
        self.name, self.backend = opts.scheduler, opts.backend
        self.clock = opts.clock or WallClock()
        self.soak_id = new_run_id(scenario.name)
        self.out = Path(opts.out_dir) if opts.out_dir else fresh_run_dir(opts.results_root, self.soak_id)
        self.label = f"{self.soak_id}-{secrets.token_hex(3)}"
        self.indexed = in_results_root(self.out, opts.results_root)
        self.fleet = scenario.fleet()
        self.book = Book()
        self.rows: list[dict] = []
        self.prom = None
        self.endpoint: MetricsEndpoint | None = None
        self.t0_epoch = 0.0
        self.head: dict[str, Any] = {}

    # --- the soak -----------------------------------------------------------------------------------
    def run(self) -> dict:
        opts, scenario = self.opts, self.scenario
        check_out_dir(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        classes = list(scenario.section("workload")["classes"])
        self.expo = SoakExposition(self.name, classes, scenario.data["slo"]["admission_p99_s"], self.fleet.total_gpus)
        cls = target_class(self.name, self.backend)
        run_dir = self.out / f"{self.name}-{self.backend}"
        run_dir.mkdir(parents=True, exist_ok=True)
        ropts = RunOptions(schedulers=[self.name], backend=self.backend, existing=opts.existing)
        ctx = target_context(scenario, self.name, window_plan(scenario, 1, 0.0, opts.bounds.window_s,
                                                                opts.time_scale),
                             ropts, run_dir, opts.time_scale, self.label)
        self.target = Lifecycle(cls(ctx), ctx.startup, self.fleet, scenario.seed)
        self.head = {
            "kind": "soak", "soak_id": self.soak_id, "dir": self.out.name, "label": self.label,
            "scenario": scenario.name, "scenario_path": scenario.path, "seed": scenario.seed,
            "scheduler": self.name, "backend": self.backend, "nodes": self.fleet.nodes,
            "attached": opts.existing is not None, "time_scale": opts.time_scale,
            "window_s": opts.bounds.window_s, "windows_bound": opts.bounds.windows, "until_s": opts.bounds.until_s,
            "churn_schedule": opts.churn.as_list(), "slo": dict(scenario.data["slo"]),
            "complete": False, "ended_by": None, "started": None, "windows": self.rows, **opts.extra,
        }
        self.endpoint = MetricsEndpoint(self.expo.render, opts.metrics_port)
        self.head["metrics_endpoint"] = f"http://{self.endpoint.address}/metrics"
        try:
            self._start_target()
            if opts.prometheus:
                self._start_prometheus(run_dir / "prometheus")
            self.t0_epoch = opts.epoch()
            if opts.until_epoch is not None:      # --until is a deadline: the windows end there
                left = opts.until_epoch - self.t0_epoch
                if left <= 0:
                    raise UserError("--until: the deadline passed while the target started; nothing was driven")
                self.opts = opts = replace(opts, bounds=replace(opts.bounds, until_s=left))
                self.head["until_s"] = round(left, 3)
            self.head["started"] = soakfiles._utc(self.t0_epoch)
            self._save()
            if opts.on_start:
                opts.on_start(self.head)
            self._drive()
            self.head.update(complete=True, ended_by="windows" if opts.bounds.windows is not None
                             and len(self.rows) >= opts.bounds.windows else "until")
        except KeyboardInterrupt:
            self.head["ended_by"] = "signal"
            raise
        except BaseException as e:
            self.head["ended_by"] = f"error: {type(e).__name__}"
            raise
        finally:
            with signals_held():
                self._stop()
        return self.head

    def _start_target(self) -> None:
        try:
            self.target.start()
        except (KeyboardInterrupt, UserError):
            raise
        except ClusterRefused as e:
            raise UserError(str(e)) from None
        except Exception as e:
            raise BackendError(f"{self.name} ({self.backend}) did not start: {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}; logs in {self.out}") from e

    def _start_prometheus(self, work: Path) -> None:
        from urllib.parse import urlsplit
        prom = component("prometheus")
        jobs = [prom.ScrapeJob("gangstorm", [self.endpoint.address], interval_s=SCRAPE_S)]
        for e in self.target.metrics_endpoints():
            u = urlsplit(e["url"])
            jobs.append(prom.ScrapeJob(e["name"], [u.netloc], scheme=u.scheme, metrics_path=u.path or "/metrics",
                                       interval_s=SCRAPE_S, tls_insecure=bool(e.get("tls_insecure")),
                                       cert_file=e.get("cert_file"), key_file=e.get("key_file")))
        self.prom = prom.PrometheusServer(work, jobs).start()
        self.prom.wait_for_scrapes("gangstorm", n=1, timeout_s=60)
        self.head["prometheus"] = {"url": self.prom.url, "rules": [str(f) for f in self.prom.rule_files],
                                   "scrape_s": SCRAPE_S}

    def _drive(self) -> None:
        scale = self.opts.time_scale
        # the scenario's sampling, but at least 20 samples a window: the live gauges (pending jobs,
        # partial gangs) and the histograms are refreshed at each sample
        sample_s = max(min(self.scenario.data["sample_every_s"] / scale, self.opts.bounds.window_s / 20), 0.5)
        self.clock.start()
        next_sample, k = 0.0, 1
        while (span := self.opts.bounds.window(k)) is not None:
            lo, hi = span
            churn = self.opts.churn.at(lo)
            scen = window_scenario(self.scenario, k, churn)
            plan = window_plan(scen, k, lo, hi, scale)
            jobs = [scaled_job(j, scale) for j in plan.jobs]
            rec = Recorder(jobs, self.target.spec.activity)
            rec.set_window(lo, hi)
            self.book.add(rec)
            self.expo.add(rec, k, churn)
            self.current = (k, lo, hi, churn, scen, plan, rec)
            next_sample = self._drive_window(jobs, hi, rec, sample_s, next_sample)
            with signals_held():        # a signal now would find the window half written
                self._close(cut=None)
            k += 1

    def _drive_window(self, jobs, hi: float, rec: Recorder, sample_s: float, next_sample: float) -> float:
        target, clock, book = self.target, self.clock, self.book
        i = 0
        while True:
            upcoming = min(jobs[i].submit_s if i < len(jobs) else math.inf, next_sample, hi)
            t = clock.wait(upcoming, target.next_wakeup())
            if t >= hi:
                break
            book.record(target.advance(t))
            while i < len(jobs) and jobs[i].submit_s <= t:
                now = clock.now()
                rec.sent_at(jobs[i].id, now)
                book.record(target.submit(jobs[i], now))
                i += 1
            if next_sample <= t:
                snap = target.snapshot(clock.now())
                rec.sample(snap)
                self.expo.sample(snap)
                while next_sample <= t:
                    next_sample += sample_s
        now = clock.now()
        book.record(target.advance(now))
        snap = target.snapshot(now)
        rec.sample(snap)
        self.expo.sample(snap)
        return next_sample

    # --- closing a window ---------------------------------------------------------------------------
    def _close(self, cut: float | None) -> None:
        """Window k's folder, row (soak.json, index) and last-window gauges; `cut`: the time a
        signal ended it (only the jobs sent by then are kept, marked partial)."""
        k, lo, hi, churn, scen, plan, rec = self.current
        end = hi if cut is None else cut
        rec.close(end)
        if cut is not None:
            rec = rec.subset(np.flatnonzero(~np.isnan(rec.sent)))
        live = getattr(self.target.target, "live_control_plane", None)
        try:
            cp = live() if live is not None else self.target.control_plane()
        except Exception:          # noqa: BLE001 (a control plane that is stopping: figures absent)
            cp = {}
        result = scheduler_result(rec, scen, self.name, self.backend, end, self.fleet, cp)
        result["time_scale"] = self.opts.time_scale
        result["latency_clock"] = "wall seconds (real control-plane latency, not scaled)"
        if cut is not None:
            result["partial"] = {"reason": "interrupted", "cut_at_s": round(cut, 3), "jobs_sent": len(rec.jobs),
                                 "jobs_planned": len(plan.jobs),
                                 "note": "rows and figures of the jobs sent before the signal, measured up to it"}
        summary = header(f"{self.soak_id}-w{k:04d}", scen, plan,
                         soak={"soak_id": self.soak_id, "window": k, "start_s": round(lo, 3), "end_s": round(end, 3),
                               "churn_multiplier": churn, "label": self.label})
        store = RunStore.create(soakfiles.window_dir(self.out, k), summary)
        summary["schedulers"][self.name] = result
        summary["running"] = self.name if cut is not None else None
        summary["complete"] = cut is None
        store.commit(summary, [(self.name, self.backend, rec)])
        store.write_text("summary.md", markdown.render(summary))
        alerts, prom = self._prometheus_now()
        row = soakfiles.window_row(self.head, k, lo, end, self.t0_epoch, churn, {self.name: result},
                                   {self.name: rec.samples}, alerts, prom)
        self.rows.append(row)
        self._save()
        if self.indexed:
            soakfiles.append_index(Path(self.opts.results_root), row)
        self.expo.close_window({c: v["p99"] for c, v in row["admission_s"][self.name].items() if c != "all"})
        self.book.forget_settled()
        if self.opts.on_window:
            self.opts.on_window(row)

    def _prometheus_now(self) -> tuple[list[str] | None, dict | None]:
        """The alerts firing and the rolling p99 the rules record, as the soak's Prometheus has them."""
        if self.prom is None:
            return None, None
        try:
            alerts = [m.get("alertname", "") for m in self.prom.firing()]
            p99 = {r["metric"].get("class", ""): _num(r["value"][1])
                   for r in self.prom.query('scheduler_class:gangstorm_admission_seconds:p99_rate5m')}
            late = self.prom.query_scalar("max(scheduler:gangstorm_generator_lateness_seconds:p99_rate5m)")
            etcd = self.prom.query_scalar("cluster:etcd_mvcc_db_total_size_in_bytes:max")
        except Exception as e:     # noqa: BLE001 (a query that fails is recorded, the soak goes on)
            return None, {"error": str(e).splitlines()[0][:200]}
        return alerts, {"admission_p99_rate5m": p99, "generator_lateness_p99_rate5m": _num(late),
                        "etcd_db_bytes": _num(etcd)}

    def interrupted(self) -> None:
        """Called with the signal's KeyboardInterrupt in flight: the current window kept partial."""
        if getattr(self, "current", None) is None or len(self.rows) >= self.current[0]:
            return
        with signals_held():
            self._close(cut=self.clock.now())

    # --- the end ------------------------------------------------------------------------------------
    def _stop(self) -> None:
        if self.head.get("ended_by") == "signal":
            try:
                self.interrupted()
            except Exception as e:     # noqa: BLE001 (the cleanup below must still run)
                print(f"gangstorm: warning: the interrupted window was not written ({type(e).__name__}: {e})",
                      file=sys.stderr)
        if self.prom is not None:
            self.prom.stop()
        target = getattr(self, "target", None)
        if target is not None:
            try:
                target.stop()
            finally:
                left = (target.after_stop() or {}).get("left_behind")
                if left is not None:
                    self.head["left_behind"] = left
                    if any(left.values()):
                        print(f"gangstorm: warning: {self.name} left objects labelled with the soak on the cluster: "
                              + ", ".join(f"{v} {k}" for k, v in left.items() if v), file=sys.stderr)
        if self.endpoint is not None:
            self.endpoint.stop()
        if self.head:
            self._save()
            if self.rows:
                from loadgen.output.html.soak import build
                try:
                    build(self.out)
                except Exception as e:      # noqa: BLE001 (the soak's own files stand without the page)
                    print(f"gangstorm: warning: report.html not written ({type(e).__name__}: {e}); "
                          f"retry with `gangstorm report {self.out}`", file=sys.stderr)

    def _save(self) -> None:
        soakfiles.write(self.out, self.head)


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return round(f, 6) if math.isfinite(f) else None
