"""The kube-family create path's request, without a server: what it sends and to whom."""
from __future__ import annotations

import json

from fakes.kube.poster import JsonPoster, custom_path, encode, pods_path


def api_client(**cfg):
    from kubernetes import client as k8s
    c = k8s.Configuration(host="https://127.0.0.1:6443")
    for k, v in cfg.items():
        setattr(c, k, v)
    return k8s.ApiClient(c)


def test_bodies_are_encoded_once_as_compact_json():
    body = {"metadata": {"name": "j1-m0", "labels": {"gangstorm.io/tenant": "Team A"}}, "spec": {"x": [1, 2]}}
    data = encode(body)
    assert json.loads(data) == body and b" " not in data.replace(b"Team A", b"")
    assert pods_path("ns1") == "/api/v1/namespaces/ns1/pods"
    assert custom_path("scheduling.k8s.io", "v1alpha2", "ns1", "podgroups") == \
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns1/podgroups"


def test_only_the_kubeconfig_server_and_its_token():
    """The host is the client's; a bearer token is sent with its prefix and refreshed by the
    kubeconfig's hook before every request, as the Python client does; client-cert auth sends none."""
    assert "Authorization" not in JsonPoster(api_client())._headers()
    calls = []

    def refresh(cfg):
        calls.append(1)
        cfg.api_key["authorization"] = f"tok{len(calls)}"

    poster = JsonPoster(api_client(api_key={"authorization": "tok0"}, api_key_prefix={"authorization": "Bearer"},
                                   refresh_api_key_hook=refresh))
    assert poster.host == "https://127.0.0.1:6443"
    assert poster._headers()["Authorization"] == "Bearer tok1"
    assert poster._headers()["Authorization"] == "Bearer tok2"
    assert poster._headers()["Content-Type"] == "application/json"
