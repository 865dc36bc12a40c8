"""Exact latency tails in Locust's own outputs (console, CSV, HTML report, web UI).

Locust rounds every response time to about two significant digits before counting it
(stats.bucket_response_time, documented as replaceable at runtime) and computes percentiles
from those buckets with its own rank rule. Here the bucket function keeps the value as given
(callers round to the microsecond), percentiles use the nearest-rank rule of
loadgen.model.quantiles.exact_quantile, and the CSV writer stops truncating percentiles to whole
milliseconds. The result: the p99.9 Locust prints equals the p99.9 gangstorm computes from
its per-job arrays, in Locust's unit (milliseconds).

Worker -> master reports then carry one key per distinct latency instead of ~300 buckets;
latencies are rounded to 1 microsecond so the dict stays bounded by the number of samples.
"""
from __future__ import annotations

import math

REPORT = [0.50, 0.90, 0.95, 0.99, 0.999, 0.9999, 1.0]
STATISTICS = [0.50, 0.99, 0.999]     # columns in the web UI statistics table
CHART = [0.50, 0.99, 0.999]          # lines in the web UI response-time chart


def exact_bucket(response_time: float) -> float:
    return response_time


def nearest_rank(response_times: dict, num_requests: int, percent: float) -> float:
    """Smallest value with at least `percent` of the samples at or below it (quantiles.exact_quantile)."""
    if num_requests <= 0 or not response_times:
        return 0
    rank = max(math.ceil(percent * num_requests), 1)   # same float product as exact_quantile
    seen = 0
    for value in sorted(response_times):
        seen += response_times[value]
        if seen >= rank:
            return value
    return max(response_times)


def _percentile_fields(self, entry, use_current: bool = False):
    if not entry.num_requests:
        return self.percentiles_na
    if use_current and entry.use_response_times_cache:
        return [entry.get_current_response_time_percentile(x) or 0 for x in self.percentiles_to_report]
    return [entry.get_response_time_percentile(x) or 0 for x in self.percentiles_to_report]


def ms(seconds: float) -> float:
    """Seconds -> Locust's milliseconds, rounded to the microsecond (keeps equal latencies equal)."""
    return round(seconds * 1000.0, 3)


def install() -> None:
    import locust.stats as stats  # imported here: the helpers above stay usable without Locust

    stats.bucket_response_time = exact_bucket
    stats.calculate_response_time_percentile = nearest_rank
    stats.StatsCSV._percentile_fields = _percentile_fields
    stats.PERCENTILES_TO_REPORT[:] = REPORT
    stats.PERCENTILES_TO_STATISTICS[:] = STATISTICS
    stats.PERCENTILES_TO_CHART[:] = CHART
