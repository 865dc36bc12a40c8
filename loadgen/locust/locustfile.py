"""gangstorm's Locust entry point: `locust -f loadgen/locust/locustfile.py --scenario S [--headless -t 5m]`.

One user per tenant of the scenario; each sends its tenant's share of the seeded workload open
loop (a greenlet per submission, at the scheduled time) to every selected scheduler. Two request
types reach Locust's statistics: SUBMIT (scheduled send -> submit call returned) and ADMIT
(scheduled send -> last gang member bound), named "<scheduler>/<job class>". Percentiles are
exact (loadgen.locust.stats). See docs/locust.md.
"""
from __future__ import annotations

import gevent
from locust import User, events, task

from loadgen.locust import stats as locust_stats
from loadgen.locust.options import add_arguments
from loadgen.locust.session import SESSION

locust_stats.install()


class TenantUser(User):
    """Sends one tenant's jobs; with fewer users than tenants the process sends the rest."""

    host = "gangstorm://local"      # not HTTP: targets are in-process models or local backends

    def __init__(self, environment):
        super().__init__(environment)
        self.tenant = SESSION.claim()   # at construction, before the process adopts unclaimed tenants

    @task
    def send_schedule(self):
        if self.tenant is not None:
            SESSION.run_tenant(self.tenant)
        while True:                     # schedule done (or nothing to send): stay until the test stops
            gevent.sleep(3600)


@events.init_command_line_parser.add_listener
def _args(parser, **_kw):
    add_arguments(parser)


@events.init.add_listener
def _init(environment, **_kw):
    SESSION.init(environment)


@events.test_start.add_listener
def _start(environment, **_kw):
    SESSION.test_start(environment)


@events.spawning_complete.add_listener
def _spawned(user_count, **_kw):
    SESSION.spawning_complete()


@events.test_stop.add_listener
def _stop(environment, **_kw):
    SESSION.test_stop(environment)


@events.quitting.add_listener
def _quitting(environment, **_kw):
    SESSION.quitting(environment)
