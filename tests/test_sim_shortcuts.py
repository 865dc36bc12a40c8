"""Shortcuts taken for speed give exactly what the long way gave: the free-GPU histogram, the ready
time of a gang when no node pulls, the virtual runner's back-to-back wakeups, Kueue TAS's
node-level fill, observed events queued beside the timer heap, the remembered rendezvous jitter,
kube's score table and the image cache's set of cold nodes."""
import numpy as np
import pytest

from fakes.sim.state import ClusterState
from loadgen.drive.runner import VirtualClock, run
from loadgen.input.scenario import from_dict
from loadgen.model.fleet import Fleet
from loadgen.model.registry import target_class
from loadgen.model.startup.imagecache import ImageCache
from loadgen.model.startup.spec import ImageSpec
from loadgen.model.target import TargetContext
from support.recording import Recording
from support.simkit import job, scramble, small_kube


def test_count_ge_is_the_count_of_up_nodes_with_that_many_free_gpus():
    state = ClusterState(Fleet(nodes=12, gpus_per_node=8))
    rng = np.random.default_rng(7)
    for step in range(400):
        node = int(rng.integers(12))
        op = rng.integers(3)
        if op == 0 and state.free_gpus[node] > 0:
            state.take(step, node, int(rng.integers(1, state.free_gpus[node] + 1)), 0)
        elif op == 1 and state.holdings:
            state.give_back(sorted(state.holdings)[int(rng.integers(len(state.holdings)))])
        else:
            state.set_up(node, bool(rng.integers(2)))
        for g in range(10):
            assert state.count_ge(g) == int(((state.free_gpus >= g) & state.up).sum())


@pytest.mark.parametrize("nodes", [(), (3,), (5, 5, 2), (9, 0, 9, 1)])
def test_without_pulls_a_gang_is_ready_container_start_s_after_placement(nodes):
    spec = ImageSpec(container_start_s=2.5)
    cache = ImageCache(spec, 10, seed=1)
    by_node = cache.ready_at(1000.25, nodes)
    assert cache.gang_ready_at(1000.25, nodes) == max(by_node.values(), default=1000.25)
    assert cache.gang_ready_at(1000.25, iter(nodes)) == (1002.75 if nodes else 1000.25)


def test_tas_node_fill_is_the_sorted_greedy_fill_over_every_node_with_room():
    from fakes.kueue.tas import _fill, _fill_nodes, _sorted
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(1, 40))
        per_node = np.where(rng.random(n) < 0.3, 0, rng.integers(0, 5, n)).astype(np.int64)
        for count in (1, 2, 3, 7, int(per_node.sum()), int(per_node.sum()) + 1):
            long_way = _fill(_sorted({i: int(c) for i, c in enumerate(per_node) if c > 0}), count)
            assert _fill_nodes(per_node, count) == long_way, (per_node.tolist(), count)


class _SlowVirtualClock:
    """VirtualClock's behaviour without being one: the runner then takes every wakeup through its
    full loop, as it did before the back-to-back path."""
    records_sends = False
    start, now, wait, past, end = (VirtualClock.start, VirtualClock.now, VirtualClock.wait,
                                   staticmethod(VirtualClock.past), VirtualClock.end)


@pytest.mark.parametrize("name", ["kube", "volcano", "ray", "slurm"])
def test_back_to_back_wakeups_give_the_same_events(name):
    jobs = [job(i, members=1 + i % 3, gpus=8 if i % 2 else 2, t=7.0 * i, dur=40.0 + 13 * (i % 5)) for i in range(40)]
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 6, "fleet.leaf_size": 2})
    events = []
    for clock in (VirtualClock(), _SlowVirtualClock()):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config(name),
                            control_plane=sc.section("control_plane"), seed=1)
        target = target_class(name, "sim")(ctx)
        target.start()
        rec = Recording(jobs)
        run(target, jobs, [], 2_000.0, 10.0, rec, clock)
        events.append(rec.events)
    assert len(events[0]) > 100
    assert events[0] == events[1]


