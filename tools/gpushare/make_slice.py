"""The openb slice the Slurm and Volcano real-vs-twin runs replay: the pods of
tests/data/traces/openb_pod_list_default-first1000.csv (cluster-trace-gpu-v2023, CC BY 4.0) that
arrive in the trace's last 72 hours (610 of its 884 GPU pods; the others are months apart), arrivals
shifted to start at 0, gpu_milli read as milli shares.

    PYTHONPATH=$PWD python tools/gpushare/make_slice.py results/gpushare/slurm/openb-last72h.jsonl
"""
import sys
from dataclasses import replace

from loadgen.input.traces import export_jsonl, import_openb

jobs, meta = import_openb("tests/data/traces/openb_pod_list_default-first1000.csv", shares=True)
end = max(j.submit_s for j in jobs)
keep = sorted((j for j in jobs if j.submit_s >= end - 72 * 3600), key=lambda j: (j.submit_s, j.id))
t0 = keep[0].submit_s
keep = [replace(j, submit_s=j.submit_s - t0) for j in keep]
export_jsonl(keep, sys.argv[1], {"source": meta["source"], "window": "last 72 h", "pods": len(keep)})
print(len(keep), "pods,", sum(1 for j in keep if j.share), "with a milli share")
