"""Headless Chromium for the browser tests, driven over the DevTools protocol with websocket-client
(already in the venv through kubernetes). Chromium is Debian's package (`make browser-deps`).

Used by tests/test_locust_webui.py (Locust's web UI) and tests/test_report.py (report.html from disk).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from support.paths import ROOT

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

    def eval(self, expression: str):
        """The value of a JS expression in the page (returned by value: JSON-like)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

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
