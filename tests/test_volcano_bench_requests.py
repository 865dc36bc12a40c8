"""The tuning-guide bench's apiserver breakdown (fakes/kube/metrics.py, read by
fakes/volcano/costcurve.py): which requests the job controller and the scheduler made over the
bench, and their mean latency, from the apiserver's own request histogram differenced over the
interval."""
from fakes.kube.metrics import apiserver_requests, requests_during

H = "apiserver_request_duration_seconds"


def _text(pods_sum: float, pods_n: int, pg_sum: float, pg_n: int) -> str:
    return "\n".join([
        f"# TYPE {H} histogram",
        f'{H}_sum{{component="apiserver",group="",resource="pods",subresource="",verb="POST",version="v1"}} {pods_sum}',
        f'{H}_count{{component="apiserver",group="",resource="pods",subresource="",verb="POST",version="v1"}} {pods_n}',
        f'{H}_sum{{group="",resource="pods",subresource="binding",verb="POST",version="v1"}} 0.5',
        f'{H}_count{{group="",resource="pods",subresource="binding",verb="POST",version="v1"}} 10',
        f'{H}_sum{{component="apiserver",group="scheduling.volcano.sh",resource="podgroups",subresource="",'
        f'verb="POST",version="v1beta1"}} {pg_sum}',
        f'{H}_count{{component="apiserver",group="scheduling.volcano.sh",resource="podgroups",subresource="",'
        f'verb="POST",version="v1beta1"}} {pg_n}',
        'apiserver_request_total{verb="POST"} 99',
    ])


def test_requests_are_keyed_by_verb_resource_and_subresource():
    got = apiserver_requests(_text(1.0, 100, 2.0, 50))
    assert got == {"POST pods": (1.0, 100.0), "POST pods/binding": (0.5, 10.0), "POST podgroups": (2.0, 50.0)}


def test_only_requests_made_during_the_interval_are_reported_with_their_mean():
    before = apiserver_requests(_text(1.0, 100, 2.0, 50))
    after = apiserver_requests(_text(4.0, 300, 2.0, 50))
    assert requests_during(before, after) == {"POST pods": {"n": 200, "mean_ms": 15.0}}
