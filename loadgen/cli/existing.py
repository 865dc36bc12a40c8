"""Flags that point a real backend at a cluster gangstorm did not start, checked to one line each.

--kubeconfig/--context (kube, volcano), --slurm-conf (slurm), --ray-address (ray), plus how far
the run may go there: --node-selector, --partition, --etcd-endpoint, --allow-foreign-workloads.
Every address must be on 127.0.0.0/8 unless --allow-remote is given: a load generator pointed at
the wrong kubeconfig must not load somebody's production control plane by accident.
"""
from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from loadgen.cli.common import UsageError
from loadgen.model.target import Existing

# scheduler -> the flag that attaches it
ATTACH_FLAG = {"kube": "--kubeconfig", "volcano": "--kubeconfig", "slurm": "--slurm-conf", "ray": "--ray-address"}
_LABELS = re.compile(r"^[A-Za-z0-9./_-]+(=[A-Za-z0-9._-]*)?(,[A-Za-z0-9./_-]+(=[A-Za-z0-9._-]*)?)*$")


def add_existing(parser) -> None:
    g = parser.add_argument_group("existing clusters (attach instead of launching; implies --backend real)")
    g.add_argument("--kubeconfig", help="kube, volcano: drive the cluster this kubeconfig reaches")
    g.add_argument("--context", help="kube, volcano: the kubeconfig context (default: its current-context)")
    g.add_argument("--node-selector", dest="node_selector",
                   help="kube, volcano: use existing fake nodes with these labels (k=v,...) instead of "
                        "creating run-labelled KWOK nodes")
    g.add_argument("--etcd-endpoint", dest="etcd_endpoint",
                   help="kube, volcano: etcd URL for quota recovery (default: pressure through the apiserver only)")
    g.add_argument("--slurm-conf", dest="slurm_conf", default=None,
                   help="slurm: drive the controller this slurm.conf names (default with --backend real "
                        "--schedulers ...slurm...: $SLURM_CONF when it is set)")
    g.add_argument("--partition", help="slurm: the partition whose nodes jobs and chaos use (default: the default partition)")
    g.add_argument("--ray-address", dest="ray_address", help="ray: the GCS address (127.0.0.1:PORT) of a running Ray cluster")
    g.add_argument("--allow-foreign-workloads", dest="allow_foreign", action="store_true",
                   help="run next to workloads gangstorm did not create (they are never touched)")
    g.add_argument("--allow-remote", dest="allow_remote", action="store_true",
                   help="allow a cluster address outside 127.0.0.0/8")
    g.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="check the cluster read-only and print what the run would create and disrupt")


def existing_from(args) -> Existing | None:
    """The Existing the flags describe (None: launch clusters as usual); also settles args.backend."""
    given = {f: getattr(args, d, None) for f, d in (("--kubeconfig", "kubeconfig"), ("--slurm-conf", "slurm_conf"),
                                                   ("--ray-address", "ray_address"))}
    named = {s.strip() for s in (getattr(args, "schedulers", None) or "").split(",")}
    if not given["--slurm-conf"] and os.environ.get("SLURM_CONF") and args.backend == "real" and "slurm" in named:
        given["--slurm-conf"] = os.environ["SLURM_CONF"]      # as sbatch itself would read it
    if not any(given.values()):
        for dest, flag in (("context", "--context"), ("node_selector", "--node-selector"),
                           ("etcd_endpoint", "--etcd-endpoint"), ("partition", "--partition")):
            if getattr(args, dest, None):
                raise UsageError(f"{flag}: only used with an existing cluster (--kubeconfig, --slurm-conf or --ray-address)")
        if getattr(args, "allow_foreign", False):
            raise UsageError("--allow-foreign-workloads: only used with an existing cluster "
                             "(--kubeconfig, --slurm-conf or --ray-address)")
        args.backend = args.backend or "sim"
        return None
    if args.backend not in (None, "real"):
        raise UsageError(f"--backend {args.backend}: an existing cluster is driven by the real backend "
                         "(drop --backend or pass --backend real)")
    args.backend = "real"
    remote = bool(getattr(args, "allow_remote", False))
    if given["--kubeconfig"]:
        _check_kubeconfig(given["--kubeconfig"], args.context, remote)
    if args.node_selector and not _LABELS.match(args.node_selector):
        raise UsageError(f"--node-selector: expected labels k=v[,k=v...], got {args.node_selector!r}")
    if args.etcd_endpoint:
        _check_url("--etcd-endpoint", args.etcd_endpoint, remote)
    if given["--slurm-conf"]:
        _check_file("--slurm-conf", given["--slurm-conf"])
        _check_slurm_conf(given["--slurm-conf"], remote)
    if given["--ray-address"]:
        _check_hostport("--ray-address", given["--ray-address"], remote)
    return Existing(kubeconfig=_abs(given["--kubeconfig"]), context=args.context, node_selector=args.node_selector,
                    etcd_endpoint=args.etcd_endpoint, slurm_conf=_abs(given["--slurm-conf"]),
                    partition=args.partition, ray_address=given["--ray-address"],
                    allow_foreign=bool(getattr(args, "allow_foreign", False)))


