"""The shared vocabulary of gangstorm: what a job is, what a backend reports, what a fleet looks
like and the interface every backend implements. Both sides import it (loadgen/ drives and
measures, fakes/ holds the backends); it imports neither. It also holds the few helpers both sides
need written once: numbers (how a number is printed), quantiles (the nearest-rank quantile) and
signals (a block SIGINT and SIGTERM wait for)."""
from loadgen.model.events import Event, Kind
from loadgen.model.fleet import Fleet, stranded_gpus
from loadgen.model.job import Job
from loadgen.model.registry import REGISTRY, SCHEDULERS, register, target_class
from loadgen.model.target import CHAOS_KINDS, ChaosAction, ChaosUnsupported, Snapshot, Target, TargetContext

__all__ = ["CHAOS_KINDS", "ChaosAction", "ChaosUnsupported", "Event", "Fleet", "Job", "Kind", "REGISTRY",
           "SCHEDULERS", "Snapshot", "Target", "TargetContext", "register", "stranded_gpus", "target_class"]
