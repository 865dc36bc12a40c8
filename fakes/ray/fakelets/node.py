"""One fake raylet: a gRPC server on 127.0.0.1 that answers the GCS as a raylet would, its
registration record, and its resource-view stream to the GCS.

The server answers the NodeManagerService calls a GCS makes for placement groups and liveness
(Prepare/Commit/RemovePlacementGroupBundles, ReleaseUnusedBundles, GetResourceLoad,
NotifyGCSRestart, DrainRaylet, ShutdownRaylet, GetNodeStats, IsLocalWorkerDead) from its Book,
and grpc.health.v1 Check with SERVING. Any other method is UNIMPLEMENTED and counted by name, so a
call a new Ray version starts making shows up in the fleet's stats instead of passing unseen.
Each node has its own port: the GCS's bundle calls carry no node id.
"""
from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from ray.core.generated import common_pb2, gcs_pb2
from ray.core.generated import node_manager_pb2 as nm

from fakes.ray.fakelets import wire
from fakes.ray.fakelets.book import Book
from fakes.ray.fleet import FAKELET_LABEL

SERVICE = nm.DESCRIPTOR.services_by_name["NodeManagerService"]
ANSWERED = ("PrepareBundleResources", "CommitBundleResources", "RemovePlacementGroupBundles",
            "ReleaseUnusedBundles", "GetResourceLoad", "NotifyGCSRestart", "DrainRaylet", "ShutdownRaylet",
            "GetNodeStats", "IsLocalWorkerDead")
_CODECS = {name: (message_factory.GetMessageClass(SERVICE.methods_by_name[name].input_type).FromString,
                  message_factory.GetMessageClass(SERVICE.methods_by_name[name].output_type).SerializeToString)
           for name in ANSWERED}
# answered from cached bytes: the GCS polls every node every second
_CODECS["GetResourceLoad"] = (None, None)


def _key(bundle: common_pb2.Bundle) -> tuple[bytes, int]:
    return bundle.bundle_id.placement_group_id, bundle.bundle_id.bundle_index


