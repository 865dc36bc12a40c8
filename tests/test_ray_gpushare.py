"""Fractional GPUs on Ray, the pure parts: the fakelet book's per-GPU slice accounting with exact
numbers (fakes/ray/fakelets/book.py: the raylet's FixedPoint and unit-instance rules), the bundles a
job with a share asks for, and the sharing modes Ray refuses in one line.

tests/test_ray_gpushare_real.py checks the same rules against real raylets."""
from __future__ import annotations

import pytest

from fakes.ray.fakelets.book import Book, take
from fakes.ray.fleet import node_specs
from fakes.ray.share import bundle_labels, bundle_unit, check_fleet, slice_figures
from loadgen.model.errors import UserError
from loadgen.model.fleet import Fleet, NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.job import Job

PG = bytes(range(18))


def job(**kw) -> Job:
    return Job(id=1, tenant="t", queue="q", cls="c", duration_s=1.0, submit_s=0.0, min_available=kw["members"], **kw)


def gpu_of(book: Book, index: int) -> dict[int, float]:
    """Which GPU instance (and how much of it) bundle `index` of PG holds."""
    return next(s["instances"] for s in book.slices() if s["bundle"] == index and s["resource"] == "GPU")


def held(book: Book, *amounts: float) -> list[bool]:
    """Prepare and commit one single-bundle request per amount (bundles 0, 1, ...); which were taken."""
    out = []
    for amount in amounts:
        i = 1 + max((k[1] for k in [*book.prepared, *book.committed]), default=-1)
        ok = book.prepare([((PG, i), {"GPU": amount})])
        if ok:
            book.commit([(PG, i)])
        out.append(ok)
    return out


def test_a_fraction_lands_on_the_best_fitting_gpu_not_the_first():
    b = Book({"GPU": 2.0})
    assert held(b, 0.5, 0.75, 0.25, 0.5) == [True, True, True, True]
    # 0.25 fills GPU 1 exactly (best fit) rather than GPU 0 (first fit), so the last 0.5 still fits GPU 0
    assert [gpu_of(b, i) for i in range(4)] == [{0: 0.5}, {1: 0.75}, {1: 0.25}, {0: 0.5}]
    assert b.available["GPU"] == 0.0 and b.free["GPU"] == [0, 0]


def test_a_slice_never_spans_gpus_so_free_sum_is_not_enough():
    b = Book({"GPU": 2.0})
    assert held(b, 0.6, 0.6) == [True, True]
    assert b.available["GPU"] == 0.8
    assert held(b, 0.5) == [False]                   # 0.4 free on each GPU: the 0.8 sum does not help
    assert b.available["GPU"] == 0.8 and b.bundles == 2
    assert held(b, 0.4) == [True] and gpu_of(b, 2) == {0: 0.4}    # a tie goes to the lower index
    b.remove([(PG, 0)])
    assert b.free["GPU"] == [6000, 4000]
    assert held(b, 0.5) == [True] and gpu_of(b, 3) == {0: 0.5}          # back on GPU 0, never split


def test_prepare_places_bundles_one_after_another_and_undoes_all_on_a_refusal():
    b = Book({"GPU": 2.0, "CPU": 8.0})
    assert not b.prepare([((PG, 0), {"GPU": 0.6, "CPU": 1.0}), ((PG, 1), {"GPU": 0.6}), ((PG, 2), {"GPU": 0.6})])
    assert b.free == {"GPU": [10000, 10000], "CPU": [80000]} and b.bundles == 0
    assert b.available == {"GPU": 2.0, "CPU": 8.0}
    assert b.prepare([((PG, 0), {"GPU": 0.6}), ((PG, 1), {"GPU": 0.3}), ((PG, 2), {"GPU": 0.3})])
    # the first 0.3 best-fits GPU 0 (0.4 left there, 1.0 on GPU 1); the second no longer fits GPU 0
    assert [gpu_of(b, i) for i in range(3)] == [{0: 0.6}, {0: 0.3}, {1: 0.3}]


def test_amounts_are_truncated_to_a_ten_thousandth_like_fixedpoint():
    b = Book({"GPU": 1.0})
    assert held(b, 0.57) == [True]
    assert b.free["GPU"] == [4301]                   # 0.57 * 10000 == 5699.999999999999, truncated
    assert b.available["GPU"] == 0.4301
    h = PG.hex()
    assert b.total[f"GPU_group_0_{h}"] == 0.5699 and b.total[f"GPU_group_{h}"] == 0.5699
    assert held(b, 0.2, 0.23) == [True, True]
    assert b.free["GPU"] == [1]
    assert held(b, 0.0001, 0.0001) == [True, False]


def test_whole_gpus_come_before_the_fraction_above_one():
    assert take([10000, 5000, 10000, 10000], 15000) == [10000, 5000, 0, 0]   # 0.5 fits GPU 1 exactly
    assert take([10000, 10000, 10000], 15000) == [10000, 5000, 0]
    assert take([5000, 5000], 15000) is None                                  # no whole GPU free
    free = [10000, 10000]
    assert take(free, 20000) == [10000, 10000] and free == [0, 0]
    free = [3000]
    assert take(free, 2500) == [2500] and free == [500]                       # one instance: as it is


