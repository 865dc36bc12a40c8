"""Browser test: headless Chromium opens Locust's web UI, sees the live "Gang admission" tab.

Chromium (tests/support/browser.py) is driven over the DevTools protocol. A screenshot goes to test-artifacts/.
"""
from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request

import pytest

from support.browser import ARTIFACTS
from support.locust_process import LOCUSTFILE, free_port


def _get(url: str) -> dict:
    return json.load(urllib.request.urlopen(url, timeout=10))


@pytest.mark.browser
def test_web_ui_shows_live_gang_admission_tab(tmp_path, run_locust, chromium):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: webui\nseed: 3\nduration_h: 2\nfleet: {nodes: 400}\nworkload: {tenants: 3}\n")
    port = free_port()
    run_locust("-f", str(LOCUSTFILE), "--web-port", str(port), "--scenario", str(scenario),
               "--results-dir", str(tmp_path / "out"))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            _get(f"{base}/stats/requests")
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)

    # the start form carries gangstorm's own arguments
    chromium.open(base + "/")
    deadline = time.monotonic() + 30
    while "time_scale" not in chromium.text().lower().replace(" ", "_") and time.monotonic() < deadline:
        time.sleep(0.5)
    form = chromium.text()
    assert re.search(r"scenario", form, re.I) and re.search(r"schedulers", form, re.I), form[:2000]

    body = urllib.parse.urlencode({"user_count": 3, "spawn_rate": 3, "scenario": str(scenario),
                                   "schedulers": "kube,slurm", "time_scale": "300"}).encode()
    started = json.load(urllib.request.urlopen(f"{base}/swarm", data=body, timeout=10))
    assert started["success"], started
    deadline = time.monotonic() + 60       # the run is up once test_start (targets, plan) is done
    while _get(f"{base}/stats/requests")["state"] != "running" and time.monotonic() < deadline:
        time.sleep(0.3)

    chromium.open(f"{base}/?tab=gangstorm")
    seen = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = chromium.text()
        m = re.search(r"kube/small\s+(\d+)\s+(\d+)\s+([\d.]+)", seen)
        if "gang admission" in seen.lower() and "slurm/" in seen and m and int(m.group(2)) > 0:
            break
        time.sleep(1)
    chromium.screenshot(ARTIFACTS / "locust-webui-gang-admission.png")
    assert "gang admission" in seen.lower(), seen[:3000]     # tab titles are upper-cased by CSS
    m = re.search(r"kube/small\s+(\d+)\s+(\d+)\s+([\d.]+)", seen)
    assert m and int(m.group(2)) > 0, seen[:3000]
    first_admitted = int(m.group(2))
    low = seen.lower()
    assert "p99.9" in low and "gpus allocated" in low and "control plane" in low

    time.sleep(5)   # live: the numbers move without a reload
    m2 = re.search(r"kube/small\s+(\d+)\s+(\d+)", chromium.text())
    assert m2 and int(m2.group(2)) > first_admitted
    # the same rows, exact, straight from the master's collector
    rows = _get(f"{base}/gangstorm/rows")
    chromium.open(base + "/?tab=stats")             # Locust's own table has the exact 99.9 % column
    deadline = time.monotonic() + 20
    while "99.9%" not in chromium.text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "99.9%" in chromium.text()
    assert {r["name"].split("/")[0] for r in rows} == {"kube", "slurm"}
    urllib.request.urlopen(urllib.request.Request(f"{base}/stop", method="POST"), timeout=60).read()
    summary = _get(f"{base}/gangstorm/summary.json")
    assert set(summary["schedulers"]) == {"kube", "slurm"} and summary["complete"] is True
