"""The Kubernetes control plane the simulated kube and volcano schedulers write through.

etcd keeps the superseded revision of every updated or deleted object until compaction. The
apiserver compacts every compaction_interval_s to the revision it recorded at the PREVIOUS
compaction (kubernetes staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go: "We don't
compact on bootstrap"), so the last interval's history always survives. Compaction frees pages
for reuse but the file never shrinks: the database size is a high-water mark of live + history;
only a defrag shrinks it. Past the backend quota etcd raises the NOSPACE alarm and refuses every
write but deletes (the compactor's own bookkeeping write too) until an operator compacts,
defrags and disarms. Every node renews its Lease every lease_renew_s and rewrites its status
every node_status_s. The apiserver caps in-flight mutating requests: writes beyond what that many
requests can serve in a second are answered 429.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class TokenBucket:
    """client-go's flowcontrol rate limiter: qps refill, burst capacity. Pure: time is passed in."""

    def __init__(self, qps: float, burst: int):
        self.qps, self.burst = float(qps), int(burst)
        self.tokens = float(burst)
        self.t = 0.0
        self.taken = 0

    @property
    def busy_s(self) -> float:
        """Seconds of emitting at the full qps that the tokens taken so far amount to."""
        return self.taken / self.qps

    def acquire(self, t: float) -> float:
        """Reserve one token at or after t; returns when the request may go out."""
        if t > self.t:
            self.tokens = min(self.burst, self.tokens + (t - self.t) * self.qps)
            self.t = t
        self.tokens -= 1.0
        self.taken += 1
        if self.tokens >= 0:
            return self.t
        return self.t + (-self.tokens) / self.qps


@dataclass
class ControlPlane:
    cfg: dict
    nodes: int
    live_bytes: float = 0.0
    history_old: float = 0.0     # superseded before the revision the last compaction recorded
    history_new: float = 0.0     # superseded since then: survives the next compaction
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
        "compactions_refused_nospace": 0, "nospace_alarms": 0, "nospace_seconds": 0.0, "recoveries": 0})
    recoveries: list = field(default_factory=list)
    _second: int = -1
    _writes_this_second: int = 0

    def __post_init__(self):
        c = self.cfg
        self.live_bytes = self.nodes * (c["node_bytes"] + c["lease_bytes"])
        self.db_bytes = self.db_bytes_max = self.live_bytes
        self.next_compaction = c["compaction_interval_s"]
        self.background_bps = self.nodes * (c["lease_bytes"] / c["lease_renew_s"]
                                            + c["node_bytes"] / c["node_status_s"])
        self.capacity_per_s = c["max_mutating_requests_inflight"] / max(c["write_ms"] / 1000.0, 1e-6)
        self.quota = float(c["etcd_quota_bytes"])

    @property
    def history_bytes(self) -> float:
        return self.history_old + self.history_new

    def _grow(self) -> None:
        size = self.live_bytes + self.history_old + self.history_new
        if size > self.db_bytes:
            self.db_bytes = size
            if size > self.db_bytes_max:
                self.db_bytes_max = size

    def catch_up(self, t: float) -> None:
        """Background writes and periodic compactions up to t."""
        while self.next_compaction <= t:
            self._advance_to(self.next_compaction)
            if self.alarm:
                self.counts["compactions_refused_nospace"] += 1
            else:
                self.history_old, self.history_new = self.history_new, 0.0
                self.counts["compactions"] += 1
            self.next_compaction += self.cfg["compaction_interval_s"]
        self._advance_to(t)

    def _advance_to(self, t: float) -> None:
        if t <= self.last_t:
            return
        if self.alarm:   # lease renewals and status updates are refused under NOSPACE too
            self.counts["nospace_seconds"] += t - self.last_t
        else:
            self.history_new += self.background_bps * (t - self.last_t)
            self._grow()
            self._check_quota(t)
        self.last_t = t

    def _check_quota(self, t: float) -> None:
        if not self.alarm and self.db_bytes >= self.quota:
            self.alarm, self.alarm_since = True, t
            self.counts["nospace_alarms"] += 1

    def write(self, t: float, nbytes: float, live_delta: float | None = None) -> str:
        """One create (live_delta None: the object is new) or update (live_delta 0: the old
        revision becomes history). Returns "ok", "nospace" or "429"."""
        if t > self.last_t:
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
        if live_delta is None:
            self.live_bytes += nbytes
        else:
            self.history_new += nbytes
            self.live_bytes += live_delta
        self._grow()
        self._check_quota(t)
        return "ok"

    def delete(self, t: float, nbytes: float) -> None:
        """Deletes are allowed even under NOSPACE; the object's last revision becomes history."""
        self.catch_up(t)
        self.live_bytes = max(0.0, self.live_bytes - nbytes)
        self.history_new += nbytes

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
        self.history_old = self.history_new = 0.0      # compacted to the current revision
        self.db_bytes = self.live_bytes                # and defragmented
        if self.alarm:
            self.recoveries.append({"alarm_at_s": round(self.alarm_since, 3), "recovered_at_s": round(t, 3),
                                    "outage_s": round(t - self.alarm_since, 3)})
        self.alarm, self.alarm_since, self.recovering_until = False, None, None
        self.counts["recoveries"] += 1

    def busy_s(self) -> dict:
        """Occupied time of the apiserver's mutating in-flight capacity and time etcd refused
        writes (NOSPACE), for the ceiling's saturation analysis."""
        served = self.counts["writes"] + self.counts["writes_refused_nospace"]
        return {"apiserver-inflight": round(served / self.capacity_per_s, 6),
                "etcd-quota": round(self.counts["nospace_seconds"], 6)}

    def figures(self) -> dict:
        return {
            "etcd_db_bytes": int(self.db_bytes), "etcd_db_bytes_max": int(self.db_bytes_max),
            "etcd_live_bytes": int(self.live_bytes), "etcd_quota_bytes": int(self.quota),
            "etcd_nospace_alarm": self.alarm, **{k: (round(v, 3) if isinstance(v, float) else v)
                                                 for k, v in self.counts.items()},
            "nospace_recoveries": list(self.recoveries),
        }
