"""One fakelet process: `python -m fakes.ray.fakelets.serve SPEC.json`, in its own session.

SPEC: {"gcs": "127.0.0.1:PORT", "syncer": "node"|"shared", "front": null | PATH of fakelet-front,
"nodes": [{"index", "name", "resources", "labels", "port"}]}. Replies
{"event":"ready","nodes":[{index,name,node_id,port}],...} once every node is registered, then
answers one JSON command per stdin line:
  {"op":"kill","node":I}     -> {"ok":true,"node_id":H,"t":MONOTONIC}
  {"op":"restart","node":I}  -> {"ok":true,"node":{index,name,node_id,port}}
  {"op":"stats"}             -> {"ok":true,"stats":{...}}
  {"op":"slices"}            -> {"ok":true,"slices":[{node,node_id,pg,bundle,state,resource,instances}]}
  {"op":"stop"} or EOF       -> unregisters the live nodes, {"event":"stopped","unregistered":N}
"""
from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from fakes.ray.fakelets.fleet import FakeletFleet


def quiet_collector() -> None:
    """The fleet's nodes, servers and books live as long as the process: moved out of the
    collector's reach (gc.freeze), with fewer young collections, the per-call garbage is all it
    traverses. At 2,000 fakelets in one process, idle fleet CPU went from 75/71% to 65/60% of a core
    and the worst event-loop lag from 0.37/0.36 s to 0.11/0.28 s (two runs each of
    `python -m fakes.ray.fakelets.bench --sizes 2000 --bundles 1 --idle-s 45 --seconds 10`,
    docs/ray-fakelets.md).
    GANGSTORM_FAKELET_GC=default keeps Python's collector as it is, to repeat that comparison."""
    if os.environ.get("GANGSTORM_FAKELET_GC") == "default":
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


async def serve(spec: dict[str, Any], out) -> int:
    def reply(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg, separators=(",", ":")) + "\n")

    fleet = FakeletFleet(spec["gcs"], spec["nodes"], spec.get("syncer", "shared"), spec.get("front"))
    try:
        await fleet.start()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the session
        reply({"event": "error", "error": f"{type(e).__name__}: {e}"})
        await fleet.stop(unregister=False)
        return 1
    quiet_collector()
    reply({"event": "ready", "pid": os.getpid(), "registered_s": round(fleet.registered_s, 3),
           "nodes": [fleet.describe(n) for n in fleet.nodes.values()]})

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)
    threading.Thread(target=read_stdin, daemon=True).start()

    while (line := await lines.get()) is not None:
        try:
            msg = json.loads(line)
            op = msg["op"]
            if op == "stop":
                break
            if op == "kill":
                reply({"ok": True, **await fleet.kill(int(msg["node"]))})
            elif op == "restart":
                reply({"ok": True, "node": await fleet.recover(int(msg["node"]))})
            elif op == "slices":
                reply({"ok": True, "slices": fleet.slices()})
            elif op == "stats":
                reply({"ok": True, "stats": {**fleet.stats(), "calls": await fleet.all_calls()}})
            else:
                reply({"ok": False, "error": f"unknown op {op!r}"})
        except Exception as e:  # noqa: BLE001
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    unregistered = await fleet.stop(unregister=True)
    reply({"event": "stopped", "unregistered": unregistered})
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fakes.ray.fakelets.serve SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    out = os.fdopen(os.dup(1), "w", buffering=1)     # replies; anything grpc prints goes to stderr
    os.dup2(2, 1)
    return asyncio.run(serve(spec, out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