def test_tas_without_a_topology_request_is_the_greedy_fill_over_every_node_with_room():
    from fakes.kueue.tas import _fill, _sorted, place
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        per_node = np.where(rng.random(n) < 0.5, 0, rng.integers(0, 4, n)).astype(np.int64)
        leaf_of = np.arange(n) // 4
        spine_of = leaf_of // 2
        for count in {1, 2, 5, max(int(per_node.sum()), 1), int(per_node.sum()) + 1}:
            parts = _fill(_sorted({i: int(c) for i, c in enumerate(per_node) if c > 0}), count)
            fits = parts and count <= per_node.sum()
            long_way = sorted(node for node, k in parts for _ in range(k)) if fits else None
            assert place(per_node, leaf_of, spine_of, count, "none") == long_way, (per_node.tolist(), count)


class _AlwaysNonEmpty(dict):
    def __bool__(self):
        return True


def _kueue_always_walking():
    """SimKueue as it was before member_waiters: every release walks every job for members waiting
    for a node."""
    from fakes.kueue.sim import SimKueue

    class Walking(SimKueue):
        member_waiters = property(lambda self: _AlwaysNonEmpty(), lambda self, value: None)
    return Walking


@pytest.mark.parametrize("topology", ["preferred", "required"])
def test_kueue_release_without_member_waiters_gives_the_same_events(topology):
    from fakes.kueue.sim import SimKueue
    from loadgen.model.target import ChaosAction
    jobs = [job(i, members=1 + i % 4, gpus=8 if i % 3 else 4, t=5.0 * i, dur=60.0 + 17 * (i % 7),
                tenant="ab"[i % 2]) for i in range(60)]
    chaos = [ChaosAction(t=30.0 + 23 * k, kind="evict", params={"members": 2}) for k in range(8)]
    # every free GPU pinned for a minute, then nodes fail: their members wait for the pins to go
    chaos += [ChaosAction(t=95.0, kind="prefill", params={"placements": [[n, 8] for n in range(8)],
                                                          "duration_s": 60}),
              ChaosAction(t=100.0, kind="node_fail", params={"nodes": [0, 1, 5]}),
              ChaosAction(t=180.0, kind="node_recover", params={"nodes": [0, 1, 5]}),
              ChaosAction(t=200.0, kind="node_fail", params={"nodes": [2, 7]}),
              ChaosAction(t=260.0, kind="node_recover", params={"nodes": [2]})]
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 8, "fleet.leaf_size": 2,
                                         "schedulers.kueue.topology": topology})
    events, waited = [], []
    for cls in (SimKueue, _kueue_always_walking()):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("kueue"),
                            control_plane=sc.section("control_plane"), seed=1)
        target = cls(ctx)
        target.start()
        placements = []
        place_one = target._placement_one

        def counting(js, place_one=place_one, placements=placements):
            placements.append(place_one(js))
            return placements[-1]
        target._placement_one = counting
        rec = Recording(jobs)
        run(target, jobs, chaos, 2_000.0, 10.0, rec, VirtualClock())
        events.append(rec.events)
        waited.append(placements.count(None))
    assert len(events[0]) > 100
    assert waited[0] > 0            # members did wait for a node, and got one on a later release
    assert events[0] == events[1]


def _observing_through_the_heap(cls):
    """A simulated target as it was before the observation queue: every observed event is a timer
    of its own on the heap."""
    class Heap(cls):
        def _emit(self, t, job_id, kind, members=0, reason="", backend_t=None, nodes=()):
            if self.observe_s > 0:
                self._at(t + self.observe_s, self._observed, job_id, kind, members, reason, nodes)
            else:
                super()._emit(t, job_id, kind, members, reason, backend_t, nodes)
    return Heap


