"""FakeletFleet: many fake raylets in one asyncio loop, registered with a real GCS.

start() serves every node on its own 127.0.0.1 port and registers it as a raylet does
(NodeInfoGcsService GetClusterId, then RegisterNode; every later call carries ray_cluster_id).
The nodes' resource views then go to the GCS through syncer.Syncer, one stream per node ("node",
as raylets do) or one per process ("shared").

kill(i) is a SIGKILLed raylet (the port closes; the GCS declares the node dead after its health
checks fail); recover(i) is the raylet started again (a new node id, same name and resources);
stop() unregisters the nodes still alive, as raylets do on a graceful exit.
"""
from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from ray.core.generated import common_pb2
from ray.core.generated import gcs_service_pb2 as gs

from fakes.ray.fakelets.front import Front
from fakes.ray.fakelets.node import FakeNode
from fakes.ray.fakelets.syncer import Syncer

NODE_INFO = "/ray.rpc.NodeInfoGcsService/"
REGISTER_AT_ONCE = 64           # RegisterNode calls in flight while booting
LAG_EVERY_S = 0.25


class FleetError(RuntimeError):
    pass


def _rpc(channel: grpc.aio.Channel, name: str, request_type, reply_type):
    return channel.unary_unary(NODE_INFO + name, request_serializer=request_type.SerializeToString,
                               response_deserializer=reply_type.FromString)


