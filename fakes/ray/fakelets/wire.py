"""What a fakelet says on the wire that the Ray wheel has no Python stub for.

Ray 2.60.0 ships `_pb2` modules for the GCS and node-manager services but none for
`ray.rpc.syncer` (the resource-view stream every raylet opens to the GCS) and none for
`grpc.health.v1` (the health check the GCS sends to every raylet). The syncer descriptor is built
here field by field from the one compiled into the wheel's gcs_server and raylet binaries
(docs/design/ray-fakelets.md); `matches_binary()` compares the two so that a Ray upgrade which
changes ray_syncer.proto fails a test instead of crashing a real GCS. The health messages are two
bytes each and coded by hand.
"""
from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
PACKAGE = "ray.rpc.syncer"
START_SYNC = "/ray.rpc.syncer.RaySyncer/StartSync"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
NODE_MANAGER = "/ray.rpc.NodeManagerService/"
RESOURCE_VIEW, COMMANDS = 0, 1          # ray.rpc.syncer.MessageType

SERVING = b"\x08\x01"                    # HealthCheckResponse{status: SERVING}
NOT_SERVING = b"\x08\x02"


def health_service(request: bytes) -> str:
    """HealthCheckRequest.service (field 1, a string: tag 0x0a, one-byte length)."""
    if len(request) >= 2 and request[0] == 0x0A and request[1] < 0x80:
        return request[2:2 + request[1]].decode(errors="replace")
    return ""


def _map(msg: descriptor_pb2.DescriptorProto, name: str, number: int, entry: str, vtype: int) -> None:
    ent = msg.nested_type.add(name=entry)
    ent.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    ent.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=vtype)
    ent.options.map_entry = True
    msg.field.add(name=name, number=number, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                  type_name=f".{PACKAGE}.{msg.name}.{entry}")


def _syncer_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="src/ray/protobuf/ray_syncer.proto", package=PACKAGE,
                                            syntax="proto3")
    e = fd.enum_type.add(name="MessageType")
    e.value.add(name="RESOURCE_VIEW", number=RESOURCE_VIEW)
    e.value.add(name="COMMANDS", number=COMMANDS)

    m = fd.message_type.add(name="CommandsSyncMessage")
    m.field.add(name="should_global_gc", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)

    m = fd.message_type.add(name="ResourceViewSyncMessage")
    _map(m, "resources_available", 1, "ResourcesAvailableEntry", F.TYPE_DOUBLE)
    _map(m, "resources_total", 2, "ResourcesTotalEntry", F.TYPE_DOUBLE)
    m.field.add(name="object_pulls_queued", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)
    m.field.add(name="idle_duration_ms", number=4, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="is_draining", number=5, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)
    m.field.add(name="draining_deadline_timestamp_ms", number=6, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="node_activity", number=7, label=F.LABEL_REPEATED, type=F.TYPE_STRING)
    _map(m, "labels", 8, "LabelsEntry", F.TYPE_STRING)
    fields = sorted(m.field, key=lambda f: f.number)      # the binary's order, for an exact compare
    del m.field[:]
    m.field.extend(fields)

    m = fd.message_type.add(name="RaySyncMessage")
    m.field.add(name="version", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="message_type", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_ENUM,
                type_name=f".{PACKAGE}.MessageType")
    m.field.add(name="sync_message", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_BYTES)
    m.field.add(name="node_id", number=4, label=F.LABEL_OPTIONAL, type=F.TYPE_BYTES)

    m = fd.message_type.add(name="RaySyncMessageBatch")
    m.field.add(name="messages", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                type_name=f".{PACKAGE}.RaySyncMessage")

    s = fd.service.add(name="RaySyncer")
    s.method.add(name="StartSync", input_type=f".{PACKAGE}.RaySyncMessageBatch",
                 output_type=f".{PACKAGE}.RaySyncMessageBatch", client_streaming=True, server_streaming=True)
    return fd


SYNCER_FILE = _syncer_file()
_pool = descriptor_pool.DescriptorPool()
_pool.Add(SYNCER_FILE)


def _message(name: str):
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))


RaySyncMessage = _message("RaySyncMessage")
RaySyncMessageBatch = _message("RaySyncMessageBatch")
ResourceViewSyncMessage = _message("ResourceViewSyncMessage")


def view_message(node_id: bytes, version: int, available: dict[str, float], total: dict[str, float],
                 labels: dict[str, str]) -> RaySyncMessage:
    view = ResourceViewSyncMessage(resources_available=available, resources_total=total, labels=labels)
    return RaySyncMessage(version=version, message_type=RESOURCE_VIEW, sync_message=view.SerializeToString(),
                          node_id=node_id)


def batch(messages: list) -> RaySyncMessageBatch:
    """Never empty: an empty batch aborts the GCS (RAY_CHECK in ReceiveUpdate)."""
    if not messages:
        raise ValueError("a RaySyncMessageBatch must hold at least one message")
    return RaySyncMessageBatch(messages=messages)


def embedded_syncer_file(binary: Path) -> descriptor_pb2.FileDescriptorProto | None:
    """The ray_syncer.proto FileDescriptorProto compiled into a Ray binary, or None."""
    data = Path(binary).read_bytes()
    name = SYNCER_FILE.name.encode()
    for found in re.finditer(re.escape(b"\x0a" + bytes([len(name)]) + name), data):
        for end in range(found.start() + 50, min(len(data), found.start() + 20000)):
            if data[end] != 0:
                continue
            chunk = data[found.start():end]
            try:
                fd = descriptor_pb2.FileDescriptorProto.FromString(chunk)
            except Exception:  # noqa: BLE001 - not a whole message yet
                continue
            if fd.SerializeToString() == chunk:
                return fd
    return None


def matches_binary(binary: Path) -> bool:
    return embedded_syncer_file(binary) == SYNCER_FILE


def gcs_binary() -> Path:
    import ray
    return Path(ray.__file__).parent / "core" / "src" / "ray" / "gcs" / "gcs_server"
