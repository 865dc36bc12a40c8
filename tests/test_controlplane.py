"""The simulated apiserver + etcd the kube and volcano sims write through."""
import pytest

from fakes.sim.controlplane import ControlPlane, TokenBucket

CFG = {"node_bytes": 0, "lease_bytes": 0, "lease_renew_s": 10.0, "node_status_s": 300.0,
       "compaction_interval_s": 300.0, "max_mutating_requests_inflight": 200, "write_ms": 5.0,
       "etcd_quota_bytes": 2**31, "recovery_s": 120.0}


def plane(nodes=0, **cfg):
    return ControlPlane({**CFG, **cfg}, nodes)


def test_compaction_keeps_the_history_of_the_last_interval():
    # The apiserver compacts to the revision it recorded at the previous compaction: at 300 s it
    # only records (nothing before 0 to drop), at 600 s it drops what was superseded before 300 s.
    cp = plane()
    cp.write(100, 1000, 0.0)               # an update: the old revision is history
    cp.catch_up(301)
    assert cp.history_bytes == 1000
    cp.write(400, 500, 0.0)
    cp.catch_up(601)
    assert cp.history_bytes == 500
    cp.catch_up(901)
    assert cp.history_bytes == 0 and cp.counts["compactions"] == 3
    assert cp.db_bytes == 1500             # compaction frees pages; the file keeps its size


def test_creates_add_live_bytes_and_deletes_leave_history():
    cp = plane()
    cp.write(1, 4000)
    assert (cp.live_bytes, cp.history_bytes) == (4000, 0)
    cp.delete(2, 4000)
    assert (cp.live_bytes, cp.history_bytes) == (0, 4000)


def test_lease_renewals_and_node_status_updates_grow_history_at_their_periods():
    # 100 nodes: a 300 B lease every 10 s and a 6,000 B status every 300 s = 5,000 B/s.
    cp = plane(100, lease_bytes=300, node_bytes=6000)
    assert cp.live_bytes == 100 * 6300
    cp.catch_up(100)
    assert cp.history_bytes == pytest.approx(500_000)
    slow = plane(100, lease_bytes=300, node_bytes=6000, lease_renew_s=300.0, node_status_s=605.0)
    slow.catch_up(100)
    assert slow.history_bytes == pytest.approx(100 * (300 / 300 + 6000 / 605) * 100)


def test_nospace_refuses_writes_and_compaction_but_not_deletes_until_recovery():
    cp = plane(etcd_quota_bytes=10_000)
    assert cp.fill(10, 50_000, 4000) == 3 and cp.alarm
    assert cp.write(11, 100) == "nospace"
    cp.delete(12, 4000)                     # allowed; the file does not shrink
    cp.catch_up(301)
    assert cp.counts["compactions_refused_nospace"] == 1 and cp.counts["compactions"] == 0
    cp.start_recovery(400)
    cp.finish_recovery(520)
    assert not cp.alarm and cp.db_bytes == cp.live_bytes == 0
    assert cp.recoveries == [{"alarm_at_s": 10, "recovered_at_s": 520, "outage_s": 510}]
    assert cp.write(521, 100) == "ok"


def test_writes_beyond_what_inflight_requests_serve_in_a_second_get_429():
    cp = plane(max_mutating_requests_inflight=2, write_ms=1000.0)      # 2 writes a second
    assert [cp.write(5.1, 10) for _ in range(3)] == ["ok", "ok", "429"]
    assert cp.write(6.0, 10) == "ok"


def test_token_bucket_lets_a_burst_through_then_paces_at_qps():
    b = TokenBucket(qps=10, burst=2)
    assert [b.acquire(0) for _ in range(4)] == pytest.approx([0, 0, 0.1, 0.2])
