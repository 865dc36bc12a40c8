"""CustomResourceDefinitions for the schedulers that bring their own API (Volcano, scheduler-plugins,
Kueue): create them from their release's manifests and wait until the apiserver serves them."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml


def manifests(files: list[Path]) -> list[dict[str, Any]]:
    docs = []
    for f in files:
        docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    return docs


def install(api_client, files: list[Path], timeout_s: float = 60.0) -> None:
    """Create every CRD in `files` (one already there is kept) and wait until each is Established."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for doc in manifests(files):
        names.append(doc["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(doc, _preload_content=False)
        except ApiException as e:
            if e.status != 409:
                raise
        except ValueError:
            pass  # python client chokes on a null status in the response; the object was created
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending:
        for n in list(pending):
            crd = ext.read_custom_resource_definition(n, _preload_content=False)
            status = json.loads(crd.data).get("status") or {}
            if any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or []):
                pending.discard(n)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not established after {timeout_s}s: {sorted(pending)}")
        if pending:
            time.sleep(0.2)
