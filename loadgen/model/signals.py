"""A block that SIGINT and SIGTERM do not cut in half.

The run folder's files (loadgen/output/storage.py) and a real backend's cleanups (fakes/real,
fakes/kube, fakes/slurm, fakes/prom) use it, so that a second Ctrl-C does not leave a file half
renamed or a cleanup half done. Both sides import it (fakes/ may import only loadgen.model),
which is why it lives here.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done. Only the main thread runs Python's signal
    handlers, so elsewhere there is nothing to hold and this is a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
