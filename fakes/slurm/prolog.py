"""The script a launched Slurm runs on every allocated node (Prolog=, PrologFlags=Alloc), and the
job command that goes with it. Both talk to the run's ready service (fakes/slurm/ready.py).

As the prolog (no arguments) it asks the service how long this node needs before the job's
container runs (image pull and container start, from the run's image model), sleeps that long and
reports done. slurmd starts it with an environment of its own: SLURM_JOB_ID, SLURMD_NODENAME (the
fake node under multiple-slurmd), SLURM_NODELIST (the whole allocation) and
SLURM_JOB_RESTART_COUNT (which attempt of a requeued job this is). It always exits 0: a failing
prolog makes Slurm drain the node and requeue the job, which would turn a hiccup of the load
generator into a scheduler event.

As the job command (`hold <seconds>`) it sleeps what is left of the job's duration counted from
its allocation, so a gang holds its GPUs for its duration from admission, image pull included, as
in the simulators.

Plain /usr/bin/python3 with the standard library, isolated (-IS): one process per node, no curl.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

NAME = "gangstorm-ready"

SCRIPT = r'''#!{python} -IS
# Written by gangstorm (fakes/slurm/prolog.py) for one run; talks to its ready service only.
import os, sys, time, urllib.parse, urllib.request

URL = "http://127.0.0.1:{port}"
OPEN = urllib.request.build_opener(urllib.request.ProxyHandler({{}})).open
env = os.environ.get


def ask(path, **q):
    err = None
    for attempt in range(5):
        try:
            with OPEN(URL + "/" + path + "?" + urllib.parse.urlencode(q), timeout=30) as r:
                return r.read().decode()
        except OSError as e:
            err = e
            time.sleep(0.2 * (attempt + 1))
    print("gangstorm-ready: " + path + ": " + str(err), file=sys.stderr)
    return None


if sys.argv[1:2] == ["hold"]:
    seconds = float(sys.argv[2])
    left = ask("left", job=env("SLURM_JOB_ID", ""), duration=seconds)
    time.sleep(max(0.0, float(left) if left is not None else seconds))
    sys.exit(0)

q = dict(job=env("SLURM_JOB_ID", ""), restart=env("SLURM_JOB_RESTART_COUNT", "0"),
         node=env("SLURMD_NODENAME", ""), nodes=env("SLURM_NODELIST", ""))
try:
    wait = ask("start", **q)
    if wait is not None:
        time.sleep(max(0.0, float(wait)))
        ask("done", **q)
finally:
    sys.exit(0)
'''


def python() -> str:
    """Debian's interpreter when present (it never changes under the run), else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else (shutil.which("python3") or sys.executable)


def script_path(run_dir: Path) -> Path:
    return Path(run_dir) / "etc" / NAME


def write_script(path: Path, port: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT.format(python=python(), port=int(port)))
    path.chmod(0o755)
    return path


def conf_lines(path: Path | str | None) -> list[str]:
    """slurm.conf lines (controller and every slurmd) that run `path` on each allocated node as
    soon as the job is allocated: with PrologFlags=Alloc it runs on every node of a gang, not only
    on the batch host when the batch step starts."""
    return [f"Prolog={path}", "PrologFlags=Alloc"] if path else []


def job_command(path: Path, duration_s: float) -> str:
    """The batch script (sbatch --wrap) of a job whose nodes run the prolog."""
    return f"exec {python()} -IS {path} hold {max(0.0, duration_s):.3f}"
