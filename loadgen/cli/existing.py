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
from loadgen.model.errors import BackendError, UserError
from loadgen.model.target import Existing

# scheduler -> the flag that attaches it
ATTACH_FLAG = {"kube": "--kubeconfig", "volcano": "--kubeconfig", "slurm": "--slurm-conf", "ray": "--ray-address",
               "kueue": "--kubeconfig"}
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
    g.add_argument("--partition",
                   help="slurm: the partition whose nodes jobs and chaos use (default: the default partition)")
    g.add_argument("--ray-address", dest="ray_address",
                   help="ray: the GCS address (127.0.0.1:PORT) of a running Ray cluster")
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
    slurm_flag = "--slurm-conf"
    if not given["--slurm-conf"] and os.environ.get("SLURM_CONF") and args.backend == "real" and "slurm" in named:
        given["--slurm-conf"] = os.environ["SLURM_CONF"]      # as sbatch itself would read it
        slurm_flag = "$SLURM_CONF"                            # what an error about it must name
    if not any(given.values()):
        for dest, flag in (("context", "--context"), ("node_selector", "--node-selector"),
                           ("etcd_endpoint", "--etcd-endpoint"), ("partition", "--partition")):
            if getattr(args, dest, None):
                raise UsageError(f"{flag}: only used with an existing cluster (--kubeconfig, --slurm-conf or "
                                 "--ray-address)")
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
    if args.etcd_endpoint is not None:
        _check_endpoints("--etcd-endpoint", args.etcd_endpoint, remote)
    if given["--slurm-conf"]:
        _check_slurm_conf(slurm_flag, given["--slurm-conf"], remote)
    if given["--ray-address"]:
        _check_hostport("--ray-address", given["--ray-address"], remote)
    return Existing(kubeconfig=_abs(given["--kubeconfig"]), context=args.context, node_selector=args.node_selector,
                    etcd_endpoint=args.etcd_endpoint, slurm_conf=_abs(given["--slurm-conf"]),
                    partition=args.partition, ray_address=given["--ray-address"],
                    allow_foreign=bool(getattr(args, "allow_foreign", False)))


def attached_schedulers(text: str | None, existing: Existing) -> list[str] | None:
    """The schedulers an attach run drives: those named (each must have its flag), or by default
    the ones the given flags reach (kube for a kubeconfig; volcano and kueue only when named)."""
    have = {"kube": existing.kubeconfig, "volcano": existing.kubeconfig, "slurm": existing.slurm_conf,
            "ray": existing.ray_address, "kueue": existing.kubeconfig}
    if text is None:
        return [n for n in ("kube", "slurm", "ray") if have[n]]
    names = [s.strip() for s in text.split(",") if s.strip()]
    for n in names:
        if n in have and not have[n]:
            raise UsageError(f"--schedulers: {n} needs {ATTACH_FLAG[n]} when the run attaches to existing clusters")
    return None          # parse_schedulers checks the list itself


def _abs(path: str | None) -> str | None:
    return str(Path(path).expanduser().resolve()) if path else None


MAX_CONFIG_BYTES = 4 * 1024 * 1024      # a kubeconfig or slurm.conf is a few KiB


def _read_config(flag: str, path: str, what: str) -> str:
    """A kubeconfig or slurm.conf read as any input is (loadgen/input/files.py): a regular, readable
    file of at most MAX_CONFIG_BYTES; a device, a FIFO or a directory is one line naming the flag."""
    from loadgen.input import files
    p = Path(path).expanduser()
    try:
        data = files.read_bytes(p, MAX_CONFIG_BYTES, what)
    except files.FileError as e:
        expected = e.expected
        if expected == "no such file":
            expected = "expected a readable file, no such file"
        elif expected.startswith(f"expected a {what}, got "):      # a directory, a FIFO, a device
            expected = "expected a readable file, it is " + expected.removeprefix(f"expected a {what}, got ")
        raise UsageError(f"{flag} {path}: {expected}") from None
    return data.decode("utf-8", errors="replace")


def _check_kubeconfig(path: str, context: str | None, remote: bool) -> None:
    text = _read_config("--kubeconfig", path, "kubeconfig")
    try:
        doc = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise UsageError(f"--kubeconfig {path}: expected a kubeconfig YAML, "
                         f"got a parse error ({type(e).__name__})") from None
    if (not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list)
            or not isinstance(doc.get("contexts"), list)):
        raise UsageError(f"--kubeconfig {path}: expected a kubeconfig with clusters and contexts lists")
    name = context if context is not None else doc.get("current-context")
    contexts = _named(doc["contexts"], "context", path, "contexts")
    if not isinstance(name, str) or name not in contexts:
        flag = "--context" if context is not None else f"--kubeconfig {path}: current-context"
        raise UsageError(f"{flag}: expected one of {', '.join(map(str, contexts)) or 'no contexts'}, got {name!r}")
    clusters = _named(doc["clusters"], "cluster", path, "clusters")
    cluster = contexts[name].get("cluster")
    if not isinstance(cluster, str):
        raise UsageError(f"--kubeconfig {path}: context {name!r}: cluster: expected a cluster's name, got {cluster!r}")
    server = (clusters.get(cluster) or {}).get("server")
    if not server:
        raise UsageError(f"--kubeconfig {path}: context {name!r} names no cluster with a server")
    if not isinstance(server, str):
        raise UsageError(f"--kubeconfig {path}: cluster {cluster!r}: server: expected an http(s)://HOST:PORT URL, "
                         f"got {type(server).__name__} {server!r}")
    _check_url(f"--kubeconfig {path}: server", server, remote)


