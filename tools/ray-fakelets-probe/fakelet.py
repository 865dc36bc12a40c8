"""A fleet of fake raylets in one asyncio process, speaking Ray 2.60's gRPC to a real GCS.

Per fake node: one grpc.aio server on 127.0.0.1:<ephemeral> (NodeManagerService bundle calls +
grpc.health.v1.Health/Check), a RegisterNode call, and a RaySyncer.StartSync stream to the GCS
carrying RESOURCE_VIEW messages. Prints JSON lines; reads JSON commands on stdin:
  {"op":"stats"} {"op":"kill","node":i} {"op":"stop"}
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import threading
import time

import grpc
from ray.core.generated import gcs_pb2
from ray.core.generated import gcs_service_pb2 as gs
from ray.core.generated import node_manager_pb2 as nm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import syncer_proto as sp  # noqa: E402

NM = nm.DESCRIPTOR.services_by_name["NodeManagerService"]
CALLS: collections.Counter = collections.Counter()
UNIMPL: collections.Counter = collections.Counter()
EVENTS: list = []
T0 = time.monotonic()


def out(**kw):
    print(json.dumps(kw), flush=True)


def event(msg):
    EVENTS.append((round(time.monotonic() - T0, 3), msg))
    if len(EVENTS) <= 400:
        print(json.dumps({"event": "log", "t": EVENTS[-1][0], "msg": msg}), file=sys.stderr, flush=True)


class FakeNode:
    def __init__(self, fleet: Fleet, index: int, resources: dict, labels: dict):
        self.fleet, self.index = fleet, index
        self.node_id = os.urandom(28)
        self.hex = self.node_id.hex()
        self.name = f"fake-{index:05d}"
        self.total = dict(resources)
        self.avail = dict(resources)
        self.labels = dict(labels)
        self.prepared: dict = {}     # (pg, idx) -> unit resources
        self.committed: dict = {}    # (pg, idx) -> unit resources
        self.version = 0
        self.alive = True
        self.queue: asyncio.Queue = asyncio.Queue()
        self.server = None
        self.port = None
        self.sync_task = None

    # -- resources -------------------------------------------------------------------------
    def fits(self, need):
        return all(self.avail.get(k, 0.0) + 1e-9 >= v for k, v in need.items())

    def push_view(self):
        self.version += 1
        rv = sp.ResourceViewSyncMessage(resources_available=self.avail, resources_total=self.total,
                                        labels=self.labels)
        msg = sp.RaySyncMessage(version=self.version, message_type=sp.RESOURCE_VIEW,
                                sync_message=rv.SerializeToString(), node_id=self.node_id)
        self.queue.put_nowait(sp.RaySyncMessageBatch(messages=[msg]))

    def add_formatted(self, unit, pg, idx, sign):
        """Raylet-side bundle resources (BundleSpecification): R_group_<i>_<pg> and the
        wildcard R_group_<pg> (summed over this group's bundles on the node), plus bundle_group_*."""
        ph = pg.hex()
        for r, v in list(unit.items()) + [("bundle", 1000.0)]:
            ik, wk = f"{r}_group_{idx}_{ph}", f"{r}_group_{ph}"
            if sign > 0:
                self.total[ik] = v
                self.avail[ik] = v
            else:
                self.total.pop(ik, None)
                self.avail.pop(ik, None)
            self.total[wk] = self.total.get(wk, 0.0) + sign * v
            self.avail[wk] = self.avail.get(wk, 0.0) + sign * v
            if self.total[wk] <= 1e-9:
                self.total.pop(wk, None)
                self.avail.pop(wk, None)

    def release(self, key):
        if key in self.prepared:
            unit = self.prepared.pop(key)
        elif key in self.committed:
            unit = self.committed.pop(key)
            self.add_formatted(unit, key[0], key[1], -1)
        else:
            return False
        for k, v in unit.items():
            self.avail[k] = self.avail.get(k, 0.0) + v
        return True

    # -- NodeManagerService --------------------------------------------------------------------
    async def PrepareBundleResources(self, req, ctx):
        need = collections.Counter()
        for b in req.bundle_specs:
            for k, v in b.unit_resources.items():
                need[k] += v
        ok = self.fits(need)
        if ok:
            for b in req.bundle_specs:
                unit = dict(b.unit_resources)
                self.prepared[(b.bundle_id.placement_group_id, b.bundle_id.bundle_index)] = unit
                for k, v in unit.items():
                    self.avail[k] -= v
            self.push_view()
        event(f"{self.name} Prepare {len(req.bundle_specs)} bundles "
              f"pg={req.bundle_specs[0].bundle_id.placement_group_id.hex()[:8]} ok={ok} "
              f"bundle.node_id={[b.node_id.hex()[:8] or '-' for b in req.bundle_specs]} self={self.hex[:8]}")
        return nm.PrepareBundleResourcesReply(success=ok)

    async def CommitBundleResources(self, req, ctx):
        for b in req.bundle_specs:
            key = (b.bundle_id.placement_group_id, b.bundle_id.bundle_index)
            unit = self.prepared.pop(key, None)
            if unit is None:
                continue
            self.committed[key] = unit
            self.add_formatted(unit, key[0], key[1], +1)
        self.push_view()
        event(f"{self.name} Commit {len(req.bundle_specs)} bundles "
              f"bundle.node_id={[b.node_id.hex()[:8] or '-' for b in req.bundle_specs]} self={self.hex[:8]}")
        return nm.CommitBundleResourcesReply()

    async def RemovePlacementGroupBundles(self, req, ctx):
        n = sum(self.release((b.bundle_id.placement_group_id, b.bundle_id.bundle_index)) for b in req.bundle_specs)
        self.push_view()
        event(f"{self.name} RemovePlacementGroupBundles pg={req.placement_group_id.hex()[:8]} {len(req.bundle_specs)} "
              f"asked, {n} released bundle.node_id={[b.node_id.hex()[:8] or '-' for b in req.bundle_specs]}")
        return nm.RemovePlacementGroupBundlesReply()

    async def ReleaseUnusedBundles(self, req, ctx):
        keep = {(b.bundle_id.placement_group_id, b.bundle_id.bundle_index) for b in req.bundles_in_use}
        gone = [k for k in list(self.prepared) + list(self.committed) if k not in keep]
        for k in gone:
            self.release(k)
        if gone:
            self.push_view()
        event(f"{self.name} ReleaseUnusedBundles keep={len(keep)} released={len(gone)}")
        return nm.ReleaseUnusedBundlesReply()

    async def GetResourceLoad(self, req, ctx):
        return nm.GetResourceLoadReply(resources=gcs_pb2.ResourcesData(
            node_id=self.node_id, resources_available=self.avail, resources_total=self.total,
            node_manager_address="127.0.0.1"))

    async def NotifyGCSRestart(self, req, ctx):
        event(f"{self.name} NotifyGCSRestart")
        return nm.NotifyGCSRestartReply()

    async def DrainRaylet(self, req, ctx):
        event(f"{self.name} DrainRaylet {req}")
        return nm.DrainRayletReply(is_accepted=True)

    async def ShutdownRaylet(self, req, ctx):
        event(f"{self.name} ShutdownRaylet graceful={req.graceful}")
        return nm.ShutdownRayletReply()

    async def GetNodeStats(self, req, ctx):
        return nm.GetNodeStatsReply()

    async def health_check(self, req: bytes, ctx):
        service = req[2:2 + req[1]].decode() if req[:1] == b"\x0a" else ""
        if service and service != self.hex:
            event(f"{self.name} health check for another service {service[:8]}")
        return b"\x08\x01" if self.alive else b"\x08\x02"

    # -- gRPC plumbing -------------------------------------------------------------------------
    def handler(self):
        node = self

        class H(grpc.GenericRpcHandler):
            def service(self, details):
                method = details.method
                CALLS[method] += 1
                if CALLS[method] == 1:
                    meta = [(k, v[:20] if isinstance(v, str) else v) for k, v in details.invocation_metadata]
                    event(f"{node.name} first call {method} metadata={meta}")
                if method == "/grpc.health.v1.Health/Check":
                    return grpc.unary_unary_rpc_method_handler(node.health_check)
                if method.startswith("/ray.rpc.NodeManagerService/"):
                    name = method.rsplit("/", 1)[1]
                    fn = getattr(node, name, None)
                    md = NM.methods_by_name.get(name)
                    if fn and md:
                        from google.protobuf import message_factory
                        req = message_factory.GetMessageClass(md.input_type)
                        rep = message_factory.GetMessageClass(md.output_type)
                        return grpc.unary_unary_rpc_method_handler(
                            fn, request_deserializer=req.FromString, response_serializer=rep.SerializeToString)
                UNIMPL[method] += 1
                if UNIMPL[method] <= 3:
                    event(f"{node.name} UNIMPLEMENTED {method} "
                          f"md={[(k, v[:16] if isinstance(v, str) else v) for k, v in details.invocation_metadata]}")
                return None
        return H()

    async def start(self):
        self.server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        self.server.add_generic_rpc_handlers((self.handler(),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()

    def info(self):
        now = int(time.time() * 1000)
        return gcs_pb2.GcsNodeInfo(
            node_id=self.node_id, node_manager_address="127.0.0.1", node_manager_port=self.port,
            object_manager_port=self.port, node_manager_hostname=self.name,
            raylet_socket_name=f"/nonexistent/{self.name}/raylet",
                                   object_store_socket_name=f"/nonexistent/{self.name}/plasma",
            metrics_export_port=0, runtime_env_agent_port=0, metrics_agent_port=0, dashboard_agent_listen_port=0,
            resources_total=self.total, node_name=self.name, labels=self.labels,
            state=gcs_pb2.GcsNodeInfo.ALIVE, start_time_ms=now, is_head_node=False,
            state_snapshot=gcs_pb2.NodeSnapshot(state=gcs_pb2.NodeSnapshot.ACTIVE))

    async def sync(self, channel):
        async def requests():
            while True:
                yield await self.queue.get()
        call = channel.stream_stream(sp.START_SYNC, request_serializer=sp.RaySyncMessageBatch.SerializeToString,
                                     response_deserializer=sp.RaySyncMessageBatch.FromString)(
            requests(), metadata=(("node_id", self.hex), ("ray_cluster_id", self.fleet.cluster_hex)))
        self.push_view()
        try:
            async for batch in call:
                self.fleet.sync_rx += len(batch.messages)
            event(f"{self.name} sync stream ended: {await call.code()}")
        except asyncio.CancelledError:
            call.cancel()
            raise
        except grpc.aio.AioRpcError as e:
            event(f"{self.name} sync stream error {e.code()} {e.details()}")


class Fleet:
    def __init__(self, gcs: str, n: int, sync: bool, channels: int):
        self.gcs, self.n, self.use_sync, self.n_channels = gcs, n, sync, channels
        self.nodes: list[FakeNode] = []
        self.sync_rx = 0
        self.cluster_hex = ""

    async def run(self):
        self.channel = grpc.aio.insecure_channel(self.gcs)
        get_cluster_id = self.channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId",
                                                  request_serializer=gs.GetClusterIdRequest.SerializeToString,
                                                  response_deserializer=gs.GetClusterIdReply.FromString)
        cid = await get_cluster_id(gs.GetClusterIdRequest(), timeout=10)
        self.cluster_hex = cid.cluster_id.hex()
        md = (("ray_cluster_id", self.cluster_hex),)
        register = self.channel.unary_unary("/ray.rpc.NodeInfoGcsService/RegisterNode",
                                            request_serializer=gs.RegisterNodeRequest.SerializeToString,
                                            response_deserializer=gs.RegisterNodeReply.FromString)
        # separate TCP connections for the syncer streams (distinct channel args defeat sharing)
        sync_channels = [grpc.aio.insecure_channel(self.gcs,
                                                   options=[("gangstorm.channel", i)]) for i in range(self.n_channels)]
        t = time.monotonic()
        for i in range(self.n):
            node = FakeNode(self, i, {"GPU": 8.0, "CPU": 96.0, "memory": 1e12, "object_store_memory": 1e9,
                                      "node:127.0.0.1": 1.0, f"gs_node_{i:05d}": 1.0},
                            {"gangstorm.io/leaf": f"leaf-{i // 32}", "nvidia.com/gpu.product": "H100"})
            await node.start()
            rep = await register(gs.RegisterNodeRequest(node_info=node.info()), metadata=md, timeout=30)
            if rep.status.code != 0:
                out(event="register_failed", node=i, status=str(rep.status))
            self.nodes.append(node)
            if self.use_sync:
                node.sync_task = asyncio.create_task(node.sync(sync_channels[i % self.n_channels]))
        out(event="registered", n=self.n, s=round(time.monotonic() - t, 3), cluster_id=self.cluster_hex[:8],
            nodes=[{"i": n.index, "id": n.hex[:8], "port": n.port} for n in self.nodes[:8]])
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        threading.Thread(target=lambda: [loop.call_soon_threadsafe(q.put_nowait, line) for line in sys.stdin] +
                         [loop.call_soon_threadsafe(q.put_nowait, None)], daemon=True).start()
        while True:
            line = await q.get()
            if line is None:
                break
            cmd = json.loads(line)
            if cmd["op"] == "stats":
                out(event="stats", calls=dict(CALLS), unimplemented=dict(UNIMPL), sync_rx=self.sync_rx,
                    bundles={n.name: (len(n.prepared), len(n.committed), n.avail.get("GPU")) for n in self.nodes[:8]})
            elif cmd["op"] == "kill":
                node = self.nodes[int(cmd["node"])]
                node.alive = False
                if node.sync_task:
                    node.sync_task.cancel()
                await node.server.stop(0)
                out(event="killed", node=node.index, id=node.hex[:8], t=time.time())
            elif cmd["op"] == "stop":
                break
        from ray.core.generated import common_pb2
        unregister = self.channel.unary_unary("/ray.rpc.NodeInfoGcsService/UnregisterNode",
                                              request_serializer=gs.UnregisterNodeRequest.SerializeToString,
                                              response_deserializer=gs.UnregisterNodeReply.FromString)
        for node in self.nodes:
            if node.sync_task:
                node.sync_task.cancel()
            if node.alive:   # what a raylet does on a graceful exit
                try:
                    await unregister(gs.UnregisterNodeRequest(node_id=node.node_id,
                                                              node_death_info=common_pb2.NodeDeathInfo(
                        reason=common_pb2.NodeDeathInfo.EXPECTED_TERMINATION, reason_message="fakelet fleet stopped")),
                        metadata=md, timeout=10)
                except grpc.aio.AioRpcError as e:
                    event(f"unregister {node.name}: {e.code()}")
            await node.server.stop(0)
        out(event="stopped")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gcs", required=True)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--no-sync", action="store_true")
    ap.add_argument("--sync-channels", type=int, default=1)
    a = ap.parse_args()
    asyncio.run(Fleet(a.gcs, a.nodes, not a.no_sync, a.sync_channels).run())


if __name__ == "__main__":
    main()
