"""Extract serialized FileDescriptorProtos embedded in a protobuf-C++ binary."""
import re
import sys

from google.protobuf import descriptor_pb2

data = open(sys.argv[1], 'rb').read()
want = sys.argv[2].encode()
found = {}
for m in re.finditer(rb'\x0a(.)(src/ray/protobuf/[A-Za-z0-9_/]+\.proto|[A-Za-z0-9_/]+\.proto)', data, re.S):
    name = m.group(2)
    if m.group(1)[0] != len(name) or want not in name:
        continue
    start = m.start()
    # grow until parse ok and round-trips
    best = None
    for end in range(start + 50, min(len(data), start + 200000)):
        # quick filter: descriptor data ends; try parse at positions where next byte is NUL (C array terminator)
        if data[end] != 0:
            continue
        chunk = data[start:end]
        try:
            fd = descriptor_pb2.FileDescriptorProto.FromString(chunk)
        except Exception:
            continue
        if fd.SerializeToString() == chunk and fd.name == name.decode():
            best = fd
            break
    if best is not None:
        found[best.name] = best
for n, fd in found.items():
    print("=====", n, "package", fd.package, "deps", list(fd.dependency))
    open('/tmp/ray16/' + n.replace('/', '_') + '.fdp', 'wb').write(fd.SerializeToString())
    print(fd)
