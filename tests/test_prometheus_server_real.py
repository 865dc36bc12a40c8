"""A real Prometheus (Debian 2.42) started by PrometheusServer scrapes a fixed exposition on
127.0.0.1 and answers PromQL with the exact numbers the exposition implies."""
from __future__ import annotations

import bisect
import os

import pytest

from fakes.prom import PrometheusMissing, PrometheusServer, PromQueryError, ScrapeJob
from fakes.real import procs
from loadgen.live.endpoint import MetricsEndpoint

pytestmark = pytest.mark.real

# A counter over two series, a gauge, and a histogram of 10 known observations.
COUNTER = {"a": 3, "b": 4}
GAUGE = 2.5
BOUNDS = [0.1, 0.25, 0.5, 1.0]
OBSERVATIONS = [0.05, 0.12, 0.2, 0.22, 0.3, 0.4, 0.45, 0.6, 0.7, 0.9]


def cumulative_buckets() -> list[tuple[float, int]]:
    """(le, observations <= le) for every bound and +Inf, as a client library would expose them."""
    ordered = sorted(OBSERVATIONS)
    return [(le, bisect.bisect_right(ordered, le)) for le in BOUNDS] + [(float("inf"), len(ordered))]


def exposition() -> bytes:
    lines = ["# HELP demo_total Things done.", "# TYPE demo_total counter"]
    lines += [f'demo_total{{kind="{k}"}} {v}' for k, v in COUNTER.items()]
    lines += ["# HELP demo_inflight Things in flight.", "# TYPE demo_inflight gauge", f"demo_inflight {GAUGE}"]
    lines += ["# HELP demo_seconds Time per thing.", "# TYPE demo_seconds histogram"]
    for le, count in cumulative_buckets():
        lines.append(f'demo_seconds_bucket{{le="{"+Inf" if le == float("inf") else le}"}} {count}')
    lines += [f"demo_seconds_sum {sum(OBSERVATIONS)}", f"demo_seconds_count {len(OBSERVATIONS)}"]
    return ("\n".join(lines) + "\n").encode()


def quantile_by_hand(q: float) -> float:
    """Prometheus' histogram_quantile: find the first bucket whose cumulative count reaches
    rank = q * total, then interpolate linearly between its lower and upper bound."""
    buckets = cumulative_buckets()
    rank = q * buckets[-1][1]
    b = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    lower, below = (buckets[b - 1] if b > 0 else (0.0, 0))
    upper, count = buckets[b]
    return lower + (upper - lower) * ((rank - below) / (count - below))


@pytest.fixture(scope="module")
def exporter():
    endpoint = MetricsEndpoint(lambda: exposition().decode())      # what gangstorm serves its metrics with
    yield endpoint.address
    endpoint.stop()


@pytest.fixture(scope="module")
def prom(exporter, tmp_path_factory):
    with PrometheusServer(tmp_path_factory.mktemp("prom"), [ScrapeJob("demo", [exporter], interval_s=0.5)]) as p:
        p.wait_for_scrapes("demo", n=2, timeout_s=30)
        yield p


def group_members(pgid: int) -> list[int]:
    """Live processes in process group pgid or in session pgid."""
    members = set(procs.session_pids(pgid))
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid and procs.alive(int(d)):
                    members.add(int(d))
            except OSError:
                pass
    return sorted(members)


def test_the_hand_computed_p90_uses_the_interpolation_rule():
    # 10 observations: 7 <= 0.5, 10 <= 1.0; rank 9 lies 2/3 of the way through the (0.5, 1.0] bucket.
    assert quantile_by_hand(0.9) == 0.5 + 0.5 * (2 / 3)


def test_the_counter_sum_and_the_gauge_are_exact(prom):
    assert prom.query_scalar("sum(demo_total)") == sum(COUNTER.values()) == 7
    assert prom.query_scalar("demo_inflight") == GAUGE
    assert prom.query_scalar("sum(demo_seconds_count)") == len(OBSERVATIONS)