def attached_schedulers(text: str | None, existing: Existing) -> list[str] | None:
    """The schedulers an attach run drives: those named (each must have its flag), or by default
    the ones the given flags reach (kube for a kubeconfig; volcano only when named)."""
    have = {"kube": existing.kubeconfig, "volcano": existing.kubeconfig, "slurm": existing.slurm_conf,
            "ray": existing.ray_address}
    if text is None:
        return [n for n in ("kube", "slurm", "ray") if have[n]]
    names = [s.strip() for s in text.split(",") if s.strip()]
    for n in names:
        if n in have and not have[n]:
            raise UsageError(f"--schedulers: {n} needs {ATTACH_FLAG[n]} when the run attaches to existing clusters")
    return None          # parse_schedulers checks the list itself


def _abs(path: str | None) -> str | None:
    return str(Path(path).expanduser().resolve()) if path else None


def _check_file(flag: str, path: str) -> None:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UsageError(f"{flag} {path}: expected a readable file, " + ("it is a directory" if p.is_dir() else "no such file"))
    if not os.access(p, os.R_OK):
        raise UsageError(f"{flag} {path}: expected a readable file, it is not readable")


def _check_kubeconfig(path: str, context: str | None, remote: bool) -> None:
    _check_file("--kubeconfig", path)
    try:
        doc = yaml.safe_load(Path(path).expanduser().read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise UsageError(f"--kubeconfig {path}: expected a kubeconfig YAML, got a parse error ({type(e).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list) or not isinstance(doc.get("contexts"), list):
        raise UsageError(f"--kubeconfig {path}: expected a kubeconfig with clusters and contexts lists")
    name = context or doc.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in doc["contexts"] if isinstance(c, dict)}
    if name not in contexts:
        flag = "--context" if context else f"--kubeconfig {path}: current-context"
        raise UsageError(f"{flag}: expected one of {', '.join(map(str, contexts)) or 'no contexts'}, got {name!r}")
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc["clusters"] if isinstance(c, dict)}
    server = (clusters.get(contexts[name].get("cluster")) or {}).get("server")
    if not server:
        raise UsageError(f"--kubeconfig {path}: context {name!r} names no cluster with a server")
    _check_url(f"--kubeconfig {path}: server", server, remote)


def _check_url(flag: str, url: str, remote: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag}: expected an http(s)://HOST:PORT URL, got {url!r}")
    _check_host(flag, parts.hostname, remote)


def _check_hostport(flag: str, text: str, remote: bool) -> None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{flag}: expected HOST:PORT (e.g. 127.0.0.1:6379), got {text!r}")
    _check_host(flag, host, remote)


def _check_host(flag: str, host: str, remote: bool) -> None:
    if remote or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(f"{flag}: expected an address on 127.0.0.0/8, got {host!r} "
                         "(pass --allow-remote to load a cluster on another machine)")


def _check_slurm_conf(path: str, remote: bool) -> None:
    """SlurmctldHost must be on loopback (unless --allow-remote): the controller sbatch will load."""
    text = Path(path).expanduser().read_text(errors="replace")
    hosts = re.findall(r"^\s*(?:SlurmctldHost|ControlMachine)\s*=\s*([^\s#]+)", text, re.M | re.I)
    if not hosts:
        raise UsageError(f"--slurm-conf {path}: expected a slurm.conf with SlurmctldHost, found none")
    for h in hosts:
        addr = h.split("(", 1)[1].rstrip(")") if "(" in h else h
        if addr != "localhost" and not remote:
            try:
                ok = ipaddress.ip_address(addr).is_loopback
            except ValueError:
                ok = False
            if not ok:
                raise UsageError(f"--slurm-conf {path}: SlurmctldHost: expected an address on 127.0.0.0/8, got "
                                 f"{h!r} (pass --allow-remote to load a cluster on another machine)")


def preflight(scenario, names: list[str], backend: str, plan, existing: Existing | None,
              time_scale: float, run_id: str = "preflight") -> dict[str, list[str]]:
    """Each target's read-only look at its cluster (nothing is created). A cluster holding
    workloads gangstorm did not create, without --allow-foreign-workloads, is refused here: one
    line, exit status 2, before the run folder exists."""
    from loadgen.drive.comparative import RunOptions, target_context
    from loadgen.model.registry import target_class
    from loadgen.model.target import ClusterRefused
    opts = RunOptions(schedulers=names, backend=backend, existing=existing)
    found: dict[str, list[str]] = {}
    for name in names:
        cls = target_class(name, backend)
        target = cls(target_context(scenario, name, plan, opts, None, time_scale, run_id))
        try:
            found[name] = target.preflight()
        except ClusterRefused as e:
            raise UsageError(str(e)) from None
    return found