class FakeletFleet:
    def __init__(self, gcs_address: str, specs: list[dict[str, Any]], syncer: str, front: str | None = None):
        self.gcs_address, self.syncer_mode = gcs_address, syncer
        self.front = Front(Path(front), self._answer) if front else None
        self.syncer: Syncer | None = None
        self.calls: Counter = Counter()
        self.unimplemented: Counter = Counter()
        self.nodes = {int(s["index"]): FakeNode(int(s["index"]), s["name"], s["resources"], s["labels"],
                                                self.calls, self.unimplemented, self._changed)
                      for s in specs}
        self.ports = {int(s["index"]): int(s.get("port") or 0) for s in specs}
        self.cluster_hex = ""
        self.lag_max_s = 0.0
        self.registered_s = 0.0
        self._channel: grpc.aio.Channel | None = None
        self._lag_task: asyncio.Task | None = None
        self._md: tuple = ()

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.front is not None:
            await self.front.start()
            for node in self.nodes.values():
                node.front = self.front
        self._channel = grpc.aio.insecure_channel(self.gcs_address)
        try:
            reply = await _rpc(self._channel, "GetClusterId", gs.GetClusterIdRequest, gs.GetClusterIdReply)(
                gs.GetClusterIdRequest(), timeout=30)
        except grpc.aio.AioRpcError as e:
            raise FleetError(f"GCS {self.gcs_address} did not answer GetClusterId: "
                             f"{e.code().name} {e.details()}") from None
        self.cluster_hex = reply.cluster_id.hex()
        self._md = (("ray_cluster_id", self.cluster_hex),)
        self.syncer = Syncer(self.gcs_address, self.cluster_hex, self.syncer_mode, len(self.nodes))
        self._lag_task = asyncio.create_task(self._watch_lag())
        t0 = time.monotonic()
        gate = asyncio.Semaphore(REGISTER_AT_ONCE)

        async def one(node: FakeNode) -> None:
            async with gate:
                await self._bring_up(node)
        await asyncio.gather(*(one(n) for n in self.nodes.values()))
        self.registered_s = time.monotonic() - t0

    async def _bring_up(self, node: FakeNode) -> None:
        await node.serve(self.ports[node.index])
        self.ports[node.index] = node.port          # a recovered node comes back on the same port
        reply = await _rpc(self._channel, "RegisterNode", gs.RegisterNodeRequest, gs.RegisterNodeReply)(
            gs.RegisterNodeRequest(node_info=node.info()), metadata=self._md, timeout=60)
        if reply.status.code != 0:
            raise FleetError(f"GCS refused RegisterNode for {node.name}: {reply.status.message}")
        self.syncer.attach(node)

    async def kill(self, index: int) -> dict[str, Any]:
        node = self.nodes[index]
        if not node.alive:
            raise FleetError(f"node {index} is already dead")
        self.syncer.detach(node)
        await node.die()
        return {"node_id": node.hex, "t": time.monotonic()}

    async def recover(self, index: int) -> dict[str, Any]:
        node = self.nodes[index]
        if node.alive:
            self.syncer.detach(node)
            await node.die()
        await self._bring_up(node)
        return self.describe(node)

    async def stop(self, unregister: bool = True, timeout_s: float = 30.0) -> int:
        """Unregister the live nodes (bounded by timeout_s), then close every server and stream."""
        live = [n for n in self.nodes.values() if n.alive]
        done = 0
        if unregister and self._channel is not None and live:
            call = _rpc(self._channel, "UnregisterNode", gs.UnregisterNodeRequest, gs.UnregisterNodeReply)
            gate = asyncio.Semaphore(REGISTER_AT_ONCE)
            info = common_pb2.NodeDeathInfo(reason=common_pb2.NodeDeathInfo.EXPECTED_TERMINATION,
                                            reason_message="gangstorm fakelet fleet stopped")

            async def one(node: FakeNode) -> bool:
                async with gate:
                    try:
                        await call(gs.UnregisterNodeRequest(node_id=node.node_id, node_death_info=info),
                                   metadata=self._md, timeout=10)
                        return True
                    except grpc.aio.AioRpcError:
                        return False
            try:
                done = sum(await asyncio.wait_for(asyncio.gather(*(one(n) for n in live)), timeout_s))
            except TimeoutError:
                pass
        await asyncio.gather(*(n.die() for n in live), return_exceptions=True)
        if self._lag_task:
            self._lag_task.cancel()
        if self.syncer is not None:
            await self.syncer.close()
        if self._channel is not None:
            await self._channel.close()
        if self.front is not None:
            await self.front.stop()
        return done

    # -- what the fleet reports ------------------------------------------------------------------
    async def _answer(self, index: int, method: str, data: bytes) -> tuple[int, bytes]:
        return await self.nodes[index].answer(method, data)

    async def all_calls(self) -> dict[str, int]:
        """The calls answered here and, with a front, the ones it answered itself."""
        calls = Counter(self.calls)
        if self.front is not None and self.front.proc is not None:
            calls.update(await self.front.calls())
        return dict(calls)

    def _changed(self, node: FakeNode) -> None:
        if self.syncer is not None and node.alive:
            self.syncer.changed(node)

    async def _watch_lag(self) -> None:
        """The loop's worst lateness: beyond ~25 s the GCS would declare live nodes dead."""
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(LAG_EVERY_S)
            self.lag_max_s = max(self.lag_max_s, loop.time() - t - LAG_EVERY_S)

    def describe(self, node: FakeNode) -> dict[str, Any]:
        return {"index": node.index, "name": node.name, "node_id": node.hex, "port": node.port}

    def slices(self) -> list[dict[str, Any]]:
        """Which GPU instance each bundle holds on each live node (Book.slices, plus the node)."""
        return [{"node": n.index, "node_id": n.hex, **s} for n in self.nodes.values() if n.alive
                for s in n.book.slices()]

    def stats(self) -> dict[str, Any]:
        nodes = self.nodes.values()
        return {"nodes": len(self.nodes), "alive": sum(n.alive for n in nodes),
                "bundles": sum(n.book.bundles for n in nodes),
                "calls": dict(self.calls), "unimplemented": dict(self.unimplemented),
                "syncer": self.syncer_mode, "views_sent": self.syncer.sent if self.syncer else 0,
                "syncer_messages_received": self.syncer.received if self.syncer else 0,
                "loop_lag_max_s": round(self.lag_max_s, 3), "registered_s": round(self.registered_s, 3),
                "gc_frozen_objects": gc.get_freeze_count()}
