"""The Kubernetes control plane the simulated kube and volcano schedulers write through.

etcd keeps every revision of every object until compaction (the apiserver compacts every
compaction_interval_s). Compaction frees pages for reuse but the file never shrinks, so the
database size is a high-water mark of live + uncompacted history; only a defrag shrinks it.
Past the backend quota etcd raises the NOSPACE alarm and refuses every write but deletes until
an operator compacts, defrags and disarms. The apiserver caps in-flight mutating requests:
writes beyond what that many requests can serve in a second are answered 429.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class TokenBucket:
    """client-go's flowcontrol rate limiter: qps refill, burst capacity. Pure: time is passed in."""

    def __init__(self, qps: float, burst: int):
        self.qps, self.burst = float(qps), int(burst)
        self.tokens = float(burst)
        self.t = 0.0

    def acquire(self, t: float) -> float:
        """Reserve one token at or after t; returns when the request may go out."""
        if t > self.t:
            self.tokens = min(self.burst, self.tokens + (t - self.t) * self.qps)
            self.t = t
        self.tokens -= 1.0
        if self.tokens >= 0:
            return self.t
        return self.t + (-self.tokens) / self.qps


@dataclass
class ControlPlane:
    cfg: dict
    nodes: int
    live_bytes: float = 0.0
    history_bytes: float = 0.0
    db_bytes: float = 0.0
    db_bytes_max: float = 0.0
    filler_bytes: float = 0.0
    alarm: bool = False
    alarm_since: float | None = None
    recovering_until: float | None = None
    last_t: float = 0.0
    next_compaction: float = 0.0
    counts: dict = field(default_factory=lambda: {
        "writes": 0, "writes_refused_nospace": 0, "api_429": 0, "compactions": 0,
        "nospace_alarms": 0, "nospace_seconds": 0.0, "recoveries": 0})
    recoveries: list = field(default_factory=list)
    _second: int = -1
    _writes_this_second: int = 0

    def __post_init__(self):
        self.live_bytes = self.nodes * (self.cfg["node_bytes"] + self.cfg["lease_bytes"])
        self.db_bytes = self.db_bytes_max = self.live_bytes
        self.next_compaction = self.cfg["compaction_interval_s"]
        # Node leases renew every 10 s; node status is rewritten every 5 min (KWOK heartbeats).
        self.background_bps = self.nodes * (self.cfg["lease_bytes"] / 10.0 + self.cfg["node_bytes"] / 300.0)
        self.capacity_per_s = self.cfg["max_mutating_requests_inflight"] / max(self.cfg["write_ms"] / 1000.0, 1e-6)

    @property
    def quota(self) -> float:
        return float(self.cfg["etcd_quota_bytes"])

    def _grow(self) -> None:
        self.db_bytes = max(self.db_bytes, self.live_bytes + self.history_bytes)
        self.db_bytes_max = max(self.db_bytes_max, self.db_bytes)

    def catch_up(self, t: float) -> None:
        """Background writes and periodic compactions up to t."""
        while self.next_compaction <= t:
            self._advance_to(self.next_compaction)
            self.history_bytes = 0.0
            self.counts["compactions"] += 1
            self.next_compaction += self.cfg["compaction_interval_s"]
        self._advance_to(t)

    def _advance_to(self, t: float) -> None:
        if t <= self.last_t:
            return
        if self.alarm:
            self.counts["nospace_seconds"] += t - self.last_t
        else:   # lease renewals are refused under NOSPACE too
            self.history_bytes += self.background_bps * (t - self.last_t)
            self._grow()
            self._check_quota(t)
        self.last_t = t

    def _check_quota(self, t: float) -> None:
        if not self.alarm and self.db_bytes >= self.quota:
            self.alarm, self.alarm_since = True, t
            self.counts["nospace_alarms"] += 1

    def write(self, t: float, nbytes: float, live_delta: float | None = None) -> str:
        """One create/update. Returns "ok", "nospace" or "429". live_delta defaults to nbytes."""
        self.catch_up(t)
        sec = int(t)
        if sec != self._second:
            self._second, self._writes_this_second = sec, 0
        self._writes_this_second += 1
        if self._writes_this_second > self.capacity_per_s:
            self.counts["api_429"] += 1
            return "429"
        if self.alarm:
            self.counts["writes_refused_nospace"] += 1
            return "nospace"
        self.counts["writes"] += 1
        self.history_bytes += nbytes
        self.live_bytes += nbytes if live_delta is None else live_delta
        self._grow()
        self._check_quota(t)
        return "ok"

    def delete(self, t: float, nbytes: float) -> None:
        """Deletes are allowed even under NOSPACE; they free live bytes, not file size."""
        self.catch_up(t)
        self.live_bytes = max(0.0, self.live_bytes - nbytes)

    def fill(self, t: float, total: float, object_bytes: float) -> int:
        """Chaos: large objects written until `total` bytes or the NOSPACE alarm; returns writes."""
        n = 0
        written = 0.0
        while written < total:
            if self.write(t, object_bytes) != "ok":
                break
            written += object_bytes
            n += 1
        self.filler_bytes += written
        return n

    def start_recovery(self, t: float) -> float:
        """Operator: delete filler, compact, defrag, disarm. Returns when writes work again."""
        if self.recovering_until is not None:
            return self.recovering_until
        self.recovering_until = t + self.cfg["recovery_s"]
        return self.recovering_until

    def finish_recovery(self, t: float) -> None:
        self.catch_up(t)
        self.live_bytes = max(0.0, self.live_bytes - self.filler_bytes)
        self.filler_bytes = 0.0
        self.history_bytes = 0.0
        self.db_bytes = self.live_bytes
        if self.alarm:
            self.recoveries.append({"alarm_at_s": round(self.alarm_since, 3), "recovered_at_s": round(t, 3),
                                    "outage_s": round(t - self.alarm_since, 3)})
        self.alarm, self.alarm_since, self.recovering_until = False, None, None
        self.counts["recoveries"] += 1

    def figures(self) -> dict:
        return {
            "etcd_db_bytes": int(self.db_bytes), "etcd_db_bytes_max": int(self.db_bytes_max),
            "etcd_live_bytes": int(self.live_bytes), "etcd_quota_bytes": int(self.quota),
            "etcd_nospace_alarm": self.alarm, **{k: (round(v, 3) if isinstance(v, float) else v)
                                                 for k, v in self.counts.items()},
            "nospace_recoveries": list(self.recoveries),
        }
