"""A `--seeds` run folder whose named schedulers come from another run of the same seeds.

    python tools/seed_splice.py BASE PART OUT

Each simulated scheduler runs its own twin on the same workload, so one scheduler's figures do not
depend on which others ran with it (a volcano-only run of seed 42 gives the six-scheduler run's
volcano figures, byte for byte). When only one twin changed, rerunning that one and splicing its
figures into the stored run gives what a full rerun would. OUT/seeds/<seed>/summary.json is BASE's
with every scheduler PART ran replaced by PART's; run tools/seed_claims.py on OUT afterwards.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def splice(base: Path, part: Path, out: Path) -> list[int]:
    seeds = sorted(int(p.name) for p in (base / "seeds").iterdir() if (p / "summary.json").is_file())
    mine = sorted(int(p.name) for p in (part / "seeds").iterdir() if (p / "summary.json").is_file())
    if seeds != mine:
        raise SystemExit(f"seed_splice: {base} has seeds {seeds}, {part} has {mine}")
    for seed in seeds:
        doc = json.loads((base / "seeds" / str(seed) / "summary.json").read_text())
        new = json.loads((part / "seeds" / str(seed) / "summary.json").read_text())
        doc["schedulers"].update(new["schedulers"])
        doc["spliced"] = {"run_id": new.get("run_id"), "seed": new.get("seed"), "schedulers": sorted(new["schedulers"])}
        dest = out / "seeds" / str(seed)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    return seeds


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.split("\n\n")[1].strip())
    print(f"{len(splice(*(Path(a) for a in sys.argv[1:])))} seeds -> {sys.argv[3]}")
