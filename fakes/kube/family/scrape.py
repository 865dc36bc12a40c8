"""Control-plane figures: kube-apiserver, etcd and the scheduler's /metrics condensed, object
sizes read from etcd, the endpoints a Prometheus scrapes."""
from __future__ import annotations

import base64
import json
from typing import Any

from fakes.kube import metrics as kube_metrics
from fakes.kube.cluster import get_text
from fakes.kube.refusal import reason_of


class ControlPlaneScrape:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

    def metrics_endpoints(self) -> list[dict[str, Any]]:
        """kube-apiserver and kube-scheduler (the admin client certificate, self-signed serving
        certificates) and etcd, when this run started them or was given them."""
        if self.cluster is None or self.api is None:
            return []
        conf = self.api.api_client.configuration
        tls = {"cert_file": conf.cert_file, "key_file": conf.key_file, "tls_insecure": True}
        out = [{"name": "kube-apiserver", "url": f"{self.cluster.url}/metrics", **tls}]
        if self.cluster.scheduler_metrics_url:
            out.append({"name": "kube-scheduler", "url": self.cluster.scheduler_metrics_url, **tls})
        if self.cluster.etcd_url:
            out.append({"name": "etcd", "url": f"{self.cluster.etcd_url}/metrics"})
        return out

    def live_control_plane(self) -> dict[str, Any]:
        return self._live

    # --- control plane ----------------------------------------------------------------------------
    def _scrape(self) -> dict[str, Any]:
        """Scheduler, apiserver and etcd /metrics, condensed; never raises."""
        out = self._scheduler_figures()
        try:
            out["apiserver"] = kube_metrics.apiserver_figures(get_text(self.api.api_client, "/metrics"))
        except Exception as e:
            out["apiserver_error"] = reason_of(e)
        if self.cluster.etcd_url:
            out["etcd"] = kube_metrics.fetch(self.cluster.etcd_url + "/metrics", kube_metrics.etcd_figures)
        return out

    # etcd key prefixes of the objects whose size the simulated control plane uses
    OBJECTS = {"pod": "/registry/pods/", "node": "/registry/minions/", "lease": "/registry/leases/kube-node-lease/",
               "podgroup": "/registry/scheduling.volcano.sh/podgroups/"}

    def _object_bytes(self, sample: int = 50) -> dict[str, float | None]:
        """Mean stored size of each kind of object, read from etcd itself (what its database holds)."""
        out: dict[str, float | None] = {}
        for kind, prefix in self.OBJECTS.items():
            try:
                r = self.cluster.etcdctl("get", prefix, "--prefix", f"--limit={sample}", "-w", "json", timeout=30)
                kvs = json.loads(r.stdout).get("kvs") or []
                sizes = [len(base64.b64decode(kv["value"])) for kv in kvs]
                out[kind] = round(sum(sizes) / len(sizes), 1) if sizes else None
            except Exception:       # a figure, never a reason for the run to fail
                out[kind] = None
        return out

    def _scrape_loop(self) -> None:
        """Keeps the latest figures for snapshots, off the caller's thread."""
        every = float(self.cfg.get("scrape_interval_s", 10))
        while not self._stop.wait(every):
            self._live = self._scrape()

    def control_plane(self) -> dict[str, Any]:
        out = dict(self.figures)
        if self.cluster and self.cluster.restarts:
            out["component_restarts"] = self.cluster.restarts
        if self._final is not None:
            out.update(self._final)
        elif self.api is not None:
            out.update(self._scrape())
            out["etcd_object_bytes"] = self._object_bytes()
        out["restart_to_readmission_s"] = kube_metrics.quantiles(self.readmission_s)
        if self.startup:
            out.update(self.images.figures(self.clock.now()))
        out["backend"] = "real"
        return out
