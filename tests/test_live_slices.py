"""The live endpoints count a GPU slice at its compute share, as summary.json's gpu_sharing does:
per node for the fake DCGM exporter, and one partly active GPU series for the slice (exact numbers)."""
from fakes.dcgm.exporter import METRIC, Allocation, render
from loadgen.live.endpoint import gpus_per_node
from loadgen.measure.recorder import Recorder
from loadgen.model.fleet import NodePool
from loadgen.model.gpushare import Sharing
from loadgen.model.job import Job
from loadgen.model.startup.spec import ActivitySpec

POOLS = (NodePool("frac", 2, "v100m32", Sharing("fraction")),)


def job(i, members, gpus, share=""):
    return Job(id=i, tenant="t", queue="q", cls="c", members=members, gpus_per_member=gpus, duration_s=60.0,
               submit_s=0.0, min_available=members, share=share)


def test_a_milli_slice_counts_at_its_share_per_node():
    rec = Recorder([job(0, 3, 1, "milli:250"), job(1, 2, 2)], None, POOLS)
    assert gpus_per_node(rec, 0, [0, 0, 1]) == {0: 0.5, 1: 0.25}
    assert gpus_per_node(rec, 1, [0, 1]) == {0: 2.0, 1: 2.0}


def test_the_exporter_renders_a_slice_as_part_of_one_gpu():
    text = render([Allocation(7, "gpu-00000", 1.25, 0.0, "v100")], ActivitySpec(), 1e6)
    rows = [line.split() for line in text.splitlines() if line.startswith(METRIC)]
    assert [r[0] for r in rows] == [f'{METRIC}{{gpu="0",Hostname="gpu-00000",modelName="v100",gangstorm_job="7"}}',
                                    f'{METRIC}{{gpu="1",Hostname="gpu-00000",modelName="v100",gangstorm_job="7"}}']
    full = float(rows[0][1])
    assert float(rows[1][1]) == round(full * 0.25, 6)
