"""Client calls: the inbox that brings pool-thread results back to the caller's thread, retries
with backoff on refusals a client retries, failure counts and the first message of each refusal."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fakes.kube.refusal import message_of, reason_of, retryable


def release(response: Any) -> None:
    """Read what is left of a `_preload_content=False` answer and give its connection back to the
    pool: an unread answer keeps it, and the next call would open a new TLS connection."""
    if hasattr(response, "drain_conn"):
        response.drain_conn()
        response.release_conn()


class ClientCalls:
    """Part of RealKubeFamily (fakes/kube/family/base.py); reads and sets its attributes."""

    # --- client calls (pool threads) ----------------------------------------------------------------
    def _post(self, fn: Callable, *args: Any) -> None:
        """Run fn(*args) on the caller's thread at the next advance."""
        self._inbox.put((fn, args))

    def _retry(self, call: Callable[[], Any], ok: tuple[int, ...] = (409,), attempts: int = 6) -> None:
        """call() until it succeeds or answers a status in `ok`; retryable refusals are retried
        with backoff, anything else (or the last attempt's refusal) raises."""
        for attempt in range(attempts):
            try:
                release(call())
                return
            except Exception as e:
                if getattr(e, "status", None) in ok:
                    return
                if attempt == attempts - 1 or self._stop.is_set() or not retryable(reason_of(e)):
                    raise
            time.sleep(min(0.2 * 2 ** attempt, 5.0))

    def _call(self, call: Callable[[], Any], ok: tuple[int, ...] = (409,), failed: str = "") -> None:
        """_retry(call) on the client pool; a call that fails for good is counted as `failed`."""
        def run() -> None:
            try:
                self._retry(call, ok)
            except Exception:
                if failed and not self._stop.is_set():
                    self._post(self._count, failed)
        self.pool.submit(run)

    def _count(self, key: str, n: float = 1) -> None:
        self.figures[key] = self.figures.get(key, 0) + n

    def _note_refusal(self, exc: Exception) -> str:
        """The refusal's reason; the first message of each reason is kept for the summary (pool
        threads call this: setdefault on a dict is atomic under the GIL)."""
        reason = reason_of(exc)
        self.figures.setdefault("first_refusal", {}).setdefault(reason, message_of(exc))
        return reason
