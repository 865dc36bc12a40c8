"""Glue between Locust's events and gangstorm, for the local runner, the master and workers.

local:  Process (targets, users' schedules) + Collector in one process.
master: Collector; assigns each worker a shard (tenants + fleet share) through the
        parsed options it sends with the spawn message, and merges the workers' raw rows,
        which ride on Locust's own worker reports (report_to_master / worker_report).
        On one existing cluster (one-target mode) it also runs the observing Process: workers
        submit their tenants' jobs to the whole fleet, the master watches it once for all.
worker: Process only; on "gangstorm_flush" (sent by the master at test stop) it finishes its
        targets and marks its next report final. The master waits for every shard's final.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import gevent
from locust.runners import MasterRunner, WorkerRunner

from loadgen.input.scenario import ScenarioError
from loadgen.locust.collect import Collector
from loadgen.locust.options import OptionError, Settings
from loadgen.locust.options import settings as parse_settings
from loadgen.locust.plan import build
from loadgen.locust.process import Process
from loadgen.model.errors import UserError
from loadgen.output.storage import new_run_id

log = logging.getLogger("gangstorm.locust")
FLUSH = "gangstorm_flush"
FINAL_WAIT_S = 30.0
ONE_TARGET = "one-target"        # several processes, one existing cluster (workers submit, the master observes)
SPLIT_FLEET = "split-fleet"      # several processes, each driving its own share of the fleet
WORKER_LEAD_S = 5.0              # workers' schedule starts this long after the master's observer is up


class Session:
    def __init__(self):
        self.env = None
        self.process: Process | None = None
        self.collector: Collector | None = None
        self.shards: dict[str, int] = {}
        self.over: set[str] = set()
        self.flushed = False
        self.ended = False
        self.summary_at = 0.0
        self.partial = None
        self.own_shard = 0               # shard index of this process's own rows in the collector

    # --- init -------------------------------------------------------------------------------
    def init(self, environment) -> None:
        self.env = environment
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            environment.events.report_to_master.add_listener(self._report)
            runner.register_message(FLUSH, self._on_flush)
            return
        try:   # the command line values are also the web form's defaults: reject bad ones now
            parse_settings(environment.parsed_options)
        except (OptionError, ScenarioError) as e:
            sys.stderr.write(f"gangstorm: error: {e}\n")
            sys.exit(2)
        if isinstance(runner, MasterRunner):
            environment.events.worker_report.add_listener(self._worker_report)
        if environment.web_ui:
            from loadgen.locust.web import install
            install(environment, self.rows, self.summary_path)

    def _settings(self) -> Settings | None:
        try:
            return parse_settings(self.env.parsed_options)
        except (OptionError, ScenarioError) as e:   # a bad value typed into the web form
            log.error("gangstorm: error: %s", e)
            gevent.spawn(self.env.runner.stop)
            return None

    def _plan(self, st: Settings):
        """The run plan, or None after a bad trace or workload (read only now, when the test
        starts) has been said in one line and Locust told to quit with status 2: an error here
        would otherwise leave Locust running with no user, until someone stops it."""
        try:
            return _build(st)
        except UserError as e:
            sys.stderr.write(f"gangstorm: error: {e}\n")
            self.env.process_exit_code = 2
            gevent.spawn(self.env.runner.quit)
            return None

    def _fire(self, request_type: str, name: str, response_time, exception) -> None:
        self.env.events.request.fire(request_type=request_type, name=name, response_time=response_time,
                                     response_length=0, exception=exception, context={})

    # --- test start ---------------------------------------------------------------------------
    def test_start(self, environment) -> None:
        self.flushed, self.ended, self.over = False, False, set()
        self.summary_at = time.monotonic() + 30.0
        self.partial = None
        runner = environment.runner
        opts = environment.parsed_options
        if isinstance(runner, WorkerRunner):
            st = self._settings()
            if st is None:
                return
            shards = dict(getattr(opts, "gangstorm_shards", None) or {})
            index = shards.get(runner.client_id, runner.worker_index if runner.worker_index >= 0 else 0)
            run_dir = getattr(opts, "gangstorm_run_dir", None)
            one = getattr(opts, "gangstorm_mode", None) == ONE_TARGET
            plan = self._plan(st)
            if plan is None:
                return
            self.process = Process(st, self._fire, index, max(len(shards), 1), Path(run_dir) if run_dir else None,
                                   plan=plan, role="submit" if one else "all",
                                   t0_epoch=getattr(opts, "gangstorm_t0", None) if one else None,
                                   run_id=getattr(opts, "gangstorm_run_label", None) if one else None)
            return
        st = self._settings()
        if st is None:
            return
        plan = self._plan(st)
        if plan is None:
            return
        run_id = new_run_id(st.scenario.name)
        out = Path(st.results_dir) if st.results_dir else Path("results") / run_id
        info = {"users": getattr(opts, "num_users", None), "run_time_s": getattr(opts, "run_time", None)}
        if isinstance(runner, MasterRunner):
            workers = sorted(c.id for c in runner.clients.all)
            self.shards = {wid: i for i, wid in enumerate(workers)}
            opts.gangstorm_shards = self.shards
            opts.gangstorm_run_dir = str(out)
            info["workers"] = len(workers)
            info["mode"] = ONE_TARGET if st.existing else SPLIT_FLEET
            self.collector = Collector(plan, run_id, out, info)
            if st.existing:
                self._observe_for_workers(st, plan, out, len(workers))
        else:
            self.shards = {}
            info["workers"] = 0
            info["mode"] = "one process"
            self.collector = Collector(plan, run_id, out, info)
            self.process = Process(st, self._fire, 0, 1, out, plan=plan, on_pump=self._local_pump)
        if isinstance(runner, MasterRunner) and not getattr(opts, "run_time", None):
            # normally every worker says when its schedule is over; this is the fallback
            gevent.spawn_later(plan.wall_duration_s + 120, self._scenario_over)
        log.info("gangstorm: %s, %d jobs over %.0f s wall (x%g), schedulers %s (%s), results in %s",
                 st.scenario.name, len(plan.jobs), plan.wall_duration_s, st.time_scale,
                 ",".join(st.schedulers), st.backend, out)

    def _observe_for_workers(self, st: Settings, plan, out: Path, workers: int) -> None:
        """One existing cluster, several processes: the master observes (one watch for all), runs the
        chaos plan and cleans up; the workers only submit. They share the run label and the
        schedule's start, which they read from the options this sends with the spawn message."""
        opts = self.env.parsed_options
        label = Process.run_id(out)
        self.own_shard = workers                 # the master's rows after the workers' shards
        self.process = Process(st, self._fire, workers, workers, out, plan=plan, on_pump=self._local_pump,
                               role="observe", run_id=label)
        t0 = time.time() + WORKER_LEAD_S         # after the observer's setup: workers start now
        self.process.start_at(t0)
        opts.gangstorm_mode, opts.gangstorm_t0, opts.gangstorm_run_label = ONE_TARGET, t0, label

    def _scenario_over(self) -> None:
        """No --run-time: stop when the scenario (arrivals + drain) is over; headless runs end."""
        if self.ended or getattr(self.env.parsed_options, "run_time", None):
            return
        self.ended = True
        runner = self.env.runner
        log.info("gangstorm: scenario over")
        if self.env.parsed_options.headless:
            runner.quit()
        elif runner.state in ("running", "spawning"):
            runner.stop()

    def _local_pump(self, process: Process) -> None:
        self.collector.ingest(process.take(), self.own_shard)
        self._partial_summary()
        if process.scenario_over and not self.ended:
            gevent.spawn(self._scenario_over)

    def _partial_summary(self) -> None:
        """summary.json as the run goes ("complete": false), replayed on a thread off the event loop
        (from a frozen copy) so the sends keep their schedule; at most every 30 s."""
        now = time.monotonic()
        if now < self.summary_at or (self.partial is not None and not self.partial.ready()):
            return
        frozen = self.collector.frozen()
        took = time.monotonic() - now            # the copy is the only part on the loop
        self.summary_at = now + max(30.0, 1000 * took)
        self.partial = gevent.get_hub().threadpool.spawn(frozen.summary, False)

    def _wait_partial(self) -> None:
        if self.partial is not None:
            self.partial.wait(timeout=60)    # a late partial must not overwrite the final summary

    # --- users --------------------------------------------------------------------------------
    def claim(self) -> str | None:
        return self.process.claim() if self.process else None

    def run_tenant(self, tenant: str) -> None:
        self.process.run_tenant(tenant)

    def spawning_complete(self, **_kw) -> None:
        if self.process:
            self.process.adopt_leftovers()

    # --- stop ---------------------------------------------------------------------------------
    def test_stop(self, environment) -> None:
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            if self.process:
                self.process.finalize()
            return
        if self.collector is None or self.flushed:
            return
        self.flushed = True
        shards = max(len(self.shards), 1)
        if isinstance(runner, MasterRunner):
            for wid in self.shards:
                runner.send_message(FLUSH, None, wid)
            deadline = time.monotonic() + FINAL_WAIT_S
            while time.monotonic() < deadline and not self.collector.done(len(self.shards)):
                gevent.sleep(0.2)
            if not self.collector.done(len(self.shards)):
                log.error("gangstorm: not every worker sent its final report; summary marked incomplete")
            if self.process:                     # one target: the observer finishes after the senders
                self.process.finalize()
                self.collector.ingest(self.process.take(), self.own_shard)
                shards = len(self.shards) + 1
        elif self.process:
            self.process.finalize()
            self.collector.ingest(self.process.take())
        self._wait_partial()
        done = self.collector.done(shards)
        s = self.collector.summary(complete=done, write_jobs=True)
        log.info("gangstorm: wrote %s/summary.json", self.collector.out)
        self._publish(s, done)
        for name, r in s["schedulers"].items():
            a = r["admission_s"]
            log.info("gangstorm: %s admission p50 %s p99 %s p99.9 %s s (n=%d), send lateness p99.9 %s s",
                     name, a["p50"], a["p99"], a["p999"], a["count"], r["generator_lateness_wall_s"]["p999"])

    def _publish(self, summary: dict, done: bool) -> None:
        """As `gangstorm run` does: the run in results/index.jsonl (when it finished and sits in
        results/) and its report.html."""
        from loadgen.drive.comparative import RESULTS_ROOT, add_to_index, in_results_root, write_report
        out = Path(self.collector.out)
        if done and in_results_root(out, RESULTS_ROOT):
            add_to_index(RESULTS_ROOT, summary, out, time.time() - summary["wall_s"])
        if write_report(out):
            log.info("gangstorm: wrote %s/report.html", out)

    def quitting(self, environment, **_kw) -> None:
        """Give Locust's CSV writer one more pass so the files hold the final (exact) numbers."""
        if not isinstance(environment.runner, WorkerRunner) and environment.parsed_options.csv_prefix:
            from locust import stats
            gevent.sleep(stats.CSV_STATS_INTERVAL_SEC + 0.3)

    # --- distributed plumbing -----------------------------------------------------------------
    def _on_flush(self, environment, msg, **_kw) -> None:
        if self.process:
            self.process.finalize()

    def _report(self, client_id, data) -> None:
        if self.process:
            data["gangstorm"] = self.process.take()
            data["gangstorm_over"] = self.process.scenario_over

    def _worker_report(self, client_id, data) -> None:
        batch = data.get("gangstorm")
        if batch and self.collector is not None and client_id in self.shards:
            self.collector.ingest(batch, self.shards[client_id])
            if not self.flushed:
                self._partial_summary()
        if data.get("gangstorm_over") and client_id in self.shards:
            self.over.add(client_id)
            if self.over >= set(self.shards) and not self.ended:
                gevent.spawn(self._scenario_over)

    # --- web ----------------------------------------------------------------------------------
    def rows(self) -> list[dict]:
        return self.collector.rows() if self.collector else []

    def summary_path(self) -> Path | None:
        return self.collector.out / "summary.json" if self.collector else None


def _build(st: Settings):
    """The workload plan, built on gevent's thread pool: generating tens of thousands of jobs takes
    long enough that, run on the loop, it would stall Locust's heartbeats."""
    return gevent.get_hub().threadpool.apply(build, (st,))


SESSION = Session()
