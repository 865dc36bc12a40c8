"""The few Prometheus HTTP API calls gangstorm needs, over urllib (standard library only, so it
works in any process: Locust workers, the CLI, tests)."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

# Loopback only: an http_proxy in the environment must not see these requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PromQueryError(RuntimeError):
    """The API answered status "error" (bad PromQL, timeout, ...) or could not be reached."""


class PromClient:
    """Instant queries, the active targets and readiness of the Prometheus at base_url."""

    def __init__(self, base_url: str, timeout_s: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def ready(self) -> bool:
        """GET /-/ready answers 200 (TSDB open, serving queries)."""
        try:
            with _OPENER.open(self.base_url + "/-/ready", timeout=2.0) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def query(self, expr: str, at: float | datetime | None = None) -> list[dict]:
        """Instant query. A vector (or matrix) result as the API returns it, a list of
        {"metric": {...}, "value": [ts, "v"]}; a scalar or string result as one such entry with
        an empty metric."""
        form = {"query": expr}
        if at is not None:
            form["time"] = f"{at.timestamp() if isinstance(at, datetime) else float(at):.3f}"
        data = self._api("/api/v1/query", form, what=expr, post=True)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def query_scalar(self, expr: str, at: float | datetime | None = None) -> float | None:
        """The one value of a scalar or single-series result; None when the vector is empty."""
        result = self.query(expr, at)
        if not result:
            return None
        if len(result) > 1:
            raise PromQueryError(f"{expr!r}: {len(result)} series, expected one")
        if "value" not in result[0]:
            raise PromQueryError(f"{expr!r}: a range vector, expected an instant value")
        return float(result[0]["value"][1])

    def targets(self) -> list[dict]:
        """Active targets: job, url, health ("up"/"down"/"unknown"), lastError, lastScrape."""
        data = self._api("/api/v1/targets", {"state": "active"}, what="targets")
        return [{"job": t["labels"].get("job", t.get("scrapePool", "")),
                 "instance": t["labels"].get("instance", ""),
                 "url": t["scrapeUrl"], "health": t["health"], "lastError": t.get("lastError", ""),
                 "lastScrape": t.get("lastScrape")}
                for t in data["activeTargets"]]

    def _api(self, path: str, params: dict[str, str], what: str, post: bool = False) -> dict:
        """GET (or POST, for queries of any length) an /api/v1 endpoint and return its "data"."""
        encoded = urllib.parse.urlencode(params)
        if post:
            req = urllib.request.Request(self.base_url + path, data=encoded.encode(), method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        else:
            req = urllib.request.Request(f"{self.base_url}{path}?{encoded}")
        try:
            with _OPENER.open(req, timeout=self.timeout_s) as resp:
                payload = json.load(resp)
        except urllib.error.HTTPError as e:        # 400/422/503 carry a JSON error body
            payload = _json_or_none(e.read()) or {"status": "error", "errorType": f"http {e.code}",
                                                   "error": e.reason}
        except (urllib.error.URLError, OSError) as e:
            raise PromQueryError(f"{what!r}: Prometheus at {self.base_url} unreachable: {e}") from None
        if payload.get("status") != "success":
            raise PromQueryError(f"{what!r}: {payload.get('errorType', 'error')}: {payload.get('error', payload)}")
        return payload["data"]


def _json_or_none(raw: bytes) -> dict | None:
    try:
        return json.loads(raw)
    except ValueError:
        return None
