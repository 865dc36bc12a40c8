"""make bench: wall time and peak memory of the default comparative run at 10k and 100k nodes.

Each case runs `gangstorm run` in a child process so its peak RSS is measured on its own
(getrusage of the waited-for child). Results go to results/bench-<time>.json and stdout.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

CASES = [
    # the four built from the start, so the figures stay comparable with earlier benches
    ("10k nodes, 6 h, 4 schedulers", ["scenarios/baseline-3x.yaml", "--schedulers", "kube,volcano,ray,slurm"]),
    ("100k nodes, 1 h, 4 schedulers", ["scenarios/scale-100k.yaml"]),
]


def measure(args: list[str], out: Path) -> dict:
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    pid = os.fork()
    if pid == 0:
        fd = os.open(str(out / "stdout.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.execv(sys.executable, [sys.executable, "-m", "loadgen.cli.main", "run", *args, "--out", str(out),
                                  "--quiet"])
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    summary = json.loads((out / "summary.json").read_text())
    return {"args": args, "exit": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "jobs": summary["workload"]["jobs"], "nodes": summary["fleet"]["nodes"]}


def main() -> int:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    root = Path("results") / f"bench-{stamp}"
    rows = []
    for label, args in CASES:
        r = measure(args, root / label.split(",")[0].replace(" ", ""))
        r["case"] = label
        rows.append(r)
        print(f"{label:<32} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  peak RSS {r['peak_rss_mib']:7.1f} MiB"
              f"  ({r['jobs']:,} jobs)", flush=True)
    (root / "bench.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"results: {root}/bench.json")
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
