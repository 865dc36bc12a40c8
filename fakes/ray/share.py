"""GPU sharing on Ray: what a job with a share asks for, and which pools Ray can serve.

Ray shares a GPU by fraction only. A raylet declares its GPUs as one resource, "GPU", counted in
whole devices (`--num-gpus`; GPU is a unit-instance resource: one instance of 1.0 per device), and a
task, actor or placement-group bundle asks for a fraction of one, {"GPU": 0.25}; the raylet puts a
fraction below 1 on a single GPU, the best-fitting one (fakes/ray/fakelets/book.py has the rules,
with sources). Nothing else needs advertising: the fleet's nodes carry their pool and sharing mode
as labels (gangstorm.io/pool, gangstorm.io/gpu-sharing). The GCS would schedule a fraction on any
GPU node, so on a fleet that also has whole-GPU pools a fractional gang's bundles carry a
bundle_label_selector {gangstorm.io/gpu-sharing: fraction} (Ray's label scheduling, the API a user
would use to keep fractions off dedicated nodes); a whole-GPU gang may use any pool, as the
contract says (loadgen/model/gpushare.py).

Which GPU models a job accepts (Job.gpu_spec) is Ray's accelerator type. On a fleet with node pools
every node declares the resource accelerator_type:<model> = 1, as a raylet on a detected GPU does
(ray/_private/resource_and_label_spec.py), here with the catalogue's name (v100m16, not Ray's
"V100", which would merge v100m16 and v100m32). A job that accepts one model asks for it in every
bundle as Ray's `accelerator_type=` option encodes it, {"accelerator_type:<model>": 0.001}
(ray/_common/utils.py). A resource cannot say "one of": a job that accepts several models carries
the label selector {nvidia.com/gpu.product: "in(a,b)"} (Ray's label scheduling, `in()` since
2.49; the node label is the fleet's, loadgen.model.fleet.Fleet.node_labels), a real any-of, as
the twin reads gpu_spec (fakes/sim/slices.SliceState.model_mask). On a fleet without pools
gpu_spec is ignored, as the twin does.

Ray has no MIG or shard resource of its own (a MIG instance would have to be declared as a custom
resource and asked for by name: not Ray's mechanism but a naming convention), so a mig or shards
pool, or a job asking for mig:/shards: slices, is refused in one line.
"""
from __future__ import annotations

from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet
from loadgen.model.gpushare import MILLI
from loadgen.model.job import Job

SUPPORTED_MODES = ("whole", "fraction")
SHARING_LABEL = "gangstorm.io/gpu-sharing"      # loadgen.model.fleet.Fleet.node_labels
MODEL_LABEL = "nvidia.com/gpu.product"          # the same, the node's GPU model
ACCELERATOR_PREFIX = "accelerator_type:"        # ray._common.utils.RESOURCE_CONSTRAINT_PREFIX
ACCELERATOR_DEMAND = 0.001                      # what Ray's accelerator_type option asks of it


def accelerator_resource(model: str) -> str:
    """The node resource a node of GPU model `model` declares (value 1)."""
    return f"{ACCELERATOR_PREFIX}{model}"


def check_fleet(fleet: Fleet) -> None:
    """UserError (one line) unless every pool shares its GPUs whole or by fraction."""
    for p in fleet.pools:
        if p.sharing.mode not in SUPPORTED_MODES:
            raise UserError(f"fleet.pools[{p.name}].sharing.mode: ray shares GPUs only by fraction (num_gpus < 1); "
                            f"expected one of {', '.join(SUPPORTED_MODES)}, got {p.sharing.mode!r}")


def gpu_amount(job: Job) -> float:
    """The GPU amount one member's bundle asks for: gpus_per_member, or the share's fraction."""
    share = job.gpu_share
    if share.is_whole:
        return float(job.gpus_per_member)
    if share.kind != "milli":
        raise UserError(f"job {job.id}: share {share.text!r}: ray shares GPUs only by fraction; "
                        "expected \"\" or \"milli:N\"")
    return share.amount / MILLI


def accepted_models(job: Job, fleet: Fleet) -> tuple[str, ...]:
    """The GPU models `job` is held to: its gpu_spec on a fleet with node pools, else none (any)."""
    return job.gpu_models if fleet.pools else ()


def bundle_labels(job: Job, fleet: Fleet) -> dict[str, str] | None:
    """The labels every bundle of `job` must find on its node: fraction-mode nodes for a slice when
    some pool shares nothing, and one of the accepted models when it accepts several; None when
    no label is asked for."""
    labels = {}
    if not job.gpu_share.is_whole and not all(p.sharing.mode == "fraction" for p in fleet.pools):
        labels[SHARING_LABEL] = "fraction"
    models = accepted_models(job, fleet)
    if len(models) > 1:
        labels[MODEL_LABEL] = f"in({','.join(models)})"
    return labels or None


def bundle_unit(job: Job, fleet: Fleet | None = None) -> dict[str, float]:
    """One member's bundle: {"GPU": amount} plus {"CPU": cpus_per_member} when it asks for CPUs,
    and the accelerator type when the job accepts exactly one model (on `fleet`, if given)."""
    b = {"GPU": gpu_amount(job)}
    if job.cpus_per_member:
        b["CPU"] = float(job.cpus_per_member)
    models = accepted_models(job, fleet) if fleet is not None else ()
    if len(models) == 1:
        b[accelerator_resource(models[0])] = ACCELERATOR_DEMAND
    return b


def slice_figures(slices: list[dict]) -> dict[str, float]:
    """Where the GCS's groups hold GPU on the fakelets, from their books (FakeletShards.gpu_slices):
    slice_gpus_held (the GPU amount of every committed bundle), gpus_held (GPUs with anything on
    them), gpus_shared (GPUs holding two or more bundles) and gpu_fill_max (the fullest GPU; never
    above 1.0 unless the accounting is wrong)."""
    per: dict[tuple[int, int], list[float]] = {}
    for s in slices:
        if s.get("state") != "committed" or s.get("resource") != "GPU":
            continue
        for gpu, amount in s["instances"].items():
            per.setdefault((int(s["node"]), int(gpu)), []).append(float(amount))
    return {"slice_gpus_held": round(sum(sum(v) for v in per.values()), 4), "gpus_held": len(per),
            "gpus_shared": sum(1 for v in per.values() if len(v) > 1),
            "gpu_fill_max": round(max((sum(v) for v in per.values()), default=0.0), 4)}
