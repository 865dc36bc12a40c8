"""The detached side of `gangstorm cluster up ray` (fakes/ray/serve.py --detach for raylets,
fakes/ray/hold.py for fakelets): boot, write the ready (or error) message to READY.json atomically
(by rename; launch.py polls for it), run until SIGTERM/SIGINT/SIGHUP, shut down.
"""
from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def write_ready(path: str, msg: dict[str, Any]) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(msg) + "\n")
    os.replace(tmp, path)


def run_detached(ready_path: str, boot: Callable[[], dict[str, Any]], shutdown: Callable[[], None]) -> int:
    """boot() returns the ready message (pid added here); a stop signal while booting aborts the
    boot; shutdown() always runs at the end and is not interrupted by further signals."""
    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
    try:
        ready = boot()
        stop = threading.Event()
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: stop.set())
        write_ready(ready_path, {**ready, "pid": os.getpid()})
        while not stop.wait(1.0):
            pass
        return 0
    except BaseException as e:  # noqa: BLE001 - reported to `cluster up`, which stops what is left
        write_ready(ready_path, {"event": "error",
                                 "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
        return 1
    finally:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        shutdown()
