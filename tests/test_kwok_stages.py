"""kwok-config/stages.yaml: what every pod Stage may write.

KWOK plays a stage on the pod object it saw and patches by name. A stage still queued when its
pod is deleted would, without a uid in the patch, land on a new pod of the same name (Volcano
recreates a restarted member as <job>-<task>-<index>): the unbound successor became Running and
vc-scheduler never placed it. The kubelet's status patches carry the uid as a precondition
(kubernetes/kubernetes#86320); ours must too.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

STAGES = Path(__file__).resolve().parents[1] / "kwok-config" / "stages.yaml"
UID_LINE = re.compile(r"^metadata:\n  uid: \{\{ \.metadata\.uid \| Quote \}\}$", re.M)


def pod_stages() -> list[dict]:
    docs = [d for d in yaml.safe_load_all(STAGES.read_text()) if d]
    return [d for d in docs if d["spec"]["resourceRef"]["kind"] == "Pod"]


def test_every_pod_status_patch_names_the_pod_by_uid():
    writers = [s for s in pod_stages() if "delete" not in s["spec"]["next"]]
    assert {s["metadata"]["name"] for s in writers} >= {"pod-ready", "pod-ready-after", "pod-complete"}
    for stage in writers:
        nxt, name = stage["spec"]["next"], stage["metadata"]["name"]
        assert "statusTemplate" not in nxt, f"{name}: a statusTemplate patch cannot carry the pod's uid"
        for patch in nxt["patches"]:
            assert patch["subresource"] == "status", name
            assert patch.get("root", "") == "", f"{name}: the template must reach metadata, not only status"
            assert UID_LINE.search(patch["template"]), f"{name}: the status patch does not carry metadata.uid"
            assert re.search(r"^status:$", patch["template"], re.M), name
