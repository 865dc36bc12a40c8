"""vc-scheduler seeing the apiserver as it does in a pod, which Volcano's deviceshare plugin needs.

In Volcano v1.14.1 the deviceshare plugin's own API client (pkg/scheduler/api/devices/util.go
GetClient -> NewClient) is built only from rest.InClusterConfig(): the KUBERNETES_SERVICE_HOST/PORT
environment and the service-account token and CA at /var/run/secrets/kubernetes.io/serviceaccount.
It ignores --kubeconfig. Started outside a pod, the first vGPU node it reads makes it patch the
node's handshake through a nil client, and vc-scheduler dies (nil pointer in
vgpu.patchNodeAnnotations, from NewGPUDevices in the session snapshot).

So, with vGPU on, vc-scheduler is started as a pod would run it: a ServiceAccount bound to
cluster-admin (Volcano's chart grants its scheduler broad rights; on this private test cluster the
admin role stands in), a token from the TokenRequest API, and that token with the cluster CA
mounted at the fixed path in a mount namespace of its own (unshare: a tmpfs over /run, so nothing
on the host changes).
"""
from __future__ import annotations

import base64
import shlex
from pathlib import Path

import yaml

SA_NAMESPACE, SA_NAME = "kube-system", "volcano-scheduler"
MOUNT = "/run/secrets/kubernetes.io/serviceaccount"      # /var/run is /run
TOKEN_SECONDS = 24 * 3600


def service_account_token(api_client) -> str:
    """A token of SA_NAMESPACE/SA_NAME, created and bound to cluster-admin if needed."""
    from kubernetes import client as k8s
    core, rbac = k8s.CoreV1Api(api_client), k8s.RbacAuthorizationV1Api(api_client)
    _created(lambda: core.create_namespaced_service_account(
        SA_NAMESPACE, {"metadata": {"name": SA_NAME}}, _preload_content=False))
    _created(lambda: rbac.create_cluster_role_binding({
        "metadata": {"name": f"gangstorm-{SA_NAME}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}]},
        _preload_content=False))
    out = core.create_namespaced_service_account_token(
        SA_NAME, SA_NAMESPACE, {"spec": {"expirationSeconds": TOKEN_SECONDS}})
    return out.status.token


def _created(create) -> None:
    from kubernetes.client import ApiException
    try:
        create()
    except ApiException as e:
        if e.status != 409:
            raise


def cluster_ca(kubeconfig: Path) -> bytes:
    """The CA the admin kubeconfig trusts (inline data or a file)."""
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = cfg["clusters"][0]["cluster"]
    if cluster.get("certificate-authority-data"):
        return base64.b64decode(cluster["certificate-authority-data"])
    path = Path(cluster["certificate-authority"])
    return (path if path.is_absolute() else Path(kubeconfig).parent / path).read_bytes()


def write_mount(directory: Path, token: str, ca: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca)
    (directory / "namespace").write_text(SA_NAMESPACE)
    return directory


def in_pod(argv: list, directory: Path) -> list[str]:
    """argv run in a mount namespace where `directory` is the service-account mount."""
    inner = (f"mount -t tmpfs gangstorm-run /run && mkdir -p {MOUNT} && "
             f"mount --bind {shlex.quote(str(directory))} {MOUNT} && exec {shlex.join(str(a) for a in argv)}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner]


def service_env(url: str) -> dict[str, str]:
    """KUBERNETES_SERVICE_HOST/PORT for the apiserver at `url` (https://host:port)."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