def test_histogram_quantile_matches_linear_interpolation_by_hand(prom):
    expr = "histogram_quantile(0.9, sum by (le) (demo_seconds_bucket))"
    assert prom.query_scalar(expr) == quantile_by_hand(0.9)
    assert prom.query_scalar("histogram_quantile(0.5, sum by (le) (demo_seconds_bucket))") == quantile_by_hand(0.5)


def test_query_returns_the_vector_with_labels(prom):
    result = prom.query("demo_total")
    assert sorted((r["metric"]["kind"], float(r["value"][1])) for r in result) == [("a", 3.0), ("b", 4.0)]
    assert {r["metric"]["job"] for r in result} == {"demo"}
    assert prom.query_scalar("demo_total_that_does_not_exist") is None
    assert prom.query_scalar("scalar(sum(demo_total)) * 2") == 14


def test_a_bad_query_raises_with_the_api_error(prom):
    with pytest.raises(PromQueryError, match="bad_data.*parse error"):
        prom.query("sum(")
    with pytest.raises(PromQueryError, match="2 series"):
        prom.query_scalar("demo_total")


def test_targets_report_the_scraped_exporter_up(prom, exporter):
    [target] = prom.targets()
    assert (target["job"], target["url"], target["health"], target["lastError"]) == \
        ("demo", f"http://{exporter}/metrics", "up", "")
    assert prom.wait_for_scrapes("demo", n=2, timeout_s=5)[exporter] >= 2


def test_the_server_binds_only_its_loopback_port(prom):
    assert prom.url.startswith("http://127.0.0.1:")
    assert "127.0.0.1" in prom.config_file.read_text() and prom.log_file.exists()
    assert (prom.data_dir / "wal").is_dir()


@pytest.mark.parametrize("target", ["10.0.0.1:9100", "0.0.0.0:9100", "example.com:80", "[::1]:9100",
                                    "http://127.0.0.1:9100", "127.0.0.1"])
def test_a_non_loopback_target_is_refused(target):
    with pytest.raises(ValueError) as err:
        ScrapeJob("x", [target])
    assert "\n" not in str(err.value) and repr(target) in str(err.value)


def test_loopback_targets_are_accepted():
    assert ScrapeJob("x", ["127.0.0.1:9100", "127.3.2.1:1", "localhost:9100"]).targets[2] == "localhost:9100"


def test_the_process_group_is_gone_after_stop(tmp_path):
    server = PrometheusServer(tmp_path, [ScrapeJob("down", [f"127.0.0.1:{procs.free_port()}"])]).start()
    pid = server.proc.pid
    assert os.getpgid(pid) == pid and group_members(pid) == [pid]
    server.stop()
    assert group_members(pid) == []
    server.stop()                                   # idempotent


def test_the_process_group_is_gone_after_an_exception_in_with(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with PrometheusServer(tmp_path, [ScrapeJob("down", [f"127.0.0.1:{procs.free_port()}"])]) as server:
            pid = server.proc.pid
            assert group_members(pid) == [pid]
            raise RuntimeError("boom")
    assert group_members(pid) == [] and server.proc is None


def test_waiting_on_a_target_that_never_answers_times_out_in_one_line(tmp_path):
    target = f"127.0.0.1:{procs.free_port()}"
    with PrometheusServer(tmp_path, [ScrapeJob("down", [target], interval_s=0.5)]) as server:
        with pytest.raises(TimeoutError) as err:
            server.wait_for_scrapes("down", n=1, timeout_s=1)
    assert "\n" not in str(err.value) and "'down'" in str(err.value)


def test_a_missing_binary_names_make_prometheus_deps(tmp_path):
    server = PrometheusServer(tmp_path, [ScrapeJob("x", ["127.0.0.1:9100"])], binary=str(tmp_path / "no-prometheus"))
    with pytest.raises(PrometheusMissing) as err:
        server.start()
    message = str(err.value)
    assert "make prometheus-deps" in message and "\n" not in message and "no-prometheus" in message
    assert server.proc is None and not (tmp_path / "data").exists()