class FakeNode:
    def __init__(self, index: int, name: str, resources: dict[str, float], labels: dict[str, str],
                 calls: Counter, unimplemented: Counter, on_change: Callable[[FakeNode], None]):
        self.index, self.name = index, name
        self.resources, self.labels = dict(resources), dict(labels)
        self.calls, self.unimplemented, self.on_change = calls, unimplemented, on_change
        self.front = None        # a front.Front: it holds the listener and answers health and load
        self.node_id = b""
        self.book = Book(resources)
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.alive = False
        self.handlers = self._handlers()
        self._load: tuple[int, bytes] = (-1, b"")

    @property
    def hex(self) -> str:
        return self.node_id.hex()

    # -- serving -------------------------------------------------------------------------------
    async def serve(self, port: int) -> None:
        """A fresh identity (a restarted raylet registers under a new node id) and a server on
        127.0.0.1:port, or on any free port if that one is taken."""
        self.node_id = os.urandom(28)
        self.book = Book(self.resources)
        self._load = (-1, b"")
        if self.front is not None:
            self.port = await self.front.open(self.index, port)
            self.front.set_load(self.index, self.load_bytes())
            self.alive = True
            return
        self.server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        self.server.add_generic_rpc_handlers((_Router(self),))
        try:
            self.port = self.server.add_insecure_port(f"127.0.0.1:{port}") if port else 0
        except RuntimeError:
            self.port = 0
        if not self.port:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.alive = True

    async def die(self) -> None:
        """As a SIGKILLed raylet: the port closes and the stream breaks; the GCS finds out through
        failed health checks."""
        self.alive = False
        if self.front is not None:
            await self.front.close(self.index)
        if self.server:
            await self.server.stop(0)
            self.server = None

    def info(self) -> gcs_pb2.GcsNodeInfo:
        """What a raylet sends in RegisterNode. Never a head node: a second head makes the GCS
        kill the real one (GcsNodeManager::HandleRegisterNode)."""
        return gcs_pb2.GcsNodeInfo(
            node_id=self.node_id, node_manager_address="127.0.0.1", node_manager_port=self.port,
            object_manager_port=self.port, node_manager_hostname=self.name, node_name=self.name,
            raylet_socket_name=f"/nonexistent/fakelet/{self.name}/raylet",
            object_store_socket_name=f"/nonexistent/fakelet/{self.name}/plasma",
            resources_total=self.resources, labels=self.all_labels(), state=gcs_pb2.GcsNodeInfo.ALIVE,
            start_time_ms=int(time.time() * 1000), is_head_node=False,
            state_snapshot=gcs_pb2.NodeSnapshot(state=gcs_pb2.NodeSnapshot.ACTIVE))

    def all_labels(self) -> dict[str, str]:
        # a raylet adds its node id as a label (what bundle_label_selector pins by)
        return {**self.labels, "ray.io/node-id": self.hex, FAKELET_LABEL: "true"}

    # -- resource view stream -------------------------------------------------------------------
    def changed(self) -> None:
        if self.front is not None and self.alive:
            self.front.set_load(self.index, self.load_bytes())
        self.on_change(self)

    def view(self) -> wire.RaySyncMessage:
        b = self.book
        return wire.view_message(self.node_id, b.version, b.available, b.total, self.all_labels())

    # -- NodeManagerService ---------------------------------------------------------------------
    def _handlers(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ANSWERED}

    async def PrepareBundleResources(self, req, ctx):
        ok = self.book.prepare((_key(b), dict(b.unit_resources)) for b in req.bundle_specs)
        if ok:
            self.changed()
        return nm.PrepareBundleResourcesReply(success=ok)

    async def CommitBundleResources(self, req, ctx):
        if self.book.commit(_key(b) for b in req.bundle_specs):
            self.changed()
        return nm.CommitBundleResourcesReply()

    async def RemovePlacementGroupBundles(self, req, ctx):
        if self.book.remove(_key(b) for b in req.bundle_specs):
            self.changed()
        return nm.RemovePlacementGroupBundlesReply()

    async def ReleaseUnusedBundles(self, req, ctx):
        if self.book.release_unused(_key(b) for b in req.bundles_in_use):
            self.changed()
        return nm.ReleaseUnusedBundlesReply()

    async def GetResourceLoad(self, req, ctx) -> bytes:
        return self.load_bytes()

    def load_bytes(self) -> bytes:
        # The GCS reads only the load (none here: no task ever queues on a fakelet).
        if self._load[0] != self.book.version:
            self._load = (self.book.version, nm.GetResourceLoadReply(resources=gcs_pb2.ResourcesData(
                node_id=self.node_id, resources_available=self.book.available, resources_total=self.book.total,
                node_manager_address="127.0.0.1")).SerializeToString())
        return self._load[1]

    async def NotifyGCSRestart(self, req, ctx):
        return nm.NotifyGCSRestartReply()

    async def DrainRaylet(self, req, ctx):
        # A real raylet rejects a drain while it has work; a fakelet never has work to wait for.
        return nm.DrainRayletReply(is_accepted=True)

    async def ShutdownRaylet(self, req, ctx):
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.die()))
        return nm.ShutdownRayletReply()

    async def GetNodeStats(self, req, ctx):
        return nm.GetNodeStatsReply()

    async def IsLocalWorkerDead(self, req, ctx):
        return nm.IsLocalWorkerDeadReply(is_dead=True)    # a fakelet runs no worker

    async def health_check(self, req: bytes, ctx) -> bytes:
        return wire.SERVING if self.alive else wire.NOT_SERVING

    def route(self, method: str) -> tuple[Callable, Callable | None, Callable | None] | None:
        """The handler for a gRPC method and its request decoder and reply encoder (None: bytes
        as they are), or None when a fakelet does not answer it; every call and every unanswered
        one is counted by name."""
        self.calls[method] += 1
        if method == wire.HEALTH_CHECK:
            return self.health_check, None, None
        name = method[len(wire.NODE_MANAGER):] if method.startswith(wire.NODE_MANAGER) else ""
        if name in self.handlers:
            return (self.handlers[name], *_CODECS[name])
        self.unimplemented[method] += 1
        return None

    async def answer(self, method: str, data: bytes) -> tuple[int, bytes]:
        """A call the front forwarded: (gRPC status code, reply bytes), as the server would answer it."""
        found = self.route(method)
        if found is None:
            return grpc.StatusCode.UNIMPLEMENTED.value[0], b""
        handler, decode, encode = found
        reply = await handler(decode(data) if decode else data, None)
        return 0, encode(reply) if encode else reply


class _Router(grpc.GenericRpcHandler):
    def __init__(self, node: FakeNode):
        self.node = node

    def service(self, details):
        found = self.node.route(details.method)
        if found is None:
            return None
        handler, decode, encode = found
        return grpc.unary_unary_rpc_method_handler(handler, request_deserializer=decode, response_serializer=encode)
