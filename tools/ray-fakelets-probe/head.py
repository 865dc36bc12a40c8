"""Real Ray head (GCS + one raylet with no GPU), via ray.cluster_utils.Cluster, like fakes/ray/serve.py.
Prints {"address":...,"node_id":...} on stdout, then runs until stdin closes; shuts the cluster down."""
import json
import os
import sys

from ray.cluster_utils import Cluster

cpus = int(os.environ.get("HEAD_CPUS", "1"))
c = Cluster(shutdown_at_exit=True)
head = c.add_node(num_cpus=cpus, num_gpus=0, include_dashboard=False,
                  object_store_memory=75 * 1024 * 1024, node_name="head")
print(json.dumps({"address": c.address, "node_id": head.node_id,
                  "session_dir": head.get_session_dir_path()}), flush=True)
try:
    sys.stdin.read()
finally:
    c.shutdown()
    print("head: stopped", file=sys.stderr, flush=True)
