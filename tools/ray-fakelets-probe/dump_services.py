import importlib
import pkgutil

import ray.core.generated as g

for m in sorted(x.name for x in pkgutil.iter_modules(g.__path__)):
    if not m.endswith('_pb2'):
        continue
    mod = importlib.import_module('ray.core.generated.'+m)
    d = mod.DESCRIPTOR
    for s in d.services_by_name.values():
        print(f"{m}: service {s.full_name}")
        for meth in s.methods:
            print(f"    {meth.name}({meth.input_type.name}) -> "
                  f"{meth.output_type.name}{' [client-stream]' if meth.client_streaming else ''}"
                  f"{' [server-stream]' if meth.server_streaming else ''}")
