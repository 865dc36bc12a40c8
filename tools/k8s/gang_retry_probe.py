"""How often kube-gang's kube-scheduler retries one gang that does not fit (docs/kube-gang.md).

    .venv/bin/python tools/k8s/gang_retry_probe.py [--seconds 20]

Starts a kube-gang cluster (fakes/kubegang/target.py's gates, alpha API and controllers; the
scheduler at -v=4) on 3 KWOK nodes of 8 GPUs, creates a 2-pod gang that fits and then one that
cannot (minCount 2, one node left), and prints scheduler_schedule_attempts_total every 5 s while
nothing else changes, then the scheduler's most frequent log lines. Everything is stopped at the end.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.kube.cluster import ClusterSpec, KubeCluster, ready_nodes  # noqa: E402
from fakes.kube.family import apiserver_args  # noqa: E402
from fakes.kube.target import scheduler_config  # noqa: E402
from fakes.kubegang.target import cluster_options  # noqa: E402
from loadgen.model.fleet import Fleet  # noqa: E402

NS, G, V = "gangstorm", "scheduling.k8s.io", "v1alpha2"


def attempts(cluster, api_client) -> dict[str, float]:
    import urllib3
    conf = api_client.configuration
    http = urllib3.PoolManager(cert_reqs="CERT_NONE", cert_file=conf.cert_file, key_file=conf.key_file)
    text = http.request("GET", cluster.scheduler_metrics_url).data.decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'scheduler_schedule_attempts_total\{[^}]*result="(\w+)"[^}]*\} (\S+)', text)}


def gang(api, custom, name: str, members: int) -> None:
    policy = {"gang": {"minCount": members}}
    custom.create_namespaced_custom_object(G, V, NS, "workloads", {
        "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": name},
        "spec": {"podGroupTemplates": [{"name": "w", "schedulingPolicy": policy}]}})
    custom.create_namespaced_custom_object(G, V, NS, "podgroups", {
        "apiVersion": f"{G}/{V}", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "w"}},
                 "schedulingPolicy": policy}})
    for m in range(members):
        api.create_namespaced_pod(NS, {"metadata": {"name": f"{name}-{m}"}, "spec": {
            "schedulingGroup": {"podGroupName": name},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"},
                                                                      "limits": {"nvidia.com/gpu": "8"}}}]}})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=20)
    args = p.parse_args()
    from kubernetes import client as k8s
    work = Path(tempfile.mkdtemp(prefix="gang-retry-probe-"))
    spec = ClusterSpec(name="gs-gang-probe", workdir=work, scheduler=True, scheduler_config=scheduler_config({}),
                       apiserver_args=apiserver_args({}), scheduler_args={"v": "4"}, **cluster_options())
    with KubeCluster(spec) as cluster:
        ac = cluster.api_client()
        api, custom = k8s.CoreV1Api(ac), k8s.CustomObjectsApi(ac)
        cluster.create_nodes(Fleet(nodes=3, gpus_per_node=8))
        while ready_nodes(api) < 3:
            time.sleep(0.5)
        api.create_namespace({"metadata": {"name": NS}})
        while True:
            try:
                api.read_namespaced_service_account("default", NS)
                break
            except Exception:
                time.sleep(0.5)
        gang(api, custom, "fits", 2)
        time.sleep(3)
        gang(api, custom, "waits", 2)
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            time.sleep(5)
            print(f"t={time.monotonic() - t0:5.1f}s attempts {attempts(cluster, ac)}", flush=True)
        lines = (cluster.cluster_dir / "logs" / "kube-scheduler.log").read_text(errors="replace").splitlines()
        print(f"{len(lines)} scheduler log lines; most frequent of the last 3,000:")
        common = collections.Counter(re.sub(r"^\S+ \S+\s+\d+ ", "", line)[:110] for line in lines[-3000:])
        for text, n in common.most_common(12):
            print(f"{n:6d} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
