"""The fifth pass's trial (docs/performance.md, "Fifth pass"): the simulator's hot modules compiled
with mypyc, in a copy of a tree, to time against the tree itself. Not a build step of the project.

    python tools/sim/mypyc_trial.py TREE OUT --mypyc-python V/bin/python

copies TREE's committed files (`git archive HEAD`) to OUT, applies EDITS there (each must match
exactly once) and builds MODULES in place as extension modules with V's mypyc. V is a venv of its
own made from the same Python as the project's (the extensions are built for that interpreter):

    python3.11 -m venv V && V/bin/pip install mypy numpy==<the project venv's numpy> setuptools

Run the copy as a tree, e.g. `cd OUT && PYTHONPATH=$PWD .../python -m loadgen.cli.main run ...`.
Its jobs.csv and timeseries.csv are the tree's bytes (tools/sim/samebytes.py compare); its
summary.json differs only in the schedulers' `topology` (see the first edit) and the wall-clock figures.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# The hot modules of one seed of the six (py-spy) and the classes they subclass or build on:
# mypyc compiles a class hierarchy only as a whole.
MODULES = [
    "fakes/sim/base.py", "fakes/sim/state.py", "fakes/sim/controlplane.py", "fakes/sim/kubefamily.py",
    "fakes/sim/slices.py", "fakes/kube/sim.py", "fakes/kube/feasible.py", "fakes/kubegang/sim.py",
    "fakes/coscheduling/sim.py", "fakes/kueue/sim.py", "fakes/kueue/tas.py", "fakes/volcano/sim.py",
    "fakes/ray/sim.py", "fakes/slurm/sim.py", "loadgen/measure/recorder.py", "loadgen/drive/lifecycle.py",
    "loadgen/model/target.py", "loadgen/model/startup/imagecache.py", "loadgen/model/startup/rendezvous.py",
    "loadgen/model/startup/activity.py", "loadgen/model/job.py", "loadgen/model/events.py",
]

# mypy's findings in these modules (a None not ruled out, a ClusterState that is a PodState at run
# time, ...): reported, not acted on. mypyc compiles the code as written either way.
MYPY_FLAGS = ["--ignore-missing-imports", "--follow-imports=silent"] + [
    f"--disable-error-code={code}" for code in (
        "annotation-unchecked", "union-attr", "attr-defined", "arg-type", "var-annotated", "return-value",
        "assignment", "operator", "index", "misc")]

ANY = "from typing import Any\n"
# (file, old, new). mypyc checks every annotation at run time and stores an int passed as `float`
# as a float; these annotations held values of other types, which Python never checked.
EDITS = [
    # mypyc refuses a mix-in before the base class ("Non-trait base must appear first"), and with
    # the mix-in as a trait after it mypyc 2.4.1 crashes (vtable of a trait overriding the base).
    # The traits only describe the scheduler (summary.json's `topology`), so the trial drops them.
    ("fakes/kube/sim.py", "class SimKube(KubeTraits, KubeFamily):", "class SimKube(KubeFamily):"),
    ("fakes/kueue/sim.py", "class SimKueue(KueueTraits, KubeFamily):", "class SimKueue(KubeFamily):"),
    ("fakes/volcano/sim.py", "class SimVolcano(VolcanoTraits, KubeFamily):", "class SimVolcano(KubeFamily):"),
    ("fakes/ray/sim.py", "class SimRay(RayTraits, SimTarget):", "class SimRay(SimTarget):"),
    ("fakes/slurm/sim.py", "class SimSlurm(SlurmTraits, SimTarget):", "class SimSlurm(SimTarget):"),
    # counters hold ints and floats; `n: float` would turn every count into a float (818 -> 818.0)
    ("fakes/sim/base.py", "from dataclasses import dataclass, field\n",
     "from dataclasses import dataclass, field\n" + ANY),
    ("fakes/sim/base.py", "self.counters: dict[str, float] = {}", "self.counters: dict[str, Any] = {}"),
    ("fakes/sim/base.py", "def _count(self, key: str, n: float = 1)", "def _count(self, key: str, n: Any = 1)"),
    # a task's GPUs: whole GPUs (int) or a slice's compute share (float)
    ("fakes/volcano/sim.py", "import math\n", "import math\n" + ANY),
    ("fakes/volcano/sim.py", "def _g(self, js: JobState) -> float:", "def _g(self, js: JobState) -> Any:"),
    *[("fakes/volcano/sim.py", f"self.{name}: dict[str, int] = {{}}", f"self.{name}: dict[str, Any] = {{}}")
      for name in ("q_alloc", "q_inqueue", "q_elastic", "q_pending")],
    ("fakes/ray/sim.py", "from collections import Counter\n", "from collections import Counter\n" + ANY),
    ("fakes/ray/sim.py", "cpus: np.ndarray, g: int, c: int) -> np.ndarray:",
     "cpus: np.ndarray, g: Any, c: int) -> np.ndarray:"),
    ("fakes/ray/sim.py", "cpus: np.ndarray, g: int, c: int) -> int:", "cpus: np.ndarray, g: Any, c: int) -> int:"),
    # a compiled nested function has no __name__; `leaf` is an int above and a numpy integer here
    ("fakes/slurm/sim.py", '.get(work.__name__, "rpc")', '.get(getattr(work, "__name__", ""), "rpc")'),
    ("fakes/slurm/sim.py",
     "for leaf in order:\n                if need <= 0 or counts[leaf] == 0:\n                    break\n"
     "                take = free_nodes[leaves == leaf][:need]",
     "for each in order:\n                if need <= 0 or counts[each] == 0:\n                    break\n"
     "                take = free_nodes[leaves == each][:need]"),
]

SETUP = """from setuptools import setup
from mypyc.build import mypycify
setup(name="gangstorm-mypyc-trial", ext_modules=mypycify({args!r}, opt_level="3"))
"""


def copy_tree(tree: Path, out: Path) -> None:
    out.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(tree), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)


def apply_edits(out: Path) -> None:
    for rel, old, new in EDITS:
        path = out / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{rel}: expected one {old!r}, found {text.count(old)}: the tree moved on, update EDITS")
        path.write_text(text.replace(old, new))


def build(out: Path, python: str) -> None:
    (out / "setup_mypyc.py").write_text(SETUP.format(args=[*MYPY_FLAGS, *MODULES]))
    subprocess.run([python, "setup_mypyc.py", "build_ext", "--inplace"], cwd=out, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("out", type=Path, help="a new folder")
    ap.add_argument("--mypyc-python", required=True, help="python of a venv with mypy (mypyc) and numpy")
    args = ap.parse_args()
    if args.out.exists():
        ap.error(f"{args.out} exists: give a new folder")
    copy_tree(args.tree, args.out)
    apply_edits(args.out)
    build(args.out, args.mypyc_python)
    print(f"built {len(MODULES)} modules in {args.out}; run it with PYTHONPATH={args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
