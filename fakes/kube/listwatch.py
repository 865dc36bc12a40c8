"""List-then-watch on a thread, as client-go's reflector does: list, watch from the list's
resourceVersion, list again after an ERROR event (410 Gone) or a broken connection. After GIVE_UP
failures in a row it stops and leaves the last one in `error`. Subclasses say what a list and a
watch call are and what each object means."""
from __future__ import annotations

import json
import threading
import time
from typing import Any


class ListWatch(threading.Thread):
    GIVE_UP = 50

    def __init__(self, name: str):
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def relist(self) -> str:
        """Deliver every object the list returns; the list's resourceVersion."""
        raise NotImplementedError

    def watch(self, rv: str) -> Any:
        """The streaming watch response from `rv` (with bookmarks)."""
        raise NotImplementedError

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def run(self) -> None:
        rv, failures = None, 0
        while not self.stopping.is_set():
            try:
                if rv is None:
                    rv = self.relist()
                resp = self.watch(rv)
                failures = 0
                for line in resp:
                    if self.stopping.is_set():
                        return
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    typ, obj = ev["type"], ev.get("object", {})
                    if typ == "ERROR":         # 410 Gone and the like: list again
                        rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if typ != "BOOKMARK":
                        self.on_event(typ, obj)
                resp.release_conn()
            except Exception as e:      # connection reset, apiserver restart: list again
                if self.stopping.is_set():
                    return
                failures += 1
                if failures >= self.GIVE_UP:
                    self.error = e
                    return
                time.sleep(0.5)
                rv = None

    def stop(self) -> None:
        # Closing the response from this thread can block on the reader; the daemon thread ends
        # when the apiserver goes away (or at the next timeout) and drops what it reads meanwhile.
        self.stopping.set()
