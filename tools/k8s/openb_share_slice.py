"""The openb trace slice as a replay a small real cluster finishes in minutes: same pods, same order,
same shapes (gpu_milli < 1000 on one GPU = a milli share, else whole GPUs), arrivals compressed.

The slice (tests/data/traces/openb_pod_list_default-first1000.csv: 884 GPU pods) spans 120 days of
creation times, but 95% of its pods are created in the last 4.5 days: the first 5% are long-lived
pods already there when the rest arrive, and some live for months. Replayed as is at time scale 60
it would take two days. Here the pods created before the --start-quantile of creation times
arrive at 0 (they are there from the start), the rest at (creation - that time) / --compress (order
and burstiness kept), and duration_s = min(duration, --max-duration-s); everything else is
import_openb's reading with shares on. The real and the simulated run replay the same JSONL, so
whatever this changes, it changes for both.

    python tools/k8s/openb_share_slice.py out.jsonl [--start-quantile 0.05] [--compress 22] [--max-duration-s 3600]
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from loadgen.input.traces import export_jsonl, import_openb

SLICE = Path(__file__).resolve().parents[2] / "tests/data/traces/openb_pod_list_default-first1000.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output")
    ap.add_argument("--source", default=str(SLICE))
    ap.add_argument("--start-quantile", type=float, default=0.05)
    ap.add_argument("--compress", type=float, default=22.0)
    ap.add_argument("--max-duration-s", type=float, default=3600.0)
    a = ap.parse_args()
    jobs, meta = import_openb(a.source, shares=True)
    created = sorted(j.submit_s for j in jobs)
    t0 = created[int(a.start_quantile * (len(created) - 1))]
    jobs = [replace(j, submit_s=round(max(j.submit_s - t0, 0.0) / a.compress, 3),
                    duration_s=min(j.duration_s, a.max_duration_s)) for j in jobs]
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    export_jsonl(jobs, a.output, {**meta, "source": Path(a.source).name, "start_quantile": a.start_quantile,
                                         "start_s": t0, "compress": a.compress,
                                  "max_duration_s": a.max_duration_s})
    shares = sum(1 for j in jobs if j.share)
    print(f"{a.output}: {len(jobs)} pods ({shares} milli shares), arrivals over {jobs[-1].submit_s:.0f} s")


if __name__ == "__main__":
    main()
