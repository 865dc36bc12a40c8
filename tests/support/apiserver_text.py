"""Constructed apiserver metrics text: two request kinds' latency histograms with known buckets."""


def _histogram(verb, resource, subresource, buckets, total_s):
    labels = f'verb="{verb}",resource="{resource}",subresource="{subresource}",scope="resource"'
    lines = [f'apiserver_request_duration_seconds_bucket{{{labels},le="{le}"}} {c}' for le, c in buckets]
    count = buckets[-1][1]
    lines += [f"apiserver_request_duration_seconds_sum{{{labels}}} {total_s}",
              f"apiserver_request_duration_seconds_count{{{labels}}} {count}"]
    return lines


def apiserver_text() -> str:
    """POST pods: 100 requests, mean 8 ms; POST pods/binding: 100 requests, mean 5 ms."""
    return "\n".join(
        _histogram("POST", "pods", "", [("0.005", 10), ("0.01", 60), ("0.025", 95), ("0.05", 99), ("0.1", 100),
                                        ("+Inf", 100)], 0.8)
        + _histogram("POST", "pods", "binding", [("0.005", 50), ("0.01", 100), ("+Inf", 100)], 0.5)) + "\n"
