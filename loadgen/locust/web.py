"""The "Gang admission" tab in Locust's web UI (locust 2.x extended tabs).

Locust's UI polls /stats/requests every couple of seconds; an after_request hook adds
`extended_stats` rows for the tab declared in template_args, so the tab refreshes live with no
JavaScript of our own. Keys are plain lowercase words because the UI camel-cases keys.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

KEY = "gangstorm"
COLUMNS = [
    ("name", "Scheduler / class"), ("sent", "Sent"), ("admitted", "Admitted"),
    ("p50", "Admission p50 (s)"), ("p99", "p99 (s)"), ("p999", "p99.9 (s)"), ("failed", "Failed/rejected"),
    ("gpus", "GPUs allocated"), ("partialgpus", "GPUs in partial gangs"), ("partialgangs", "Partial gangs"),
    ("pending", "Pending jobs"), ("running", "Running jobs"), ("lateness", "Send lateness p99.9 (ms)"),
    ("controlplane", "Control plane"),
]


def ui_rows(rows: list[dict]) -> list[dict]:
    return [{"name": r["name"], "sent": r["sent"], "admitted": r["admitted"],
             "p50": _s(r["p50_s"]), "p99": _s(r["p99_s"]), "p999": _s(r["p999_s"]), "failed": r["failed"],
             "gpus": r["gpus_allocated"], "partialgpus": r["gpus_partial"], "partialgangs": r["partial_gangs"],
             "pending": r["pending_jobs"], "running": r["running_jobs"],
             "lateness": _s(r["lateness_p999_ms"]), "controlplane": r["control_plane"]} for r in rows]


def _s(v) -> str:
    return "" if v is None else f"{v:.3f}"


def install(environment, rows: Callable[[], list[dict]], summary_path: Callable[[], Path | None]) -> None:
    from flask import Response, request

    web_ui = environment.web_ui
    web_ui.template_args["extended_tabs"] = [{"title": "Gang admission", "key": KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": KEY, "structure": [{"key": k, "title": t} for k, t in COLUMNS]}]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./gangstorm/summary.json", "title": "Download gangstorm summary.json"}]

    @web_ui.app.after_request
    def _extend(response):
        if request.path != "/stats/requests" or not response.is_json:
            return response
        data = response.get_json()
        data["extended_stats"] = [{"key": KEY, "data": ui_rows(rows())}]
        response.set_data(json.dumps(data))
        return response

    @web_ui.app.route("/gangstorm/rows")
    def _rows():
        return Response(json.dumps(rows()), mimetype="application/json")

    @web_ui.app.route("/gangstorm/summary.json")
    def _summary():
        path = summary_path()
        if path is None or not path.exists():
            return Response('{"error": "no run yet"}', status=404, mimetype="application/json")
        return Response(path.read_text(), mimetype="application/json")
