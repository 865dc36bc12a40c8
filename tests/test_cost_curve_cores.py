"""The cost curves' CPU split (fakes/kube/evidence.py cores_between, read by the kube and Volcano
cost curves): the cores each process used between two readings, so a run shows what shared the
machine with the scheduler it measures."""
from fakes.kube.evidence import cores_between


def test_cores_are_cpu_seconds_over_the_wall_time_between_readings():
    before = (100.0, {"kube-apiserver": 10.0, "vc-scheduler": 2.0, "generator": 1.0})
    after = (104.0, {"kube-apiserver": 13.0, "vc-scheduler": 4.5, "generator": 1.2, "kwok-controller": 9.0})
    assert cores_between(before, after) == {"kube-apiserver": 0.75, "vc-scheduler": 0.625, "generator": 0.05}
