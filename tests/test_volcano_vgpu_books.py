"""The simulated Volcano's vGPU books (fakes/volcano/sim.py `vgpu_books`): "fixed" books what is
held; "v1.14.1" also keeps a share booked until the next device-plugin report, as real Volcano
v1.14.1 does (docs/gpu-sharing.md, "## Volcano": the same twelve jobs on real Volcano are admitted
in pairs at the reports, tools/volcano/vgpu_books.py)."""
import pytest

from loadgen.model.events import Kind
from loadgen.model.job import Job
from support.simkit import sim

ONE_GPU = {"fleet.cpus_per_node": 32, "fleet.pools": {"frac": {"fraction": 1.0, "gpu_model": "h100-80gb",
                                                                "sharing": "fraction", "gpus_per_node": 1}}}


def halves(n: int = 12, dur: float = 2.0) -> list[Job]:
    """n jobs of half a GPU, all at t = 0: two fit the GPU at once."""
    return [Job(id=i, tenant="t", queue="q-t", cls="small", members=1, gpus_per_member=1, duration_s=dur,
                submit_s=0.0, min_available=1, cpus_per_member=1, share="milli:500") for i in range(1, n + 1)]


def admitted(books: str, report_s: float = 30.0) -> tuple[list[float], object]:
    target, rec, events = sim("volcano", halves(), nodes=1, end=600.0, leaf_size=1,
                              overrides={**ONE_GPU, "schedulers.volcano.vgpu_books": books,
                                         "schedulers.volcano.vgpu_report_s": report_s})
    return sorted(e.t for e in events if e.kind == Kind.ADMITTED), target


def bursts(times: list[float]) -> list[float]:
    return [t for i, t in enumerate(times) if i == 0 or t - times[i - 1] > 1.0]


def test_fixed_books_admit_a_pair_as_soon_as_the_last_pair_ends():
    times, target = admitted("fixed")
    assert len(times) == 12
    assert times[-1] < 40.0, times             # six pairs of 2 s jobs, one after the other
    assert not target.state.slices.any_stale


@pytest.mark.parametrize("report_s", [30.0, 10.0])
def test_v1_14_1_books_admit_a_pair_per_device_plugin_report(report_s):
    times, target = admitted("v1.14.1", report_s)
    assert len(times) == 12
    starts = bursts(times)
    assert len(starts) == 6 and starts[0] < report_s, times   # a pair at once, then a pair per report
    assert all(0.0 <= t - i * report_s < 1.5 for i, t in enumerate(starts) if i), starts
    # what is measured is what is held: the stale bookings never count as allocation
    assert target.state.slices.allocated_compute == 0.0
