"""Why the apiserver refused a call, in the words every Kubernetes-family figure and event uses
(the simulated control plane's too: fakes/sim/kubefamily.py), and whether a client retries it."""
from __future__ import annotations


def reason_of(exc: Exception) -> str:
    """etcd-nospace, apiserver-429, api-<status>, or the error's type for a transport failure."""
    body = str(getattr(exc, "body", "") or exc)
    if "database space exceeded" in body or "NOSPACE" in body:
        return "etcd-nospace"
    status = getattr(exc, "status", None)
    if status == 429:
        return "apiserver-429"
    return f"api-{status}" if status else type(exc).__name__


def retryable(reason: str) -> bool:
    """Refusals a client retries: etcd-nospace, apiserver-429, 5xx and transport errors."""
    return reason.startswith("api-5") or not reason.startswith("api-")
