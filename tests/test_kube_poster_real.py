"""The kube-family create path (fakes/kube/poster.py) against a real kube-apiserver: no nodes, no
scheduler (needs `make k8s-bins`)."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from fakes.kube.cluster import ClusterSpec, KubeCluster, leftover_processes
from fakes.kube.family.calls import release
from fakes.kube.pods import GPU, pod_spec
from fakes.kube.poster import JsonPoster, encode, opened, pods_path
from fakes.kube.refusal import message_of, reason_of

pytestmark = pytest.mark.real
NS = "poster"


@pytest.fixture(scope="module")
def cluster(bins, tmp_path_factory):
    from kubernetes import client as k8s
    run_dir = tmp_path_factory.mktemp("poster-real")
    with KubeCluster(ClusterSpec(name="poster", workdir=run_dir, scheduler=False)) as c:
        api = k8s.CoreV1Api(c.api_client(4))
        api.create_namespace({"metadata": {"name": NS}}, _preload_content=False)
        for _ in range(240):            # pods are refused until the namespace's default ServiceAccount exists
            try:
                api.read_namespaced_service_account("default", NS, _preload_content=False)
                break
            except k8s.ApiException:
                time.sleep(0.5)
        yield c
    assert leftover_processes(under=run_dir) == [], "control-plane processes left behind"


def body(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": {"gangstorm.io/job-id": "7", **labels}},
            "spec": pod_spec({GPU: "1", "cpu": "1", "memory": "1Gi"})}


def test_creates_reuse_kept_alive_connections(cluster):
    from kubernetes import client as k8s
    poster = JsonPoster(cluster.api_client(8))
    with ThreadPoolExecutor(3) as pool:
        statuses = list(pool.map(lambda i: poster.post(pods_path(NS), encode(body(f"p{i}", batch="a")),
                                                       timeout=(10, 60)), range(30)))
    assert statuses == [201] * 30
    assert poster.connections_opened() <= 3           # one TLS connection per thread, kept alive
    api = k8s.CoreV1Api(cluster.api_client(2))
    items = json.loads(api.list_namespaced_pod(NS, label_selector="batch=a", _preload_content=False).data)["items"]
    assert sorted(p["metadata"]["name"] for p in items) == sorted(f"p{i}" for i in range(30))
    assert all(p["spec"]["containers"][0]["resources"]["limits"] == {GPU: "1"} for p in items)


def test_refusals_read_as_the_python_clients(cluster):
    """409 (the adapter counts an existing pod as created) and 422 (rejected at once, with the
    apiserver's words) come back as the official client's ApiException does."""
    from kubernetes import client as k8s
    poster = JsonPoster(cluster.api_client(2))
    api = k8s.CoreV1Api(cluster.api_client(2))
    poster.post(pods_path(NS), encode(body("dup")))
    for bad, status in ((body("dup"), 409), (body("Not_A_Name"), 422)):
        with pytest.raises(k8s.ApiException) as new:
            poster.post(pods_path(NS), encode(bad), timeout=(10, 60))
        with pytest.raises(k8s.ApiException) as old:
            api.create_namespaced_pod(NS, bad, _preload_content=False)
        assert new.value.status == old.value.status == status
        assert reason_of(new.value) == reason_of(old.value) == f"api-{status}"
        assert message_of(new.value) == message_of(old.value)
    assert "Invalid value" in message_of(new.value)


def test_released_answers_give_their_connection_back(cluster):
    """The Python client's `_preload_content=False` answer keeps its connection until read:
    release() (what the family's _retry does with every answer) returns it to the pool."""
    from kubernetes import client as k8s
    client = cluster.api_client(4)
    api = k8s.CoreV1Api(client)
    before = opened(client.rest_client.pool_manager, client.configuration.host)
    for i in range(5):
        release(api.create_namespaced_pod(NS, body(f"r{i}"), _preload_content=False))
    assert opened(client.rest_client.pool_manager, client.configuration.host) - before == 1
    for i in range(5):
        api.create_namespaced_pod(NS, body(f"u{i}"), _preload_content=False)     # never read
    assert opened(client.rest_client.pool_manager, client.configuration.host) - before >= 5
