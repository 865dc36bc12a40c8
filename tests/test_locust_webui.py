"""Browser test: headless Chromium opens Locust's web UI, sees the live "Gang admission" tab.

Chromium is Debian's package (`make browser-deps`); it is driven over the DevTools protocol with
websocket-client (already in the venv through kubernetes). A screenshot goes to test-artifacts/.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from locust_support import LOCUSTFILE, ROOT, free_port, run_locust  # noqa: F401

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"


class Chromium:
    """Just enough of the DevTools protocol: open a page, evaluate JS, take a screenshot."""

    def __init__(self, profile: Path):
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--disable-background-timer-throttling",
                 "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows",
                 f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
                 "--remote-debugging-port=0", "--window-size=1600,1000", "about:blank"]
        self.proc = subprocess.Popen([CHROMIUM, *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self.ws = None
        self.seq = 0

    def open(self, url: str) -> None:
        """A new page (tab) at url; later calls talk to it."""
        import websocket
        if self.ws is not None:
            self.ws.close()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?{urllib.parse.quote(url, safe='')}",
                                     method="PUT")
        target = json.load(urllib.request.urlopen(req, timeout=10))
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.call("Page.bringToFront")

    def call(self, method: str, **params):
        self.seq += 1
        self.ws.send(json.dumps({"id": self.seq, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.seq:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def text(self) -> str:
        r = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                      returnByValue=True)
        return r["result"].get("value") or ""

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(self.proc.pid):
                self.proc.poll()
                time.sleep(0.1)
        self.proc.poll()


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return any(st and not st.startswith("Z") for st in out.split())


@pytest.fixture
def chromium(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run `make browser-deps` (apt-get install chromium)")
    browser = Chromium(tmp_path / "chromium-profile")
    try:
        yield browser
    finally:
        browser.close()
        assert not _alive(browser.proc.pid), "chromium left processes behind"


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
