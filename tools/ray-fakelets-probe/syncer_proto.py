"""ray.rpc.syncer messages for Ray 2.60.0, built at run time (the wheel ships no ray_syncer_pb2).

The descriptor is written out field by field from the FileDescriptorProto embedded in the
wheel's gcs_server binary (extract_fds.py dumps it); `check_against_binary()` compares the two.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def _build() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="src/ray/protobuf/ray_syncer.proto",
                                            package="ray.rpc.syncer", syntax="proto3")
    e = fd.enum_type.add(name="MessageType")
    e.value.add(name="RESOURCE_VIEW", number=0)
    e.value.add(name="COMMANDS", number=1)

    m = fd.message_type.add(name="CommandsSyncMessage")
    m.field.add(name="should_global_gc", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)

    m = fd.message_type.add(name="ResourceViewSyncMessage")

    def map_field(msg, name, number, entry, vtype):
        ent = msg.nested_type.add(name=entry)
        ent.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
        ent.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=vtype)
        ent.options.map_entry = True
        msg.field.add(name=name, number=number, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                      type_name=f".ray.rpc.syncer.{msg.name}.{entry}")
    map_field(m, "resources_available", 1, "ResourcesAvailableEntry", F.TYPE_DOUBLE)
    map_field(m, "resources_total", 2, "ResourcesTotalEntry", F.TYPE_DOUBLE)
    m.field.add(name="object_pulls_queued", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)
    m.field.add(name="idle_duration_ms", number=4, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="is_draining", number=5, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)
    m.field.add(name="draining_deadline_timestamp_ms", number=6, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="node_activity", number=7, label=F.LABEL_REPEATED, type=F.TYPE_STRING)
    map_field(m, "labels", 8, "LabelsEntry", F.TYPE_STRING)
    # nested types must come in the order the binary has them for an exact compare
    order = ["ResourcesAvailableEntry", "ResourcesTotalEntry", "LabelsEntry"]
    nested = sorted(m.nested_type, key=lambda t: order.index(t.name))
    del m.nested_type[:]
    m.nested_type.extend(nested)
    fields = sorted(m.field, key=lambda f: f.number)
    del m.field[:]
    m.field.extend(fields)

    m = fd.message_type.add(name="RaySyncMessage")
    m.field.add(name="version", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="message_type", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_ENUM,
                type_name=".ray.rpc.syncer.MessageType")
    m.field.add(name="sync_message", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_BYTES)
    m.field.add(name="node_id", number=4, label=F.LABEL_OPTIONAL, type=F.TYPE_BYTES)

    m = fd.message_type.add(name="RaySyncMessageBatch")
    m.field.add(name="messages", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                type_name=".ray.rpc.syncer.RaySyncMessage")

    s = fd.service.add(name="RaySyncer")
    s.method.add(name="StartSync", input_type=".ray.rpc.syncer.RaySyncMessageBatch",
                 output_type=".ray.rpc.syncer.RaySyncMessageBatch",
                 client_streaming=True, server_streaming=True)
    return fd


FILE = _build()
_pool = descriptor_pool.DescriptorPool()
_pool.Add(FILE)


def _cls(name):
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName("ray.rpc.syncer." + name))


RaySyncMessage = _cls("RaySyncMessage")
RaySyncMessageBatch = _cls("RaySyncMessageBatch")
ResourceViewSyncMessage = _cls("ResourceViewSyncMessage")
CommandsSyncMessage = _cls("CommandsSyncMessage")
RESOURCE_VIEW, COMMANDS = 0, 1
START_SYNC = "/ray.rpc.syncer.RaySyncer/StartSync"


def check_against_binary(path: str) -> bool:
    """True if the descriptor above equals the one embedded in `path` (a gcs_server/raylet)."""
    import re
    data = open(path, "rb").read()
    name = FILE.name.encode()
    for m in re.finditer(re.escape(b"\x0a" + bytes([len(name)]) + name), data):
        for end in range(m.start() + 50, min(len(data), m.start() + 20000)):
            if data[end] != 0:
                continue
            try:
                fd = descriptor_pb2.FileDescriptorProto.FromString(data[m.start():end])
            except Exception:  # noqa: BLE001
                continue
            if fd.SerializeToString() == data[m.start():end]:
                return fd == FILE
    return False


if __name__ == "__main__":
    import sys
    print(check_against_binary(sys.argv[1]))