def _named(items: list, key: str, path: str, where: str) -> dict[str, dict]:
    """A kubeconfig list ({name, <key>: {...}} entries) by name; a malformed entry is one line."""
    out = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise UsageError(f"--kubeconfig {path}: {where}[{i}]: expected a mapping with a name, got {item!r}"[:300])
        body = item.get(key) or {}
        if not isinstance(body, dict):
            raise UsageError(f"--kubeconfig {path}: {where}[{i}].{key}: expected a mapping, got "
                             f"{type(body).__name__}")
        out[item["name"]] = body
    return out


def _check_endpoints(flag: str, text: str, remote: bool) -> None:
    """Every endpoint of a comma-separated list (etcdctl's --endpoints form) is checked, not the first."""
    urls = [u.strip() for u in text.split(",")]
    if not any(urls) or not all(urls):
        raise UsageError(f"{flag}: expected http(s)://HOST:PORT URLs separated by commas, got {text!r}")
    for url in urls:
        _check_url(flag, url, remote)


def _check_url(flag: str, url: str, remote: bool) -> None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host = None
    if not host or parts.scheme not in ("http", "https"):
        raise UsageError(f"{flag}: expected an http(s)://HOST:PORT URL, got {url!r}")
    _check_host(flag, host, remote)


def _check_hostport(flag: str, text: str, remote: bool) -> None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise UsageError(f"{flag}: expected HOST:PORT (e.g. 127.0.0.1:6379), got {text!r}")
    _check_host(flag, host, remote)


def _check_host(flag: str, host: str, remote: bool) -> None:
    if not remote and not _loopback(host):
        raise UsageError(f"{flag}: expected an address on 127.0.0.0/8, got {host!r} "
                         "(pass --allow-remote to load a cluster on another machine)")


# Every slurm.conf key that says where a client finds the controller (slurm.conf(5)): the host
# keys take HOST or HOST(ADDR) (then ADDR is what a client connects to), the address keys an address.
SLURM_HOST_KEYS = ("slurmctldhost", "controlmachine", "backupcontroller")
SLURM_ADDR_KEYS = ("slurmctldaddr", "controladdr", "backupaddr")
SLURM_KEY_NAMES = {k.lower(): k for k in ("SlurmctldHost", "ControlMachine", "BackupController", "SlurmctldAddr",
                                          "ControlAddr", "BackupAddr")}
MAX_INCLUDES = 32              # Include files read at most, nested or not
_SLURM_PAIR = re.compile(r"([A-Za-z]+)\s*=\s*(\S+)")


def _check_slurm_conf(flag: str, path: str, remote: bool) -> None:
    """Every controller address sbatch and squeue may connect to must be on loopback (unless
    --allow-remote): each SlurmctldHost (its (ADDR) form when given), SlurmctldAddr, the older
    ControlMachine/ControlAddr/BackupController/BackupAddr, in the file and in every file it
    Includes (recursively, at most MAX_INCLUDES files)."""
    found = _slurm_addresses(flag, Path(path).expanduser(), path, [0], 0)
    keys = {key for key, _, _ in found}
    if not keys & set(SLURM_HOST_KEYS):
        raise UsageError(f"{flag} {path}: expected a slurm.conf with SlurmctldHost, found none")
    # a host key's own address is what a client connects to unless its address key replaces it
    replaced = {host for host, addr in zip(SLURM_HOST_KEYS, SLURM_ADDR_KEYS) if addr in keys}
    for key, value, where in found:
        if key in replaced:
            continue
        addr = value
        if key in SLURM_HOST_KEYS and "(" in value:
            addr = value.split("(", 1)[1].rstrip(")")
        if not remote and not _loopback(addr):
            raise UsageError(f"{flag} {where}: {SLURM_KEY_NAMES[key]}: expected an address on 127.0.0.0/8, got "
                             f"{value!r} (pass --allow-remote to load a cluster on another machine)")


def _slurm_addresses(flag: str, p: Path, shown: str, count: list[int], depth: int) -> list[tuple[str, str, str]]:
    """(key, value, file) of every controller address in a slurm.conf and its Include files."""
    text = _read_config(flag, str(p), "slurm.conf")
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, *rest = line.split(None, 1)
        if head.lower() == "include" and rest:
            target = Path(rest[0].strip())
            if not target.is_absolute():
                target = p.parent / target
            count[0] += 1
            if count[0] > MAX_INCLUDES or depth >= 8:
                raise UsageError(f"{flag} {shown}: expected at most {MAX_INCLUDES} Include files, nested at most 8 "
                                 "deep (an Include loop?)")
            out += _slurm_addresses(flag, target, str(target), count, depth + 1)
            continue
        for key, value in _SLURM_PAIR.findall(line):
            if key.lower() in SLURM_HOST_KEYS + SLURM_ADDR_KEYS:
                out.append((key.lower(), value, shown))
    return out


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
        except (KeyboardInterrupt, UserError):
            raise
        except Exception as e:         # noqa: BLE001 (an unreachable apiserver, a refused call: one line)
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            if type(e).__name__ == "ConfigException":       # the kubernetes client refused the kubeconfig
                raise UsageError(f"--kubeconfig {existing.kubeconfig}: {first}") from None
            raise BackendError(f"{name}: the read-only look at the cluster failed: "
                               f"{type(e).__name__}: {first}") from None
    return found