@pytest.mark.parametrize("name", ["kube", "kube-gang", "coscheduling", "kueue", "volcano", "ray", "slurm"])
def test_observations_queued_beside_the_heap_give_the_same_events(name):
    from loadgen.model.target import ChaosAction
    jobs = [job(i, members=1 + i % 3, gpus=8 if i % 2 else 2, t=7.0 * i, dur=40.0 + 13 * (i % 5)) for i in range(40)]
    chaos = [ChaosAction(t=50.0 + 31 * k, kind="evict", params={"members": 1}) for k in range(5)]
    chaos += [ChaosAction(t=120.0, kind="node_fail", params={"nodes": [1, 4]}),
              ChaosAction(t=170.0, kind="node_recover", params={"nodes": [1, 4]})]
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 6, "fleet.leaf_size": 2, f"schedulers.{name}.observe_ms": 250})
    events = []
    for heap in (False, True):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config(name),
                            control_plane=sc.section("control_plane"), seed=1)
        cls = target_class(name, "sim")
        target = (_observing_through_the_heap(cls) if heap else cls)(ctx)
        assert target.observe_s > 0
        target.start()
        rec = Recording(jobs)
        run(target, jobs, chaos, 2_000.0, 10.0, rec, VirtualClock())
        events.append(rec.events)
    assert len(events[0]) > 100
    assert events[0] == events[1]


def test_remembered_jitter_is_the_draw_of_a_fresh_generator():
    from loadgen.model.startup.rendezvous import Rendezvous, jitter
    from loadgen.model.startup.spec import RendezvousSpec
    fleet = Fleet(nodes=64, leaf_size=8)
    spec = RendezvousSpec(base_s=10, per_member_s=1, per_extra_leaf_s=5, misaligned_s=20, jitter_sigma=0.4,
                          timeout_s=40)
    one, other = Rendezvous(spec, fleet, seed=3), Rendezvous(spec, fleet, seed=3)
    rng = np.random.default_rng(2)
    for _ in range(300):
        job_id, attempt = int(rng.integers(0, 1 << 40)), int(rng.integers(1, 5))
        nodes = tuple(int(n) for n in rng.integers(0, 64, int(rng.integers(1, 6))))
        fresh = float(np.random.default_rng([3, job_id & 0xFFFFFFFF, attempt, 0x4E43]).lognormal(0.0, 0.4))
        assert jitter(3, job_id & 0xFFFFFFFF, attempt, 0.4) == fresh
        a = one.attempt(job_id, attempt, len(nodes), 4, nodes)
        assert a == other.attempt(job_id, attempt, len(nodes), 4, nodes)
        leaves = len({n // 8 for n in nodes})
        base = 10 + len(nodes) + 5 * (leaves - 1) + (20 if len(set(nodes)) > 1 else 0)
        assert a.seconds == base * fresh and a.leaves == leaves


@pytest.mark.parametrize("mode", ["least_allocated", "most_allocated", "balanced_allocation"])
@pytest.mark.parametrize("gpus_scored", [True, False])
def test_kube_score_table_is_the_score_computed_per_pod(mode, gpus_scored):
    from fakes.kube.sim import PodState, Scorer
    state = PodState(Fleet(nodes=300, gpus_per_node=8, cpus_per_node=96, memory_gib_per_node=1024))
    rng = np.random.default_rng(4)
    state.free_gpus[:] = rng.integers(0, 9, 300)
    state.free_cpus[:] = rng.integers(0, 97, 300)
    state.free_mem[:] = np.where(rng.random(300) < 0.5, rng.integers(0, 1025, 300), rng.integers(1010, 1025, 300))
    for gpus, cpus in ((1, 12), (2, 24), (8, 96), (0, 12), (4, 1)):
        scorer = Scorer(mode, 3, state, gpus, cpus, gpus_scored)
        assert scorer.table is not None
        nodes = rng.permutation(300)[:200]
        free = (state.free_gpus[nodes], state.free_cpus[nodes], state.free_mem[nodes])
        assert scorer(*free).tolist() == scorer.score(*free).tolist()


def test_image_cache_cold_set_is_the_nodes_not_warm():
    spec = ImageSpec(warm_fraction=0.3, image_gb=2.0, node_pull_gbps=8.0, registry_gbps=16.0,
                     container_start_s=1.5)
    cache = ImageCache(spec, 40, seed=6)
    rng = np.random.default_rng(6)
    t = 0.0
    for _ in range(200):
        t += float(rng.exponential(0.7))
        nodes = tuple(int(n) for n in rng.integers(0, 40, int(rng.integers(1, 6))))
        warm_before, landing_before = cache.warm.copy(), cache.landing.copy()
        by_node = cache.ready_at(t, nodes)
        for n, ready in by_node.items():      # what the numpy arrays say, the long way
            if warm_before[n] or landing_before[n] <= t:
                assert ready == t + 1.5
            else:
                assert ready == cache.landing[n] + 1.5 and not cache.warm[n]
        assert cache._cold == set(np.flatnonzero(~cache.warm).tolist())
    cache.ready_at(t + 1e3, range(40))            # the last cold nodes pull, then land
    cache.ready_at(t + 1e4, range(40))
    assert not cache._cold and cache.warm.all()
    assert cache.gang_ready_at(t + 1e4, (3, 3, 9)) == t + 1e4 + 1.5


def test_a_gang_on_warm_nodes_is_ready_container_start_s_after_placement():
    spec = ImageSpec(warm_fraction=0.5, image_gb=2.0, node_pull_gbps=8.0, registry_gbps=16.0, container_start_s=1.5)
    rng = np.random.default_rng(9)
    short, long_way = ImageCache(spec, 30, seed=2), ImageCache(spec, 30, seed=2)
    t = 0.0
    for _ in range(300):
        t += float(rng.exponential(0.5))
        nodes = tuple(int(n) for n in rng.integers(0, 30, int(rng.integers(0, 5))))
        assert short.gang_ready_at(t, iter(nodes)) == max(long_way.ready_at(t, nodes).values(), default=t)
        assert short._cold == long_way._cold and short.pulls == long_way.pulls


def test_an_event_observed_before_one_already_queued_keeps_its_place():
    from loadgen.model.events import Kind
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 4, "schedulers.ray.observe_ms": 250})
    out = []
    for heap in (False, True):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("ray"),
                            control_plane=sc.section("control_plane"), seed=1)
        cls = target_class("ray", "sim")
        target = (_observing_through_the_heap(cls) if heap else cls)(ctx)
        for t, job_id in ((10.0, 1), (5.0, 2), (5.0, 3), (12.0, 4), (10.0, 5)):
            target._emit(t, job_id, Kind.SUBMITTED)
        assert target.next_wakeup() == 5.25
        out.append([(e.t, e.job_id) for e in target.advance(10.25)] + [(e.t, e.job_id) for e in target.advance(99.0)])
    assert out[0] == out[1] == [(5.25, 2), (5.25, 3), (10.25, 1), (10.25, 5), (12.25, 4)]


