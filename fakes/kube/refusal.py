"""Why the apiserver refused a call, in the words every Kubernetes-family figure and event uses
(the simulated control plane's too: fakes/sim/kubefamily.py), and whether a client retries it."""
from __future__ import annotations

import json


def reason_of(exc: Exception) -> str:
    """etcd-nospace, apiserver-429, api-<status>, or the error's type for a transport failure."""
    body = str(getattr(exc, "body", "") or exc)
    if "database space exceeded" in body or "NOSPACE" in body:
        return "etcd-nospace"
    status = getattr(exc, "status", None)
    if status == 429:
        return "apiserver-429"
    return f"api-{status}" if status else type(exc).__name__


def message_of(exc: Exception, limit: int = 300) -> str:
    """The apiserver's own words for a refusal (its Status message), one line of at most `limit`
    characters: what a user needs to see that e.g. a name was invalid, where the reason says 422."""
    body = getattr(exc, "body", None)
    text = ""
    if body:
        try:
            text = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            text = body if isinstance(body, str) else ""
    text = " ".join((text or str(exc)).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def retryable(reason: str) -> bool:
    """Refusals a client retries: etcd-nospace, apiserver-429, 5xx and transport errors."""
    return reason.startswith("api-5") or not reason.startswith("api-")
