"""Creates whose client cost is small: JSON bodies encoded once, POSTed on keep-alive connections.

The official Python client spends, per create, the CPU of a pydantic-validated call (the dict
becomes a V1Pod and is sanitised back), and with `_preload_content=False` it hands back an unread
response, so the connection never returns to the pool: the next create opens a new TLS
connection, and the apiserver pays a handshake too. `JsonPoster` keeps the client's
configuration (server, CA, client certificate, bearer token with its refresh hook, TLS server
name, timeouts) and its urllib3 pool, and POSTs bytes encoded once per object (`encode`), reading
each answer so its connection is reused. Failures look like the client's: a non-2xx answer raises
kubernetes.client.ApiException with the status and the apiserver's Status body (409, 422, 429,
5xx and etcd's NOSPACE are told apart by fakes/kube/refusal.py as before); a transport error is
urllib3's own exception, as before. Only the kubeconfig's server is ever addressed: every path is
appended to that host.

    poster = JsonPoster(api.api_client)
    poster.post(f"/api/v1/namespaces/{ns}/pods", encode(body), timeout=(10, 60))
"""
from __future__ import annotations

import json
from typing import Any

import urllib3

JSON = "application/json"


def encode(body: dict[str, Any]) -> bytes:
    """An object's request body, encoded once (retries resend the same bytes)."""
    return json.dumps(body, separators=(",", ":")).encode()


def pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def custom_path(group: str, version: str, namespace: str, plural: str) -> str:
    return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"


class JsonPoster:
    """POSTs on the connection pool of a kubernetes.client.ApiClient (same TLS and auth)."""

    def __init__(self, api_client):
        self.cfg = api_client.configuration
        self.host = self.cfg.host.rstrip("/")
        self.pool = api_client.rest_client.pool_manager
        self.headers = {"Content-Type": JSON, "Accept": JSON,
                        "User-Agent": f"gangstorm-poster {api_client.user_agent}"}

    def _headers(self) -> dict[str, str]:
        auth = self.cfg.auth_settings().get("BearerToken")   # runs the kubeconfig's token refresh hook
        return {**self.headers, "Authorization": auth["value"]} if auth and auth.get("value") else self.headers

    def post(self, path: str, data: bytes, timeout: tuple[float, float] | float | None = None) -> int:
        """POST data to host+path; returns the status (2xx), raises ApiException otherwise."""
        from kubernetes.client import ApiException
        if isinstance(timeout, tuple):
            timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        elif timeout is not None:
            timeout = urllib3.Timeout(total=timeout)
        resp = self.pool.request("POST", self.host + path, body=data, headers=self._headers(), timeout=timeout,
                                 preload_content=True)     # read to the end: the connection goes back to the pool
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason,
                               body=resp.data.decode("utf-8", errors="replace"))
        return resp.status

    def connections_opened(self) -> int:
        """How many connections the pool has opened so far (each one a TLS handshake)."""
        return opened(self.pool, self.host)


def opened(pool_manager, host: str) -> int:
    """Connections a urllib3 PoolManager has opened to host so far."""
    return int(pool_manager.connection_from_url(host).num_connections)