def test_kube_candidates_are_the_first_feasible_nodes_from_the_start_index():
    kube = small_kube(memory_gib=2)
    s, n = kube.state, 120
    rng = np.random.default_rng(8)
    for step in range(400):
        scramble(s, rng, step, empty_share=0.6, memory_takes=150)   # some steps all up, all with memory
        assert s.nodes_down == int((~s.up).sum()) and s.mem_short == int((s.free_mem < 1).sum())
        g, c, start = int(rng.integers(1, 9)), int(rng.integers(1, 60)), int(rng.integers(0, n))
        kube.start_index = start
        rotated = [(start + k) % n for k in range(n)]
        fits = [v for v in rotated if s.free_gpus[v] >= g and s.up[v] and s.free_cpus[v] >= c and s.free_mem[v] >= 1]
        order, examined = kube._candidates(g, c)
        assert order.tolist() == fits[:kube.to_find]
        if not fits:
            assert examined == n and kube.start_index == start
        else:
            assert examined == (n if len(fits) < kube.to_find else rotated.index(fits[kube.to_find - 1]) + 1)
            assert kube.start_index == (start + examined) % n


@pytest.mark.parametrize("observe_ms,sigma", [(0, 0.0), (250, 0.0), (250, 1.2)])
@pytest.mark.parametrize("name", ["kube", "kube-gang", "coscheduling", "kueue", "volcano", "ray", "slurm"])
def test_the_lifecycles_fused_wakeups_give_the_same_events(name, observe_ms, sigma):
    """The lifecycle running the target's instants through run_instants, and its own timers between
    them, against the runner taking every wakeup through its full loop: rendezvous on every start,
    some timing out (requeued or restarted in place), evictions and node failures. Whole-second
    times and no jitter make the lifecycle's timers fall on the target's instants."""
    from loadgen.drive.lifecycle import Lifecycle
    from loadgen.model.startup.spec import RendezvousSpec, StartupSpec
    from loadgen.model.target import ChaosAction
    jobs = [job(i, members=1 + i % 3, gpus=8 if i % 2 else 2, t=7.0 * i, dur=40.0 + 13 * (i % 5)) for i in range(40)]
    chaos = [ChaosAction(t=50.0 + 31 * k, kind="evict", params={"members": 1}) for k in range(5)]
    chaos += [ChaosAction(t=120.0, kind="node_fail", params={"nodes": [1, 4]}),
              ChaosAction(t=170.0, kind="node_recover", params={"nodes": [1, 4]})]
    policy = "requeue" if name in ("volcano", "slurm", "kueue") else "in-place"
    startup = StartupSpec(image=ImageSpec(container_start_s=3.0),
                          rendezvous=RendezvousSpec(base_s=4.0, per_member_s=1.0, jitter_sigma=sigma, timeout_s=6.0,
                                                    restart_backoff_s=2.0, restart={name: policy}))
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 6, "fleet.leaf_size": 2,
                                         f"schedulers.{name}.observe_ms": observe_ms})
    events, counts = [], []
    for clock in (VirtualClock(), _SlowVirtualClock()):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config(name),
                            control_plane=sc.section("control_plane"), seed=1, startup=startup)
        target = Lifecycle(target_class(name, "sim")(ctx), startup, ctx.fleet, seed=1)
        target.start()
        rec = Recording(jobs)
        run(target, jobs, chaos, 2_000.0, 10.0, rec, clock)
        events.append(rec.events)
        counts.append(dict(target.counts))
    assert len(events[0]) > 100
    assert counts[0]["start_failures"] > 0 and counts[0]["rendezvous_attempts"] > counts[0]["start_failures"]
    assert counts[0] == counts[1]
    assert events[0] == events[1]


