"""The openb trace slice as a replay a small real cluster finishes in minutes: same pods, same order,
same shapes (gpu_milli < 1000 on one GPU = a milli share, else whole GPUs), arrivals compressed.

The slice (tests/data/traces/openb_pod_list_default-first1000.csv: 884 GPU pods) spans 120 days of
creation times and pods that live for months; replayed as is at time scale 60 it would take two
days. Here submit_s = creation offset / --compress (order and burstiness kept) and duration_s =
min(duration, --max-duration-s); everything else is import_openb's reading with shares on. The
real and the simulated run then replay the same JSONL, so whatever this changes, it changes for both.

    python tools/k8s/openb_share_slice.py out.jsonl [--compress 600] [--max-duration-s 3600]
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
    ap.add_argument("--compress", type=float, default=600.0)
    ap.add_argument("--max-duration-s", type=float, default=3600.0)
    a = ap.parse_args()
    jobs, meta = import_openb(a.source, shares=True)
    jobs = [replace(j, submit_s=round(j.submit_s / a.compress, 3), duration_s=min(j.duration_s, a.max_duration_s))
            for j in jobs]
    export_jsonl(jobs, a.output, {**meta, "source": Path(a.source).name, "compress": a.compress,
                                  "max_duration_s": a.max_duration_s})
    shares = sum(1 for j in jobs if j.share)
    print(f"{a.output}: {len(jobs)} pods ({shares} milli shares), arrivals over {jobs[-1].submit_s:.0f} s")


if __name__ == "__main__":
    main()
