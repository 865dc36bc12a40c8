"""What a fake Slurm node advertises as GRES for its pool's GPU sharing mode, how a job asks for a
slice, and which GPU a granted GRES index names.

Slurm 22.05 (Debian's slurm-wlm 22.05.8), sources src/plugins/gres/{gpu,shard,common} and
doc/html/gres.shtml ("Sharding", "MIG Management"):

* whole GPUs: `Gres=gpu:<model>:<n>`, gres.conf `Name=gpu Type=<model> File=/dev/tty[0-n-1]`.
* shards (pool mode "shards", K per GPU): gres/shard beside gres/gpu (GresTypes=gpu,shard). Each
  GPU's shards are one gres.conf line `Name=shard Count=K File=<that GPU's file>`, so a shard's
  index is its GPU's index; slurm.conf `Gres=gpu:<model>:<n>,shard:<n*K>`. A job asks
  `--gres=shard:K`; Slurm 22.05 takes one job's shards on a node from one GPU, and a GPU holding
  shards is not handed out whole (nor the reverse), except once another job's shards on that GPU
  were released (22.05's shared-GRES release, fakes/slurm/real/slices.py).
* fraction (milli shares): Slurm has no fractional GPU; a fraction pool is a shard pool of 1000
  shards per GPU and `milli:N` asks `--gres=shard:N` (exact, no rounding).
* MIG with a fixed layout: each MIG instance is a GPU GRES of its own typed by its profile, as
  Slurm's NVML autodetection names them (gres.shtml "MIG Management": `Name=gpu Type=1g.5gb`,
  requested `--gres=gpu:1g.5gb:1`). One gres.conf line per instance with a file of its own;
  slurm.conf `Gres=gpu:<profile>:<count>,...`. Dynamic MIG (instances made on demand) has no
  Slurm counterpart: slurmd reads the instances at start, so such a pool is refused.

Why device files at all (tried on 22.05.8): a shard line without File= makes slurmd exit
("SHARING configuration lacks "File" specification", "failed to merge SHARED and SHARING
configuration"), and a typed gpu line with Count= only (a model or a MIG profile) registers no
GPU at all (slurmctld sets the node INVAL: "gres/gpu count reported lower than configured
(0 < 2)"). With files Slurm
keeps a bitmap per device, which is what `scontrol -d show job` reports as IDX. The files are
/dev/tty0..63, which exist everywhere and are never opened (TaskPlugin=task/none, no cgroup
device constraint), as Slurm's own test suite does; they bound a node to 64 devices.

Placement read-back: `scontrol -d show job` prints per node `GRES=gpu:h100-80gb:1(IDX:0)`,
`GRES=shard:3(IDX:1)` (the index of the GPU the shards are on) or `GRES=gpu:3g.40gb:1(IDX:0)`;
`gres_slices` turns such a detail into (kind, type, index, amount) and `NodeGres.describe` names
the GPU (and MIG instance) an index is. slurmd orders a node's gpu records by type, in the order
the types first appear, then by file (`slurmd -G` prints them so), whatever the order of the
gres.conf lines; `devices` lists MIG instances in that order so that index k is /dev/tty<k>.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet
from loadgen.model.gpushare import MILLI, GpuModel, GpuShare, Sharing

MAX_DEVICES = 64                       # /dev/tty0..63
FEATURE_PREFIX = "gpushare-"           # node feature naming the pool's sharing mode


@dataclass(frozen=True)
class Device:
    """GRES index `index` of a node: GPU `gpu`; for MIG, the instance of `profile` at memory slice `start`."""
    index: int
    gpu: int
    profile: str = ""
    start: int = -1


@dataclass(frozen=True)
class NodeGres:
    """The GRES of one node of `gpus` GPUs named `type_name` (the fleet's model name), shared by
    `sharing`; `model` is the catalogue entry (None for a whole-GPU fleet without pools, whose
    model names need not be in the catalogue)."""
    model: GpuModel | None
    sharing: Sharing
    gpus: int
    type_name: str = ""

    @property
    def gpu_type(self) -> str:
        return self.type_name or self.model.name

    @property
    def shards_per_gpu(self) -> int:
        if self.sharing.mode == "fraction":
            return MILLI
        return self.sharing.shards_per_gpu if self.sharing.mode == "shards" else 0

    def devices(self) -> list[Device]:
        """The node's GPU GRES in index order: whole GPUs, or the MIG instances grouped by profile
        (in layout order), GPU by GPU within a profile: slurmd orders a node's gpu records by type
        that way whatever the file order, so the file of index k is /dev/tty<k>."""
        if self.sharing.mode != "mig":
            return [Device(g, g) for g in range(self.gpus)]
        per = self.sharing.instances(self.model)
        order = list(dict.fromkeys(p for p, _ in per))
        slots = [(g, p, s) for prof in order for g in range(self.gpus) for p, s in per if p == prof]
        return [Device(k, g, p, s) for k, (g, p, s) in enumerate(slots)]

    def check(self, where: str) -> None:
        if self.sharing.mode == "mig" and not self.sharing.layout:
            raise UserError(f"{where}: Slurm cannot share by dynamic MIG (slurmd reads MIG instances at start); "
                            "give the pool a mig_layout")
        if len(self.devices()) > MAX_DEVICES:
            raise UserError(f"{where}: {len(self.devices())} GPU devices per node; the fake Slurm node has at most "
                            f"{MAX_DEVICES}")

    def node_gres(self) -> str:
        """slurm.conf's Gres= value."""
        if self.sharing.mode == "mig":
            counts: dict[str, int] = {}
            for d in self.devices():
                counts[d.profile] = counts.get(d.profile, 0) + 1
            return ",".join(f"gpu:{p}:{n}" for p, n in counts.items())
        out = f"gpu:{self.gpu_type}:{self.gpus}"
        return out + (f",shard:{self.gpus * self.shards_per_gpu}" if self.shards_per_gpu else "")

    def conf_lines(self, nodes: str = "") -> list[str]:
        """gres.conf lines (prefixed NodeName=<nodes> when given)."""
        pre = f"NodeName={nodes} " if nodes else ""
        if self.sharing.mode == "mig":
            return [f"{pre}Name=gpu Type={d.profile} File=/dev/tty{d.index}" for d in self.devices()]
        lines = [f"{pre}Name=gpu Type={self.gpu_type} File=/dev/tty[0-{self.gpus - 1}]"]
        k = self.shards_per_gpu
        lines += [f"{pre}Name=shard Count={k} File=/dev/tty{g}" for g in range(self.gpus) if k]
        return lines

    def describe(self, index: int) -> Device | None:
        """The device GRES index `index` names (a shard's index is its GPU's)."""
        devs = self.devices()
        return devs[index] if 0 <= index < len(devs) else None


def node_gres(fleet: Fleet, i: int) -> NodeGres:
    name = fleet.model_names()[int(fleet.model_of[i])]
    return NodeGres(fleet.gpu_model_of(i) if fleet.pools else None, fleet.sharing_of(i), int(fleet.gpus_of[i]), name)


def check_fleet(fleet: Fleet) -> None:
    """UserError unless every pool can be advertised to Slurm."""
    for p in fleet.pools:
        NodeGres(p.model(), p.sharing, p.gpus_per_node or fleet.gpus_per_node).check(f"pool {p.name}")


def features(fleet: Fleet, i: int) -> list[str]:
    """Node features that let a job ask for its pool's sharing mode, alone and with the GPU model
    (gpushare-<mode>, gpushare-<mode>-<model>); none on a fleet that does not share."""
    if not fleet.shared:
        return []
    mode = FEATURE_PREFIX + fleet.sharing_of(i).mode
    return [mode, f"{mode}-{fleet.gpu_model_of(i).name}"]


def request(share: GpuShare, gpus: int, fleet: Fleet, models: tuple[str, ...] = ()) -> list[str]:
    """sbatch options for a member of `gpus` GPUs taking `share` (whole GPUs when share is whole),
    on one of the GPU `models` (empty: any).

    On a fleet that shares, the constraint names the pool modes that can hold the share: a whole
    GPU only whole, fraction and shard pools (a MIG instance is a gpu GRES too and would match an
    untyped gpu request), milli only fraction pools and shards only shard pools (both advertise
    gres/shard). With `models`, each mode is paired with each model (an OR of features, which
    every Slurm constraint parser takes).
    """
    if share.kind == "whole":
        opts = [f"--gres=gpu:{gpus}"]
        modes = sorted({p.sharing.mode for p in fleet.pools} - {"mig"})
    elif share.kind == "milli":
        opts, modes = [f"--gres=shard:{share.amount}"], ["fraction"]
    elif share.kind == "shards":
        opts, modes = [f"--gres=shard:{share.amount}"], ["shards"]
    else:
        opts, modes = [f"--gres=gpu:{share.profile}:1"], ["mig"]
    if not fleet.pools:        # GPU models are honoured on pooled fleets only, as in the twins
        return opts
    if not fleet.shared:
        return opts + (["--constraint=" + "|".join(models)] if models else [])
    feats = [FEATURE_PREFIX + m + (f"-{x}" if x else "") for m in modes for x in (models or ("",))]
    return opts + ["--constraint=" + "|".join(feats)]


# --- reading back what a job got ---------------------------------------------------------------------
_NODE_LINE = re.compile(r"Nodes=(\S+) .*?GRES=(\S*)")
_GRES_ITEM = re.compile(r"(gpu|shard)(?::([^:(,]+))?:(\d+)(?:\((\d+)/(\d+)\))?\(IDX:([^)]*)\)")


def gres_slices(gres: str) -> list[tuple[str, str, int, int]]:
    """(kind, type, index, amount) per device in one node's GRES= detail of `scontrol -d show job`:
    gpu items give amount 1 per index, shard items the shards taken (all from their one index)."""
    out = []
    for kind, typ, count, _used, _total, idx in _GRES_ITEM.findall(gres):
        indices = _indices(idx)
        if kind == "shard":
            out += [(kind, typ or "", i, int(count) // max(1, len(indices))) for i in indices]
        else:
            out += [(kind, typ or "", i, 1) for i in indices]
    return out


def _indices(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        if a.isdigit():
            out += list(range(int(a), int(b or a) + 1))
    return out


def job_details(text: str) -> dict[int, list[tuple[str, str, str, int, int]]]:
    """`scontrol -d show job` output as job id -> [(node list, kind, type, index, amount)]."""
    out: dict[int, list] = {}
    for block in text.split("\n\n"):
        m = re.search(r"JobId=(\d+)", block)
        if not m:
            continue
        rows = out.setdefault(int(m.group(1)), [])
        for nodes, gres in _NODE_LINE.findall(block):
            rows += [(nodes, *s) for s in gres_slices(gres)]
    return out