@pytest.mark.parametrize("mode,table", [("least_allocated", True), ("most_allocated", False),
                                        ("balanced_allocation", True), ("balanced_allocation", False)])
def test_kube_feasible_nodes_kept_through_an_attempt_are_the_candidates_found_anew(mode, table, monkeypatch):
    """FeasibleNodes, found once and kept by `placed`, against _candidates' pass over the fleet
    and the scorer's value of each candidate before every pod: the same candidates, nodes examined
    and scores for every pod of an attempt, on fleets with nodes down, nodes out of memory and
    nodes that fit several pods (scores from the table and computed)."""
    import fakes.kube.sim
    from fakes.kube.feasible import FeasibleNodes
    from fakes.kube.sim import POD_MEMORY_GIB, Scorer
    if not table:
        monkeypatch.setattr(fakes.kube.sim, "SCORE_TABLE_CELLS", 0)
    kube = small_kube(memory_gib=3)
    s, n = kube.state, 120
    rng = np.random.default_rng(9)
    for step in range(300):
        scramble(s, rng, step, empty_share=0.5, memory_takes=200)
        g, c = int(rng.integers(1, 5)), int(rng.integers(1, 30))
        kube.start_index = int(rng.integers(0, n))
        kube.scorers.clear()
        kept = FeasibleNodes(s, s.free_mem, g, c, POD_MEMORY_GIB)
        for _pod in range(int(rng.integers(1, 40))):
            start = kube.start_index
            long_way = kube._candidates(g, c)
            after = kube.start_index
            kube.start_index = start
            order, examined = kube._candidates(g, c, feasible=kept)
            assert order.tolist() == long_way[0].tolist() and examined == long_way[1] and kube.start_index == after
            if len(order) == 0:
                break
            scorer = kube.scorers.setdefault((g, c), Scorer(mode, 1, s, g, c))
            assert kept.scores(scorer).tolist() == scorer(s.free_gpus[order], s.free_cpus[order],
                                                          s.free_mem[order]).tolist()
            node = int(order[int(rng.integers(len(order)))])
            s.take(7, node, g, c)
            kept.placed(node)


