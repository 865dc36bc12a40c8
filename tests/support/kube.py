"""The real Kubernetes backend's test settings, the binaries check and a wall-clock driver."""
from __future__ import annotations

import time

import pytest

from fakes.kube.cluster import BinariesMissing, require_binaries

KUBE_DEFAULTS = {"percentage_of_nodes_to_score": None, "scoring": "least_allocated", "gpu_weight": 3,
                 "api_qps": 50, "api_burst": 100, "coscheduling": False, "permit_timeout_s": 60}


@pytest.fixture(scope="module")
def bins():
    try:
        return require_binaries()
    except BinariesMissing as e:
        pytest.fail(str(e), pytrace=False)


def drive(target, jobs, until_s, stop_when=None, tick=0.05):
    """Open-loop wall-clock driver: submit each job at submit_s, advance continuously."""
    start = time.monotonic()
    pending = sorted(jobs, key=lambda j: j.submit_s)
    events = []
    while True:
        now = time.monotonic() - start
        while pending and pending[0].submit_s <= now:
            events += target.submit(pending.pop(0), now)
        events += target.advance(now)
        if now > until_s or (not pending and stop_when and stop_when(events)):
            return events, now
        time.sleep(tick)
