"""gangstorm cluster up|down|status BACKEND: a fake-fleet cluster that outlives the command.

The launchers the real backends use, as a standalone command (as `kwokctl create cluster` is):
`up` starts the cluster on 127.0.0.1, leaves it running and prints the flag that drives it as an
existing cluster (--kubeconfig, --slurm-conf, --ray-address); `down` stops every process it
started; `status` says what is still running. State lives in
$GANGSTORM_CLUSTERS_DIR (default ~/.cache/gangstorm/clusters)/<backend>-<name>/state.json.

A launcher module (loadgen.model.registry.launcher(name), i.e. fakes/<name>/launch.py) provides
  up(ctx: TargetContext, name: str) -> dict    start and detach; ctx.run_dir is the cluster's folder.
                                               The state it returns is JSON: "connect" maps each
                                               attach flag to its value; "pids" lists the process
                                               group leaders down() stops; anything else it needs.
  down(state) -> list[str]                     stop everything; what is still running afterwards
  status(state) -> dict                        {"up": bool, "components": {name: "running" | "exited"}, ...}
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from loadgen.cli.common import UsageError, positive_int
from loadgen.input.overrides import OVERRIDES
from loadgen.model.registry import SCHEDULERS, target_class

DEFAULT_SCENARIO = "scenarios/baseline-3x.yaml"


def clusters_dir() -> Path:
    return Path(os.environ.get("GANGSTORM_CLUSTERS_DIR") or Path.home() / ".cache/gangstorm/clusters")


def state_dir(backend: str, name: str) -> Path:
    return clusters_dir() / f"{backend}-{name}"


def add_parser(sub) -> None:
    p = sub.add_parser("cluster", help="start, stop or inspect a fake-fleet cluster that outlives the command",
                       description="up: start a cluster of fake 8-GPU nodes on 127.0.0.1 and leave it running; "
                                   "down: stop it; status: what is running. Drive it with the flag `up` prints.")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("backend", choices=SCHEDULERS)
    p.add_argument("--nodes", type=positive_int, help="up: fake nodes (default 8)")
    ray_nodes = OVERRIDES["ray_nodes"]
    p.add_argument("--ray-nodes", choices=ray_nodes.choices, default=None,
                   help="up ray: raylet (real raylets, up to 256) or fakelet (fake raylets on the real GCS, "
                        "up to 20,000; overrides schedulers.ray.nodes)")
    p.add_argument("--name", default="default", help="several clusters of one backend side by side (default: default)")
    p.add_argument("--scenario", default=None,
                   help=f"up: the fleet shape and scheduler settings (default {DEFAULT_SCENARIO})")
    p.add_argument("--json", action="store_true", help="print the state as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    if not args.name.replace("-", "").isalnum() or not args.name[0].isalnum() or len(args.name) > 30:
        raise UsageError(f"--name: expected letters, digits and '-', at most 30 characters, got {args.name!r}")
    if args.action != "up" and (args.nodes or args.scenario or args.ray_nodes):
        raise UsageError(f"--nodes/--scenario/--ray-nodes: only used with `cluster up`, got `cluster {args.action}`")
    if args.ray_nodes and args.backend != "ray":
        raise UsageError(f"--ray-nodes: only used with `cluster up ray`, got `cluster up {args.backend}`")
    return {"up": up, "down": down, "status": status}[args.action](args)


def read_state(backend: str, name: str) -> dict | None:
    path = state_dir(backend, name) / "state.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: expected the state `cluster up` wrote, got {type(e).__name__}; "
                         f"remove the folder once its processes are gone") from None


def up(args) -> int:
    from loadgen.input.overrides import load_with_overrides
    from loadgen.model.registry import launcher
    from loadgen.model.target import TargetContext
    launch = launcher(args.backend)
    folder = state_dir(args.backend, args.name)
    old = read_state(args.backend, args.name)
    if old is not None:
        if launch.status(old).get("up"):
            raise UsageError(f"cluster {args.backend}/{args.name} is already up (state in {folder}); "
                             f"`gangstorm cluster down {args.backend} --name {args.name}` first")
        launch.down(old)
        shutil.rmtree(folder, ignore_errors=True)
    scenario = load_with_overrides(args.scenario or DEFAULT_SCENARIO, nodes=args.nodes or 8, ray_nodes=args.ray_nodes)
    ctx = TargetContext(fleet=scenario.fleet(), config=scenario.scheduler_config(args.backend),
                        control_plane=scenario.section("control_plane"), seed=scenario.seed, run_dir=folder)
    folder.mkdir(parents=True, exist_ok=True)
    kind = target_class(args.backend, "real").fleet_kind(ctx.config)
    kind = f" ({kind})" if kind else ""
    print(f"gangstorm: starting {args.backend} cluster {args.name!r}{kind}: {ctx.fleet.nodes} fake nodes x "
          f"{ctx.fleet.gpus_per_node} GPUs on 127.0.0.1 (folder {folder})", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        state = launch.up(ctx, args.name)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    state.update(backend=args.backend, name=args.name, nodes=ctx.fleet.nodes, folder=str(folder),
                 up_s=round(time.monotonic() - t0, 1), scenario=scenario.path)
    (folder / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    if args.json:
        print(json.dumps(state, indent=2))
        return 0
    flags = " ".join(f"{k} {v}" for k, v in state["connect"].items())
    if state.get("node_selector"):      # the cluster's own fake nodes (without it, the run creates its own)
        flags += f" --node-selector {state['node_selector']}"
    print(f"{args.backend} cluster {args.name!r} up in {state['up_s']} s: {ctx.fleet.nodes} nodes")
    _print_connect(state)
    print(f"drive it:  gangstorm run SCENARIO --schedulers {args.backend} {flags} --nodes {ctx.fleet.nodes}")
    print(f"stop it:   gangstorm cluster down {args.backend}"
          + (f" --name {args.name}" if args.name != "default" else ""))
    return 0


def down(args) -> int:
    from loadgen.model.registry import launcher
    state = read_state(args.backend, args.name)
    if state is None:
        print(f"no {args.backend} cluster {args.name!r} (nothing in {state_dir(args.backend, args.name)})")
        return 0
    left = launcher(args.backend).down(state)
    if left:
        print(f"gangstorm: error: {args.backend} cluster {args.name!r}: still running after the stop: "
              f"{', '.join(left)}", file=sys.stderr)
        return 1
    shutil.rmtree(state_dir(args.backend, args.name), ignore_errors=True)
    print(f"{args.backend} cluster {args.name!r} down: no process left")
    return 0


def status(args) -> int:
    from loadgen.model.registry import launcher
    state = read_state(args.backend, args.name)
    if state is None:
        print(f"{args.backend} cluster {args.name!r}: not up")
        return 3
    st = launcher(args.backend).status(state)
    if args.json:
        print(json.dumps({**state, "status": st}, indent=2))
        return 0 if st.get("up") else 3
    word = "up" if st.get("up") else "DOWN"
    print(f"{args.backend} cluster {args.name!r}: {word}, {state['nodes']} nodes, started {state['up_s']} s to boot")
    _print_connect(state)
    for comp, s in sorted(st.get("components", {}).items()):
        print(f"  {comp}: {s}")
    for k, v in st.items():
        if k not in ("up", "components"):
            print(f"  {k}: {v}")
    return 0 if st.get("up") else 3


def _print_connect(state: dict) -> None:
    """The attach flags `up` recorded, one per line (kubeconfig: PATH, ...)."""
    for k, v in state["connect"].items():
        print(f"  {k.lstrip('-')}: {v}")
