import sys

from google.protobuf import descriptor, descriptor_pool

# importing registers their messages in the default descriptor pool, which show() looks names up in
from ray.core.generated import common_pb2, gcs_pb2, gcs_service_pb2, node_manager_pb2  # noqa: F401

TYPES = {v: k[5:].lower() for k, v in vars(descriptor.FieldDescriptor).items() if k.startswith("TYPE_")}
def show(d, indent=0, seen=None):
    print(" "*indent + f"message {d.full_name} ({d.file.name})")
    for f in d.fields:
        t = f.message_type.full_name if f.message_type else (f.enum_type.full_name if f.enum_type
                                                             else TYPES.get(f.type, f.type))
        rep = "repeated " if getattr(f, "is_repeated", False) else ""
        print(" "*indent + f"  {f.number}: {rep}{t} {f.name}")
names = sys.argv[1:]
pool = descriptor_pool.Default()
for n in names:
    show(pool.FindMessageTypeByName(n))
