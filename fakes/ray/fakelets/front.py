"""The compiled front of a fakelet shard (schedulers.ray.fakelet_front: go): the client side.

`fakelet-front` (fakes/ray/fakelets/front/main.go, built by `make fakelet-front`) holds every
node's listener on 127.0.0.1 and answers the calls the GCS makes to each node all the time, health
checks and GetResourceLoad, from bytes this side gives it. Every other call (the bundle calls) is
forwarded here as raw bytes and answered by the node's FakeNode, from its book. At 10,000 nodes
those two calls are about 4,300 a second, which a Python gRPC server answers at roughly half a
millisecond of CPU each (docs/ray-fakelets.md).

The front runs as a child of the shard, in the shard's process group and session, and exits on
EOF of its stdin: it never outlives the shard.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

BINARY = "fakelet-front"
Answer = Callable[[int, str, bytes], Awaitable[tuple[int, bytes]]]


def binary_path() -> Path:
    """Where `make fakelet-front` puts the binary (GANGSTORM_BIN_DIR, as the other Go binaries)."""
    return Path(os.environ.get("GANGSTORM_BIN_DIR") or Path.home() / ".cache/gangstorm/bin") / BINARY


def missing_message(path: Path) -> str:
    return (f"schedulers.ray.fakelet_front: go needs {path}, which is missing: run `make fakelet-front` "
            f"(builds it from fakes/ray/fakelets/front with go)")


class FrontError(RuntimeError):
    pass


class Front:
    def __init__(self, binary: Path, answer: Answer):
        self.binary, self.answer = Path(binary), answer
        self.proc: asyncio.subprocess.Process | None = None
        self._waiting: dict[tuple, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> Front:
        if not self.binary.exists():
            raise FrontError(missing_message(self.binary))
        self.proc = await asyncio.create_subprocess_exec(str(self.binary), stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, limit=64 << 20)
        self._reader = asyncio.create_task(self._read())
        return self

    def _send(self, msg: dict) -> None:
        if self.proc is None or self.proc.stdin is None or self.proc.returncode is not None:
            raise FrontError("fakelet-front is not running")
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    async def _ask(self, msg: dict, key: tuple, timeout_s: float = 30.0) -> dict:
        fut = asyncio.get_running_loop().create_future()
        self._waiting[key] = fut
        self._send(msg)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._waiting.pop(key, None)

    async def open(self, node: int, port: int) -> int:
        """Node's listener on 127.0.0.1:port (any free port if taken); the port it got."""
        reply = await self._ask({"op": "open", "node": node, "port": port}, ("opened", node))
        if not reply.get("port"):
            raise FrontError(f"fakelet-front could not listen for node {node}: {reply.get('error')}")
        return int(reply["port"])

    async def close(self, node: int) -> None:
        await self._ask({"op": "close", "node": node}, ("closed", node))

    def set_load(self, node: int, data: bytes) -> None:
        self._send({"op": "load", "node": node, "data": base64.b64encode(data).decode()})

    async def calls(self) -> dict[str, int]:
        """The calls the front answered itself, by method."""
        return (await self._ask({"op": "stats"}, ("stats",)))["calls"]

    async def _read(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        while line := await proc.stdout.readline():
            msg = json.loads(line)
            if msg["ev"] == "call":
                task = asyncio.create_task(self._answer(msg))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                continue
            key = (msg["ev"],) if msg["ev"] == "stats" else (msg["ev"], msg["node"])
            fut = self._waiting.get(key)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        for fut in self._waiting.values():      # the front exited
            if not fut.done():
                fut.set_exception(FrontError(f"fakelet-front exited (status {await proc.wait()})"))

    async def _answer(self, msg: dict) -> None:
        code, data = await self.answer(int(msg["node"]), msg["method"], base64.b64decode(msg.get("data") or ""))
        try:
            self._send({"op": "reply", "id": msg["id"], "code": code, "data": base64.b64encode(data).decode()})
        except FrontError:
            pass

    async def stop(self, timeout_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            self._reader.cancel()
