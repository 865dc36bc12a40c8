"""The shared vocabulary of gangstorm: what a job is, what a backend reports, what a fleet looks
like and the interface every backend implements. Both sides import it (loadgen/ drives and
measures, fakes/ holds the backends); it imports neither. It also holds the few helpers both sides
need written once: numbers (how a number is printed), quantiles (the nearest-rank quantile) and
signals (a block SIGINT and SIGTERM wait for). gpushare is the GPU-sharing vocabulary (GPU models
with their MIG profiles, the share a member asks for, a pool's sharing mode, the per-GPU ledger)."""
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet, NodePool, stranded_gpus
from loadgen.model.gpushare import GpuLedger, GpuModel, GpuShare, Sharing, gpu_model, parse_share
from loadgen.model.job import Job
from loadgen.model.registry import REGISTRY, SCHEDULERS, register, target_class
from loadgen.model.target import CHAOS_KINDS, ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

__all__ = ["CHAOS_KINDS", "ChaosAction", "ChaosUnsupported", "Event", "Fleet", "GpuLedger", "GpuModel", "GpuShare",
           "Job", "Kind", "NodePool", "REGISTRY", "SCHEDULERS", "Sharing", "Snapshot", "Target", "TargetContext",
           "gpu_model", "parse_share", "register", "stranded_gpus", "target_class"]