def test_whole_gpu_bundles_keep_their_figures():
    b = Book({"GPU": 8.0, "CPU": 96.0})
    assert b.prepare([((PG, 0), {"GPU": 3.0, "CPU": 36.0}), ((PG, 1), {"GPU": 2.0})])
    assert [gpu_of(b, 0), gpu_of(b, 1)] == [{0: 1.0, 1: 1.0, 2: 1.0}, {3: 1.0, 4: 1.0}]
    assert b.available["GPU"] == 3.0 and b.available["CPU"] == 60.0


# -- what a job asks Ray for ---------------------------------------------------------------------
def test_a_share_becomes_a_fractional_gpu_bundle():
    assert bundle_unit(job(members=2, gpus_per_member=1, share="milli:250")) == {"GPU": 0.25}
    assert bundle_unit(job(members=1, gpus_per_member=4)) == {"GPU": 4.0}
    assert bundle_unit(job(members=1, gpus_per_member=1, cpus_per_member=2, share="milli:125")) == \
        {"GPU": 0.125, "CPU": 2.0}


def test_mig_and_shards_pools_are_refused_in_one_line():
    fleet = Fleet(nodes=4, gpus_per_node=8, pools=(NodePool("mig", 4, "a100-80gb", Sharing("mig")),))
    with pytest.raises(UserError) as e:
        check_fleet(fleet)
    assert "\n" not in str(e.value) and "mig" in str(e.value) and "fraction" in str(e.value)
    with pytest.raises(UserError):
        bundle_unit(job(members=1, gpus_per_member=1, share="shards:2"))
    check_fleet(Fleet(nodes=4, gpus_per_node=8, pools=(NodePool("f", 4, "t4", Sharing("fraction")),)))


def test_slices_keep_to_fraction_nodes_only_when_some_pool_is_whole():
    mixed = Fleet(nodes=4, gpus_per_node=8, pools=(NodePool("w", 2, "t4"), NodePool("f", 2, "t4", Sharing("fraction"))))
    frac = Fleet(nodes=4, gpus_per_node=8, pools=(NodePool("f", 4, "t4", Sharing("fraction")),))
    slice_job, whole_job = job(members=2, gpus_per_member=1, share="milli:500"), job(members=1, gpus_per_member=2)
    assert bundle_labels(slice_job, mixed) == {"gangstorm.io/gpu-sharing": "fraction"}
    assert mixed.node_labels(3)["gangstorm.io/gpu-sharing"] == "fraction"         # what the selector finds
    assert bundle_labels(slice_job, frac) is None and bundle_labels(whole_job, mixed) is None


def test_gpu_models_become_the_accelerator_type_or_a_label_selector_of_several():
    fleet = Fleet(nodes=4, gpus_per_node=2, pools=(NodePool("a", 2, "t4", Sharing("fraction")),
                                                   NodePool("b", 2, "v100m32", Sharing("fraction"))))
    assert [s["resources"] for s in node_specs(fleet)] == [
        {"gs_node_00000": 1, "accelerator_type:t4": 1}, {"gs_node_00001": 1, "accelerator_type:t4": 1},
        {"gs_node_00002": 1, "accelerator_type:v100m32": 1}, {"gs_node_00003": 1, "accelerator_type:v100m32": 1}]
    one = job(members=2, gpus_per_member=1, share="milli:500", gpu_spec="t4")
    assert bundle_unit(one, fleet) == {"GPU": 0.5, "accelerator_type:t4": 0.001}     # Ray's accelerator_type option
    assert bundle_labels(one, fleet) is None
    several = job(members=1, gpus_per_member=2, gpu_spec="v100m32|t4")
    assert bundle_unit(several, fleet) == {"GPU": 2.0}
    assert bundle_labels(several, fleet) == {"nvidia.com/gpu.product": "in(v100m32,t4)"}
    # beside whole-GPU pools a slice also keeps to fraction nodes; without pools gpu_spec is ignored (as the twin)
    mixed = Fleet(nodes=4, gpus_per_node=2,
                  pools=(NodePool("w", 2, "t4"), NodePool("f", 2, "v100m32", Sharing("fraction"))))
    assert bundle_labels(job(members=1, gpus_per_member=1, share="milli:250", gpu_spec="t4|v100m32"), mixed) == \
        {"gangstorm.io/gpu-sharing": "fraction", "nvidia.com/gpu.product": "in(t4,v100m32)"}
    plain = Fleet(nodes=4, gpus_per_node=2)
    assert bundle_unit(one, plain) == {"GPU": 0.5} and bundle_labels(several, plain) is None
    assert node_specs(plain)[0]["resources"] == {"gs_node_00000": 1}


def test_slice_figures_from_the_fakelets_books():
    b = Book({"GPU": 2.0})
    held(b, 0.5, 0.75, 0.25)
    b.prepare([((PG, 9), {"GPU": 0.5})])                 # prepared only: not held yet
    slices = [{"node": 7, **s} for s in b.slices()]
    assert slice_figures(slices) == {"slice_gpus_held": 1.5, "gpus_held": 2, "gpus_shared": 1, "gpu_fill_max": 1.0}
    assert slice_figures([]) == {"slice_gpus_held": 0.0, "gpus_held": 0, "gpus_shared": 0, "gpu_fill_max": 0.0}
