"""The resource-view streams of a fakelet process (RaySyncer.StartSync to the GCS).

A real raylet reports its view at most every 100 ms, only when it changed
(raylet_report_resources_period_milliseconds), on its own stream; the GCS applies each view to its
scheduler and re-sends it to every other stream. The GCS needs these views: a removed group's
resources become schedulable again only once the raylet reports them free
(GcsPlacementGroupScheduler's release waits for the node's view), so a fakelet fleet without a
stream stops admitting once its nodes have been filled once.

Two modes:
- "node": one stream per fakelet, as raylets do. The GCS's fan-out is quadratic in nodes.
- "shared": one stream per fakelet process, identified by an id of its own, carrying every node's
  view (the GCS keys views by the message's node id, not the stream's). The GCS does the same
  per-view work but re-sends each view to the few process streams instead of every node.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable

import grpc

from fakes.ray.fakelets import wire

REPORT_PERIOD_S = 0.1            # raylet_report_resources_period_milliseconds (Ray default 100)
STREAMS_PER_CHANNEL = 100        # node streams sharing one HTTP/2 connection to the GCS


class Stream:
    """One StartSync stream: batches go out in order; what the GCS sends back is counted."""

    def __init__(self, channel: grpc.aio.Channel, stream_id: bytes, cluster_hex: str, first=None):
        self.queue: asyncio.Queue = asyncio.Queue()
        if first is not None:
            self.queue.put_nowait(first)
        self.received = 0
        self.task = asyncio.create_task(self._run(channel, stream_id.hex(), cluster_hex))

    def send(self, batch) -> None:
        self.queue.put_nowait(batch)

    def close(self) -> None:
        self.task.cancel()

    async def _run(self, channel: grpc.aio.Channel, stream_hex: str, cluster_hex: str) -> None:
        queue = self.queue

        async def batches():
            while True:
                yield await queue.get()

        # node_id metadata is required: the GCS aborts on a stream without it
        call = channel.stream_stream(wire.START_SYNC, request_serializer=wire.RaySyncMessageBatch.SerializeToString,
                                     response_deserializer=lambda b: b)(
            batches(), metadata=(("node_id", stream_hex), ("ray_cluster_id", cluster_hex)))
        try:
            async for _ in call:
                self.received += 1
        except asyncio.CancelledError:
            call.cancel()
            raise
        except grpc.aio.AioRpcError:
            pass


class Syncer:
    """Collects which nodes changed and reports their views every REPORT_PERIOD_S."""

    def __init__(self, gcs_address: str, cluster_hex: str, mode: str, nodes: int):
        if mode not in ("node", "shared"):
            raise ValueError(f"syncer mode: expected node or shared, got {mode!r}")
        self.mode, self.cluster_hex = mode, cluster_hex
        n = max(1, -(-nodes // STREAMS_PER_CHANNEL)) if mode == "node" else 1
        # distinct channel arguments keep gRPC from sharing one connection between them
        self.channels = [grpc.aio.insecure_channel(gcs_address, options=[("gangstorm.sync", i)]) for i in range(n)]
        self.streams: dict[int, Stream] = {}       # node index (or -1: the shared stream) -> stream
        self.dirty: dict[int, object] = {}
        self.sent = 0
        self.closed: list[Stream] = []
        if mode == "shared":
            self.streams[-1] = Stream(self.channels[0], os.urandom(28), cluster_hex)
        self.task = asyncio.create_task(self._report())

    def attach(self, node) -> None:
        """A node just registered: in node mode it opens its own stream with its current view."""
        if self.mode == "node":
            channel = self.channels[node.index % len(self.channels)]
            self.streams[node.index] = Stream(channel, node.node_id, self.cluster_hex, wire.batch([node.view()]))
            self.sent += 1
        else:
            self.dirty[node.index] = node

    def detach(self, node) -> None:
        """The node died: its stream breaks (node mode) and it reports nothing more."""
        self.dirty.pop(node.index, None)
        stream = self.streams.pop(node.index, None) if self.mode == "node" else None
        if stream is not None:
            stream.close()
            self.closed.append(stream)

    def changed(self, node) -> None:
        self.dirty[node.index] = node

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(REPORT_PERIOD_S)
            if self.dirty:
                self.flush(self.dirty.values())
                self.dirty = {}

    def flush(self, nodes: Iterable) -> None:
        views = [(n.index, n.view()) for n in nodes if n.alive]
        if not views:
            return
        if self.mode == "node":
            for index, view in views:
                if index in self.streams:
                    self.streams[index].send(wire.batch([view]))
        else:
            self.streams[-1].send(wire.batch([v for _, v in views]))
        self.sent += len(views)

    @property
    def received(self) -> int:
        return sum(s.received for s in [*self.streams.values(), *self.closed])

    async def close(self) -> None:
        self.task.cancel()
        for s in self.streams.values():
            s.close()
        for ch in self.channels:
            await ch.close()
