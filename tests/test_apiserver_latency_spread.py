"""The kube real backends record the spread of the apiserver's request latency, not only its mean:
p50 and p99 per request kind from apiserver_request_duration_seconds' buckets, interpolated as
Prometheus' histogram_quantile does (exact numbers on constructed metrics text)."""
from fakes.kube.metrics import apiserver_figures
from support.apiserver_text import apiserver_text

TEXT = apiserver_text()


def test_p50_and_p99_per_request_kind():
    f = apiserver_figures(TEXT)
    assert f["request_ms_mean"]["create_pod"] == 8.0
    assert f["request_ms_p50"]["create_pod"] == 9.0          # 5 + 5 x (50 - 10) / (60 - 10) ms
    assert f["request_ms_p99"]["create_pod"] == 50.0         # 25 + 25 x (99 - 95) / (99 - 95) ms
    assert f["request_ms_mean"]["bind_pod"] == 5.0
    assert f["request_ms_p50"]["bind_pod"] == 5.0
    assert f["request_ms_p99"]["bind_pod"] == 9.9            # 5 + 5 x (99 - 50) / (100 - 50) ms


def test_a_request_kind_never_seen_has_no_quantile():
    f = apiserver_figures(TEXT)
    assert f["request_ms_p50"]["create_podgroup"] is None and f["request_ms_p99"]["create_podgroup"] is None


def test_how_many_requests_of_each_kind_the_apiserver_answered():
    # POST pods and POST pods/binding are told apart by the subresource; a kind not seen counts 0
    counts = apiserver_figures(TEXT)["request_count"]
    assert (counts["create_pod"], counts["bind_pod"], counts["update_podgroup"]) == (100, 100, 0)