@pytest.mark.parametrize("table", [True, False])
@pytest.mark.parametrize("name", ["kube", "kube-gang", "coscheduling"])
def test_kube_attempts_keeping_the_feasible_nodes_give_the_same_events(name, table, monkeypatch):
    """Whole runs of gangs of up to 6 pods (nodes that fit several of them, memory for 3 pods a
    node, evictions and node failures) against a twin that finds and scores the candidates anew
    every pod."""
    import fakes.kube.sim
    from loadgen.model.target import ChaosAction
    if not table:
        monkeypatch.setattr(fakes.kube.sim, "SCORE_TABLE_CELLS", 0)
    jobs = [job(i, members=1 + i % 6, gpus=(1, 2, 4, 8)[i % 4], t=5.0 * i, dur=40.0 + 13 * (i % 5))
            for i in range(60)]
    chaos = [ChaosAction(t=50.0 + 31 * k, kind="evict", params={"members": 1}) for k in range(5)]
    chaos += [ChaosAction(t=120.0, kind="node_fail", params={"nodes": [1, 4]}),
              ChaosAction(t=170.0, kind="node_recover", params={"nodes": [1, 4]})]
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 8, "fleet.leaf_size": 2, "fleet.memory_gib_per_node": 3})
    events = []
    for anew in (False, True):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config(name),
                            control_plane=sc.section("control_plane"), seed=1)
        cls = target_class(name, "sim")
        if anew:
            class Anew(cls):
                def _candidates(self, g, c, job=None, feasible=None):
                    return super()._candidates(g, c, job)

                def _score(self, nodes, g, c, feasible=None):
                    return super()._score(nodes, g, c)
            cls = Anew
        target = cls(ctx)
        target.start()
        rec = Recording(jobs)
        run(target, jobs, chaos, 3_000.0, 10.0, rec, VirtualClock())
        events.append(rec.events)
    assert sum(e.kind == "bound" for e in events[0]) > 50
    assert events[0] == events[1]


def test_rendezvous_misalignment_of_one_node_is_the_set_walk():
    """A gang on one node (or none) is one leaf and never misaligned, as the walk over its nodes'
    set and leaves gives."""
    from loadgen.model.startup.rendezvous import Rendezvous
    from loadgen.model.startup.spec import RendezvousSpec
    fleet = Fleet(nodes=96, gpus_per_node=8, leaf_size=32)
    rdv = Rendezvous(RendezvousSpec(base_s=1.0), fleet, seed=1)

    def long_way(nodes, gpm):
        uniq = set(nodes)
        leaves = len({int(fleet.leaf_of[n]) for n in uniq}) if uniq else 1
        return leaves, len(uniq) > 1 and (leaves > 1 or gpm < fleet.gpus_per_node)

    rng = np.random.default_rng(4)
    for _ in range(300):
        nodes = tuple(int(v) for v in rng.integers(0, 96, int(rng.integers(0, 4))))
        for gpm in (1, 4, 8):
            assert rdv.misaligned(nodes, gpm) == long_way(nodes, gpm), nodes


def test_fused_wakeups_go_through_a_subclass_own_advance():
    """A simulated target that overrides advance (none does today) is run through it."""
    from loadgen.drive.lifecycle import Lifecycle
    from loadgen.model.startup.spec import StartupSpec
    jobs = [job(i, members=1 + i % 2, gpus=8, t=7.0 * i, dur=40.0) for i in range(20)]
    sc = from_dict({}).with_overrides(**{"fleet.nodes": 6, "fleet.leaf_size": 2})
    calls = []
    cls = target_class("slurm", "sim")

    class Counting(cls):
        def advance(self, now):
            calls.append(now)
            return super().advance(now)

    events = []
    for target_cls in (Counting, cls):
        ctx = TargetContext(fleet=sc.fleet(), config=sc.scheduler_config("slurm"),
                            control_plane=sc.section("control_plane"), seed=1)
        target = Lifecycle(target_cls(ctx), StartupSpec.off(), ctx.fleet, seed=1)
        target.start()
        rec = Recording(jobs)
        run(target, jobs, [], 1_000.0, 10.0, rec, VirtualClock())
        events.append(rec.events)
    assert len(calls) > 50
    assert events[0] == events[1]
