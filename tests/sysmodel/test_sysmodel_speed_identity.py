"""The optimised model (docs/sysmodel.md, Speed) computes what the unoptimised one did, to 1e-9 relative.

The fast path (engine loop with memoised max-min rates, memoised communication tasks, networks
and collective results cached per fabric, shared layer compute times) is compared with the
reference path kept in the tree (``simulate_iteration(..., reference=True)``: the engine's
original loop in ``sysmodel/engine_reference.py``, every communication task timed anew), and
the caches with what a fresh computation gives. No value here is a stored snapshot: both sides
are computed in the test.
"""

from __future__ import annotations

import dataclasses
import random
from array import array

import numpy as np
import pytest

from hdl.contracts.placement import factorisations, parse_strategy
from sysmodel.collectives import Collective, evaluate
from sysmodel.engine import Engine
from studies.evaluation import sweep_microbatches
from sysmodel.platform import FABRICS, default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workloads import WORKLOADS
from sysmodel.workload_file import get_workload

REL = 1e-9
P = default_platform()


def assert_same_iteration(fast, ref):
    assert fast.time_s == pytest.approx(ref.time_s, rel=REL, abs=0)
    assert fast.steady_time_s == pytest.approx(ref.steady_time_s, rel=REL, abs=0)
    assert fast.config_load_s == pytest.approx(ref.config_load_s, rel=REL, abs=1e-18)
    assert fast.tasks == ref.tasks
    for part in ref.breakdown:   # parts may be 0: compare against the iteration's scale
        assert abs(fast.breakdown[part] - ref.breakdown[part]) <= REL * ref.time_s, part
    for part in ref.comm_busy:
        assert abs(fast.comm_busy[part] - ref.comm_busy[part]) <= REL * ref.time_s, part


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("overlap", [True, False])
def test_paper_iterations_equal_the_reference_path(workload, overlap):
    """Every iteration of the headline table (4 workloads x 5 fabrics, both overlap
    policies) is the same on the fast and the reference path."""
    w = get_workload(workload)
    for fabric in FABRICS:
        fast = simulate_iteration(P, fabric, w, overlap=overlap)
        ref = simulate_iteration(P, fabric, w, overlap=overlap, reference=True)
        assert_same_iteration(fast, ref)


@pytest.mark.parametrize("workload, fabric", [("transformer-17b", "fred-d"), ("transformer-17b", "mesh")])
def test_sweep_strategies_equal_the_reference_path(workload, fabric):
    """Every MP x DP x PP strategy of the sweep (40 samples per DP replica) -- pipelines,
    recomputation, more microbatches -- on the fast and the reference path."""
    base = get_workload(workload)
    checked = 0
    for strategy in factorisations(P.npus):
        m = sweep_microbatches(base.microbatches, strategy.pp, 40)
        kwargs = dict(samples_per_dp=40)
        try:
            fast = simulate_iteration(P, fabric, base.with_(microbatches=m), strategy, **kwargs)
        except Exception:   # noqa: BLE001 -- does not fit: the reference must say so too
            with pytest.raises(Exception):
                simulate_iteration(P, fabric, base.with_(microbatches=m), strategy, reference=True, **kwargs)
            continue
        ref = simulate_iteration(P, fabric, base.with_(microbatches=m), strategy, reference=True, **kwargs)
        assert_same_iteration(fast, ref)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("strategy", ["MP2-DP2-PP5", "MP4-DP5-PP1", "MP1-DP5-PP4"])
def test_streaming_pipelines_equal_the_reference_path(strategy):
    """Weight streaming with many concurrent transfers (link sharing between stages' MP,
    PP hand-overs and the I/O streams) at a faster compute speed, where sharing matters."""
    p = P.with_compute_scale(64)
    s = parse_strategy(strategy)
    w = get_workload("transformer-1t")
    w = w.with_(microbatches=sweep_microbatches(w.microbatches, s.pp, 40))
    for fabric in ("mesh", "fred-b", "fred-d"):
        fast = simulate_iteration(p, fabric, w, s, samples_per_dp=40)
        ref = simulate_iteration(p, fabric, w, s, samples_per_dp=40, reference=True)
        assert_same_iteration(fast, ref)


def test_random_task_graphs_equal_the_reference_loop():
    """Random graphs of fixed tasks and link-sharing transfers on random links: every task's
    start and end agree between the optimised loop and the reference loop."""
    rng = random.Random(16)
    for case in range(40):
        n_links = rng.randint(1, 6)
        bw = np.array([rng.choice([1.0, 2.0, 5.0]) for _ in range(n_links)])
        shared = [np.array([rng.choice([0.0, 0.0, 1.0, 3.0]) for _ in range(n_links)]) for _ in range(4)]
        graphs = []
        for _ in range(2):
            e = Engine()
            graphs.append(e)
        r2 = random.Random(case)
        for e in graphs:
            r2.seed(case)
            for i in range(rng.randint(5, 30) if e is graphs[0] else len(graphs[0].tasks)):
                resource = f"r{r2.randint(0, 4)}"
                deps = [d for d in range(i) if r2.random() < 0.15]
                if r2.random() < 0.5:
                    loads = shared[r2.randint(0, 3)]   # repeated arrays, as CommTimer hands out
                    if not loads.any():
                        loads = loads + 1.0
                    e.add(f"t{i}", resource, float((loads / bw).max()) + r2.random(), deps,
                          loads=loads, bw=bw, category="mp")
                else:
                    e.add(f"t{i}", resource, r2.random(), deps)
        fast = graphs[0].run()
        ref = graphs[1].run(reference=True)
        assert fast.makespan == pytest.approx(ref.makespan, rel=REL)
        for a, b in zip(fast.tasks, ref.tasks):
            assert a.start == pytest.approx(b.start, rel=REL, abs=1e-12), (case, a.name)
            assert a.end == pytest.approx(b.end, rel=REL, abs=1e-12), (case, a.name)


def test_collective_cache_equals_a_fresh_computation():
    """A platform that differs only in compute shares cached networks and collective results
    (its network_spec); the cached result equals one computed with empty caches."""
    from sysmodel.model_cache import ModelCache, using
    scaled = P.with_compute_scale(8)
    assert scaled.network_spec == P.network_spec
    colls = [Collective("all-reduce", tuple(range(P.npus)), 1e8)]
    for fabric in FABRICS:
        cached = evaluate(scaled, fabric, colls)
        with using(ModelCache()):
            fresh = evaluate(scaled, fabric, colls)
        assert fresh is not cached
        assert fresh.time_s == cached.time_s and np.array_equal(fresh.link_loads, cached.link_loads)


@pytest.mark.parametrize("fabric", FABRICS)
def test_collective_timing_is_evaluates_time_and_link_data(fabric):
    """collective_timing (the memoising timer's view) gives evaluate's time, link loads,
    bandwidths and configurations to the last bit, without keeping a result: computed first
    with empty caches, then with evaluate's result kept (which it then returns as it is)."""
    from sysmodel.collectives import CollectiveTiming, collective_timing
    from sysmodel.model_cache import ModelCache, using
    strategy = parse_strategy("MP4-DP5-PP1")
    dp_groups = [tuple(strategy.rank(mp=k, dp=d, pp=0) for d in range(strategy.dp)) for k in range(strategy.mp)]
    sets = [(Collective("all-reduce", tuple(range(P.npus)), 1e8),),
            tuple(Collective("all-reduce", g, 3e6) for g in dp_groups),
            (Collective("io-load", dp_groups[0], 5e6),),
            (Collective("io-store", tuple(range(P.npus)), 7e6), Collective("multicast", (0, 1, 2), 1e5, root=0))]
    for colls in sets:
        with using(ModelCache()) as cache:
            light = collective_timing(P, fabric, colls)
            assert isinstance(light, CollectiveTiming) and not cache.collectives
            full = evaluate(P, fabric, colls)
            assert collective_timing(P, fabric, colls) is full
        assert light.time_s == full.time_s, (fabric, colls)
        assert np.array_equal(light.link_loads, full.link_loads) and np.array_equal(light.link_bw, full.link_bw)
        assert light.configurations == full.configurations


@pytest.mark.parametrize("fabric", ["fred-d", "mesh"])
def test_comm_times_shared_across_timers_equal_a_fresh_timing(fabric):
    """A memoising timer's concurrent collectives are shared with the next timer on the same
    network (model cache ``comm_times``): the same object, its configurations still added to
    the second timer; equal, field by field, to the reference timer's fresh timing."""
    from sysmodel.comm_timing import CommTimer
    from dataclasses import replace
    from sysmodel.model_cache import ModelCache, using
    strategy = parse_strategy("MP4-DP5-PP1")
    groups = [tuple(strategy.rank(mp=k, dp=d, pp=0) for k in range(strategy.mp)) for d in range(strategy.dp)]
    colls = [Collective("all-reduce", g, 3e6) for g in groups]
    with using(ModelCache()):
        first, second = (CommTimer(P, fabric, strategy, 1.0) for _ in range(2))
        a = first.concurrent(colls)
        b = second.concurrent(list(colls))
        assert b is a
        assert second.configurations == first.configurations
        if fabric != "mesh":
            assert first.configurations   # an in-switch all-reduce stores phases
        # another compute speed is the same network; another NPU link rate is another network
        assert CommTimer(P.with_compute_scale(2), fabric, strategy, 1.0).concurrent(colls) is a
        faster = replace(P, npu_send_gbps=P.npu_send_gbps * 2)
        c = CommTimer(faster, fabric, strategy, 1.0).concurrent(colls)
        assert c is not a   # its network_spec differs: timed on its own network
    with using(ModelCache()):
        fresh = CommTimer(P, fabric, strategy, 1.0, memo=False).concurrent(colls)
    assert fresh is not a and fresh.time_s == a.time_s
    assert np.array_equal(fresh.loads, a.loads) and np.array_equal(fresh.bw, a.bw)


def test_each_groups_collectives_are_made_once_for_every_network():
    """each_group makes its collectives once per (op, groups, size, roots) (model cache
    ``group_collectives``) and times that one tuple on every network asked: two networks (another
    NPU link rate), two timings, one tuple, equal to the collectives made as asked."""
    from dataclasses import replace
    from sysmodel.comm_timing import CommTimer
    from sysmodel.model_cache import ModelCache, using
    strategy = parse_strategy("MP4-DP5-PP1")
    groups = tuple(tuple(strategy.rank(mp=k, dp=d, pp=0) for d in range(strategy.dp)) for k in range(strategy.mp))
    faster = replace(P, npu_send_gbps=P.npu_send_gbps * 2)
    with using(ModelCache()) as cache:
        a = CommTimer(P, "fred-d", strategy, 1.0).each_group("all-reduce", groups, 3e6)
        b = CommTimer(faster, "fred-d", strategy, 1.0).each_group("all-reduce", groups, 3e6)
        assert a is not b and a.time_s != b.time_s   # timed on each network
        assert len(cache.group_collectives) == 1 and len(cache.group_comm_times) == 2
        made = next(iter(cache.group_collectives.values()))
        assert made == tuple(Collective("all-reduce", g, 3e6) for g in groups)
        assert [key[2] is made for key in cache.comm_times] == [True, True]


@pytest.mark.parametrize("fabric", ["fred-d", "mesh"])
def test_each_group_finds_the_entry_concurrent_shares(fabric):
    """CommTimer.each_group(op, groups, size) returns the very object concurrent() of the
    collectives it stands for returns (model cache ``comm_times``), adds their configurations
    to every timer that asks, whether it or concurrent() asked first; the reference timer and
    another size or op get their own timing."""
    from hdl.contracts.errors import FredError
    from sysmodel.comm_timing import CommTimer
    from sysmodel.model_cache import ModelCache, using
    strategy = parse_strategy("MP4-DP5-PP1")
    groups = CommTimer(P, fabric, strategy, 1.0).dp_groups[0]
    colls = [Collective("all-reduce", g, 2e6) for g in groups]
    for first_by_groups in (True, False):
        with using(ModelCache()) as cache:
            timers = [CommTimer(P, fabric, strategy, 1.0) for _ in range(3)]
            if first_by_groups:
                a = timers[0].each_group("all-reduce", groups, 2e6)
                assert timers[1].concurrent(colls) is a
            else:
                a = timers[0].concurrent(colls)
            assert timers[2].each_group("all-reduce", groups, 2e6) is a
            assert timers[2].each_group("all-reduce", groups, 2e6) is a and len(cache.group_comm_times) == 1
            assert timers[2].configurations == timers[0].configurations
            assert timers[2].each_group("all-reduce", groups, 3e6) is not a
            assert timers[2].each_group("all-gather", groups, 2e6) is not a
            fresh = CommTimer(P, fabric, strategy, 1.0, memo=False).each_group("all-reduce", groups, 2e6)
            assert fresh is not a and fresh.time_s == a.time_s and np.array_equal(fresh.loads, a.loads)
            assert len(cache.group_comm_times) == 3   # the reference timer keeps none
    with pytest.raises(FredError, match="positive number of bytes"):
        CommTimer(P, fabric, strategy, 1.0).each_group("all-reduce", groups, 0.0)
    # a PP hand-over without scatter-gather: per DP replica a multicast from MP rank 0 of the
    # source stage to the destination's MP group, as the collectives written out give it
    pipelined = parse_strategy("MP2-DP2-PP2")
    platform = dataclasses.replace(P, pp_scatter_gather=False)
    with using(ModelCache()):
        timer = CommTimer(platform, fabric, pipelined, 1.0)
        hand_over = timer.pp(1, 0, 1e6)
        written = [Collective("multicast", (pipelined.rank(mp=0, dp=d, pp=0), pipelined.rank(mp=1, dp=d, pp=0)),
                              1e6, root=pipelined.rank(mp=0, dp=d, pp=1)) for d in range(2)]
        assert [c.root for c in written] == [2, 6] and written[1].group == (4, 5, 6)
        assert CommTimer(platform, fabric, pipelined, 1.0).concurrent(written) is hand_over
    with pytest.raises(ValueError):   # a root per group
        CommTimer(P, fabric, strategy, 1.0).each_group("multicast", groups, 1e6, roots=(0,))


def test_network_spec_separates_what_changes_the_network():
    """Network fields change the network key; compute and training fields do not."""
    from dataclasses import replace
    from sysmodel.platform import FredVariant
    base = P.network_spec
    assert replace(P, npus_per_l1=5).network_spec != base
    assert replace(P, io_gbps=64.0).network_spec != base
    assert replace(P, variants={**P.variants, "fred-d": FredVariant("fred-d", 6000.0, True)}).network_spec != base
    assert replace(P, switch=replace(P.switch, first_flit_latency_cycles=99)).network_spec != base
    assert replace(P, peak_tflops=1.0, dp_overlap=True, iterations=3).network_spec == base


@pytest.mark.parametrize("workload", ["transformer-17b", "gpt-3"])
def test_a_graph_retimed_for_another_compute_speed_equals_the_reference(workload):
    """The fast path builds an iteration's graph once and re-times its compute tasks for other
    compute speeds (sysmodel/graph_template.py); at each speed it equals the reference path,
    which builds the graph anew."""
    from sysmodel import graph_template
    w = get_workload(workload)
    for fabric in ("mesh", "fred-d"):
        for overlap in (True, False):
            simulate_iteration(P, fabric, w, overlap=overlap)            # builds and keeps the graph
            key = graph_template.structure_key(P.with_compute_scale(5), fabric, w, None, "1f1b",
                                               None, None, overlap)
            assert graph_template.lookup(key) is not None                # the scaled platform reuses it
            for k in (5, 300):
                p = P.with_compute_scale(k)
                assert_same_iteration(simulate_iteration(p, fabric, w, overlap=overlap),
                                      simulate_iteration(p, fabric, w, overlap=overlap, reference=True))


def test_the_evaluation_simulates_each_distinct_iteration_once():
    """simulate_once keys on the platform's value: two platforms scaled to the same compute
    speed are distinct objects but one iteration; another speed or policy is another."""
    from sysmodel.iteration_memo import simulate_once
    w = get_workload("resnet-152")
    a = simulate_once(P.with_compute_scale(3), "fred-c", w)
    assert simulate_once(P.with_compute_scale(3), "fred-c", w) is a
    assert simulate_once(P.with_compute_scale(4), "fred-c", w) is not a
    assert simulate_once(P.with_compute_scale(3), "fred-c", w, overlap=False) is not a
    assert a.time_s == simulate_iteration(P.with_compute_scale(3), "fred-c", w, reference=True).time_s


def _megatron_case(pp_overlap: bool, dp: int = 1):
    """GPT-3 175B as ``fred validate`` runs it (interleaved 1F1B, 3 chunks, PP 8, MP 8, one
    sample per microbatch) at 16 microbatches on the GPU cluster platform (``dp`` replicas)."""
    import dataclasses

    from studies.validation import FABRIC, case_workload, cluster_platform, load_cases
    case = next(c for c in load_cases()[0] if c.name == "gpt3-175b/full")
    case = dataclasses.replace(case, gpus=64 * dp, pipeline_parallel=8, global_batch=16 * dp)
    wl = case_workload(case)
    return cluster_platform().scaled(npus=case.gpus, pp_overlap=pp_overlap), FABRIC, wl


def assert_same_graph(platform, fabric, workload, strategy=None, *, blocking=False, **plan_args):
    """The fast path's builders (blocks of tasks appended at once, communication timed once)
    add the graph the general path adds task by task through ``add()`` (which an engine that
    overrides ``add`` makes every builder take), with every communication task timed anew:
    the same tasks, names, resources, dependencies, categories, NPUs and durations, and the
    same compute sources (the layer object itself: a graph template re-times by it).
    ``blocking``: the serialised mode (every communication task blocks its stage's compute)."""
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from sysmodel.training import build_task_graph, link_priority

    class GeneralPathEngine(StageEngine):
        def add(self, *args, **kwargs):
            return super().add(*args, **kwargs)

    graphs, sources = [], []
    for engine, memo in ((StageEngine, True), (GeneralPathEngine, False)):
        eng = engine(blocking=blocking, **link_priority(platform, fabric))
        build_task_graph(eng, plan_iteration(platform, workload, strategy, **plan_args), fabric, memo=memo)
        graphs.append(eng.tasks)
        sources.append([src if src is None or src[0] != "layer" else (src[0], id(src[1]), src[2:])
                        for src in eng.sources])
    assert sources[0] == sources[1]
    fields = ("name", "resource", "deps", "category", "npu")
    assert [[getattr(t, f) for f in fields] for t in graphs[0]] == \
        [[getattr(t, f) for f in fields] for t in graphs[1]]
    assert [t.duration for t in graphs[0]] == pytest.approx([t.duration for t in graphs[1]], rel=REL)


@pytest.mark.parametrize("pp_overlap", [False, True])
def test_interleaved_megatron_pipeline_equals_the_reference_path(pp_overlap):
    """A pass over a stage's layers and its send appended as one block: the reference path's
    graph and iteration, with blocking and with overlapped sends, and in the serialised mode."""
    platform, fabric, wl = _megatron_case(pp_overlap)
    assert_same_graph(platform, fabric, wl, microbatches=wl.microbatches)
    assert_same_graph(platform, fabric, wl, microbatches=wl.microbatches, blocking=True)
    fast = simulate_iteration(platform, fabric, wl, microbatches=wl.microbatches)
    ref = simulate_iteration(platform, fabric, wl, microbatches=wl.microbatches, reference=True)
    assert_same_iteration(fast, ref)


@pytest.mark.parametrize("pp_overlap", [False, True])
def test_streaming_blocks_equal_the_reference_graph(pp_overlap):
    """Weight streaming's microbatch blocks (a layer's compute, MP and hand-over appended at
    once) with blocking and with overlapped hand-overs, and the serialised mode's layer by
    layer tasks: the reference path's graph."""
    s = parse_strategy("MP2-DP2-PP5")
    w = get_workload("transformer-1t")
    w = w.with_(microbatches=sweep_microbatches(w.microbatches, s.pp, 40))
    assert_same_graph(P.scaled(pp_overlap=pp_overlap), "fred-d", w, s, samples_per_dp=40)
    assert_same_graph(P.scaled(pp_overlap=pp_overlap), "fred-d", w, s, samples_per_dp=40, blocking=True)


@pytest.mark.parametrize("blocking", [False, True])
def test_streaming_spills_equal_the_reference_graph(blocking):
    """Transformer-1T's default run (MP1-DP20-PP1, offload: a compute task and its spill per
    microbatch, no block) appends each spill timed once per layer: the general path's graph."""
    from sysmodel.iteration_plan import plan_iteration
    w = get_workload("transformer-1t")
    assert plan_iteration(P, w, None).memory.offload
    assert_same_graph(P, "fred-d", w, blocking=blocking)


@pytest.mark.parametrize("blocking", [False, True])
def test_schedule_passes_appended_as_arrays_equal_the_reference_graph(blocking, monkeypatch):
    """Every stretch of passes between the last backwards that split it appended as arrays
    (the threshold at one pass; the default leaves short stretches to the pass-by-pass loop,
    which the test above covers): the general path's graph, in both modes. With the gradient
    reductions overlapping the backwards (not deferred: the non-blocking mode with
    ``dp_overlap``) the 24 virtual stages' last backwards split the schedule into stretches;
    deferred (the validate cases' setting), none does: one stretch holds every pass."""
    from sysmodel import engine, schedule_append
    calls = []
    extend = engine.Engine._extend_blocks
    monkeypatch.setattr(schedule_append, "STRETCH_AS_ARRAYS", 1)
    monkeypatch.setattr(engine.Engine, "_extend_blocks", lambda self, *a: calls.append(a) or extend(self, *a))
    platform, fabric, wl = _megatron_case(pp_overlap=False)
    assert not platform.dp_overlap
    assert_same_graph(platform, fabric, wl, microbatches=wl.microbatches, blocking=blocking)
    assert len(calls) == 1
    if not blocking:
        calls.clear()
        assert_same_graph(platform.scaled(dp_overlap=True), fabric, wl, microbatches=wl.microbatches)
        assert len(calls) > 1


def test_block_last_backwards_marks_those_an_earlier_pass_built():
    """A last backward goes with the blocks around it only where an earlier backward of its
    virtual stage used (built) its block: every one with two or more microbatches, none with
    one (its only backward is its last), hand-counted on small schedules."""
    from sysmodel.pipeline_schedules import schedule_order
    from sysmodel.schedule_append import block_last_backwards
    for pp, microbatches, chunks in ((2, 3, 1), (4, 8, 2), (2, 1, 1), (3, 1, 1)):
        order = schedule_order("1f1b", pp, microbatches, chunks)
        marked = block_last_backwards(order, pp * chunks)
        assert int(order.last_backward.sum()) == pp * chunks
        assert not (marked & ~order.last_backward).any()
        assert int(marked.sum()) == (pp * chunks if microbatches > 1 else 0), (pp, microbatches, chunks)
        for j in np.flatnonzero(marked).tolist():   # the same (kind, virtual stage) earlier
            earlier = (order.backward[:j] == order.backward[j]) & (order.virtual[:j] == order.virtual[j])
            assert earlier.any()


@pytest.mark.parametrize("stretch", ["arrays", "one by one"])
@pytest.mark.parametrize("blocking", [False, True])
def test_last_backwards_within_stretches_equal_the_reference_graph(stretch, blocking, monkeypatch):
    """The deferred-bucket last backwards appended inside the stretches around them, as arrays
    and pass by pass: no pass takes the general path, each
    virtual stage's buckets are filled once from its last backward's block, and the graph --
    the deferred reductions included -- is the general path's, in both modes."""
    from sysmodel import schedule_append, task_graphs
    general, filled = [], []
    general_pass = task_graphs._StationaryPipeline._general_pass
    last_filled = task_graphs._StationaryPipeline._last_backward_filled
    monkeypatch.setattr(task_graphs._StationaryPipeline, "_general_pass",
                        lambda self, *a: general.append(a) or general_pass(self, *a))
    monkeypatch.setattr(task_graphs._StationaryPipeline, "_last_backward_filled",
                        lambda self, j, t0: filled.append(j) or last_filled(self, j, t0))
    monkeypatch.setattr(schedule_append, "STRETCH_AS_ARRAYS", 1)
    if stretch == "one by one":   # every stretch through the pass-by-pass loop (same arguments)
        monkeypatch.setattr(schedule_append, "_append_stretch", schedule_append._append_each)
    platform, fabric, wl = _megatron_case(pp_overlap=False, dp=2)   # DP 2: the buckets reduce
    assert_same_graph(platform, fabric, wl, microbatches=wl.microbatches, blocking=blocking)
    assert general == [] and len(filled) == len(set(filled)) == 8 * 3   # PP 8 x 3 chunks


def _two_compute_tasks():
    """A block of two compute tasks on queue "r", the second after the first."""
    from sysmodel.engine import TaskBlock
    return TaskBlock(names=["a", "b"], duration=[1.0, 2.0], category=["compute", "compute"],
                     npu=[0, 0], entry=[-1, -1], sources=[None, None], dep_count=[1], deps=[0],
                     queues=[("r", [0, 1])])


def test_task_names_made_when_read_follow_the_task_order():
    """Names are made on first read (Engine.names): single tasks and appended blocks in task
    order, read in the middle of a build and again after it, and on a re-timed copy."""
    eng = Engine()
    block = _two_compute_tasks()
    eng.add("first", "r", 1.0)
    eng._extend(block, "x ", (0,))
    assert eng.names() == ["first", "x a", "x b"]
    eng.add("middle", "r", 1.0, [2])
    copy = eng.retimed(np.ones(len(eng)))
    eng._extend(block, "y ", (3,))
    assert eng.names() == ["first", "x a", "x b", "middle", "y a", "y b"]
    assert [t.name for t in eng.tasks] == eng.names()
    assert copy.names() == ["first", "x a", "x b", "middle"]


def test_a_sealed_graph_refuses_tasks_and_its_copies_equal_an_unsealed_copy():
    """Engine.seal (a graph kept as a template): the object columns become tuples, and the
    copies share every column but the durations (typed arrays for the numeric ones); names,
    task fields and the compiled loop's arrays are those of the same graph unsealed (and of
    its copy), and adding a task is refused with an error naming it, as is appending a block."""
    from hdl.contracts.errors import FredError

    def graph():
        eng = Engine()
        block = _two_compute_tasks()
        eng.add("first", "r", 1.0)
        eng._extend(block, "x ", (0,))
        eng.add("io", "q", 0.5, [1], category="io")
        return eng

    plain, sealed = graph(), graph()
    sealed.seal()
    with pytest.raises(FredError, match="late.*sealed"):
        sealed.add("late", "r", 1.0)
    duration = np.array([3.0, 1.0, 2.0, 0.25])
    copies = plain.retimed(duration), sealed.retimed(duration)
    assert sealed.sealed and copies[1].sealed and not plain.sealed and not copies[0].sealed
    assert type(sealed._category) is tuple and copies[1]._category is sealed._category
    assert copies[1]._dep_flat is sealed._dep_flat and copies[1]._entry is sealed._entry
    assert copies[0]._dep_flat is not plain._dep_flat   # an unsealed copy has its own columns
    assert list(copies[1]._duration) == duration.tolist()
    with pytest.raises(AttributeError):   # a builder's fast path fails at the names' tuple
        sealed._extend(_two_compute_tasks(), "late ", (0,))
    assert len(sealed) == 4 and len(sealed._dep_flat) == len(plain._dep_flat)
    for a, b in [(plain, sealed), copies]:
        assert a.names() == list(b.names())
        assert [dataclasses.astuple(t) for t in a.tasks] == [dataclasses.astuple(t) for t in b.tasks]
        x, y = a.arrays(), b.arrays()
        for f in dataclasses.fields(x):
            assert np.array_equal(getattr(x, f.name), getattr(y, f.name)), f.name
        assert a.run().makespan == b.run().makespan
    assert copies[1].run().makespan == 3.0 + 1.0 + 2.0


def test_typed_blocks_append_the_columns_a_list_block_appends():
    """TaskBlock.typed (the builders' blocks: numeric columns, the dependencies' offsets among
    them, as typed arrays) appends, at any first task, the columns, tasks and compiled-loop
    arrays the same block of plain lists appends (the engine's list columns becoming typed
    arrays at the first block); the offsets are copied and shifted by each block's first task
    later, every pending block at once (Engine._settle), to the task numbers computed by
    hand; a numpy array of another type than a column's is refused, not converted."""
    from hdl.contracts.errors import FredError
    from array import array
    from sysmodel.engine import TaskBlock, _put
    rng = random.Random(31)
    for tasks in (1, 2, 15, 16, 17, 48):
        dep_count = [rng.randint(1, 3) for _ in range(tasks - 1)]
        # task k > 0 depends on earlier tasks of the block (offsets), some twice
        deps = [rng.randrange(k) for k, c in zip(range(1, tasks), dep_count) for _ in range(c)]
        fields = dict(names=tuple(f"t{k}" for k in range(tasks)),
                      duration=[rng.choice([0.0, 1e-9, 0.1 + rng.random(), 3.0]) for _ in range(tasks)],
                      category=["compute"] * tasks, npu=[0] * tasks, entry=[-1] * tasks,
                      sources=[None] * tasks, dep_count=dep_count, deps=deps,
                      queues=[("r", list(range(tasks)))])
        plain, typed = TaskBlock(**fields), TaskBlock.typed(**fields)
        assert type(typed.deps) is array and list(typed.deps) == deps
        a, b = Engine(), Engine()
        for eng, block in ((a, plain), (b, typed)):
            eng.add("first", "r", 1.0)
            assert type(eng._dep_flat) is list     # task by task: lists until a block comes
            eng._extend(block, "x ", (0,))
            assert type(eng._dep_flat) is array and type(eng._duration) is array
            eng.add("middle", "r", 0.5, [len(eng) - 1])
            eng._extend(block, "y ", (len(eng) - 1, 0))
            assert len(eng._dep_shifts) == (2 if deps else 0)   # both blocks' offsets pending
            eng._settle()
            assert eng._dep_shifts == []
            # by hand: "first", the block at 1 after it, "middle", the block after "middle" and 0
            y0 = tasks + 2
            assert list(eng._dep_flat) == [0, *[1 + d for d in deps], tasks, y0 - 1, 0, *[y0 + d for d in deps]]
        for column in ("_duration", "_entry", "_dep_count", "_dep_flat"):
            assert list(getattr(a, column)) == list(getattr(b, column)), (tasks, column)
        assert [dataclasses.astuple(t) for t in a.tasks] == [dataclasses.astuple(t) for t in b.tasks]
        x, y = a.arrays(), b.arrays()
        for f in dataclasses.fields(x):
            assert np.array_equal(getattr(x, f.name), getattr(y, f.name)), f.name
        # one resource runs every task in turn: the makespan is the durations' sum (to rounding)
        assert a.run().makespan == b.run().makespan
        assert a.run().makespan == pytest.approx(1.5 + 2 * sum(fields["duration"]), rel=1e-12)
    with pytest.raises(FredError, match="int32.*int64"):
        _put(array("q"), np.arange(3, dtype=np.int32))


def test_a_graph_added_task_by_task_keeps_lists_and_seals_them_as_tuples():
    """Engine's numeric columns stay lists while tasks are added one by one (CPython appends to
    a list fastest) and become tuples when sealed; the arrays and the run are those of the
    same graph with a block appended, whose columns are typed arrays."""
    from array import array
    listed, typed = Engine(), Engine()
    for eng in (listed, typed):
        eng.add("first", "r", 1.0)
        eng.add("io", "q", 0.5, [0], category="io")
    typed._extend(_two_compute_tasks(), "x ", (1,))
    listed.add("x a", "r", 1.0, [1])
    listed.add("x b", "r", 2.0, [2])
    assert type(listed._duration) is list and type(typed._duration) is array
    x, y = listed.arrays(), typed.arrays()
    for f in dataclasses.fields(x):
        assert np.array_equal(getattr(x, f.name), getattr(y, f.name)), f.name
    listed.seal()
    assert listed.sealed and all(type(getattr(listed, c)) is tuple
                                 for c in ("_duration", "_entry", "_dep_count", "_dep_flat"))
    assert listed.run().makespan == typed.run().makespan == 4.5


@pytest.mark.parametrize("blocking", [False, True])
def test_last_backwards_appended_as_blocks_equal_the_reference_graph(blocking, monkeypatch):
    """Each stage's last backward fills the gradient buckets. Where their reduction is deferred
    after the schedule (PP > 1, blocking or ``dp_overlap`` false: Transformer-17B's default
    MP3-DP3-PP2), the pass adds exactly its virtual stage's backward block, built by an
    earlier backward, and the buckets are filled from the block's compute tasks: no layer
    takes the general path, and the graph is the general path's. Where the precondition
    fails -- the reduction overlapping the backward (its tasks come between the layers'), or
    one microbatch (no earlier backward built the block) -- the general path adds the pass,
    and the graph is again the general path's."""
    from sysmodel import task_graphs
    from sysmodel.iteration_plan import plan_iteration
    calls = []
    add_layer = task_graphs._StationaryPipeline._add_layer
    monkeypatch.setattr(task_graphs._StationaryPipeline, "_add_layer",
                        lambda self, *a, **k: calls.append(a[0]) or add_layer(self, *a, **k))
    w = get_workload("transformer-17b")
    assert plan_iteration(P, w, None).strategy.pp == 2 and not P.dp_overlap

    def general_layers(platform, **plan_args):
        calls.clear()
        assert_same_graph(platform, "fred-d", w, blocking=blocking, **plan_args)
        return len(calls)
    plain = general_layers(P.scaled(dp_bucket_elements=2e8))   # several buckets per stage
    overlapped = general_layers(P.scaled(dp_overlap=True, dp_bucket_elements=2e8))
    single = general_layers(P, microbatches=1)
    # the general-path engine of assert_same_graph adds every layer of every pass one by one;
    # the fast engine adds the last backwards' layers one by one only where it must (with
    # the serialised mode's engine, dp_overlap does not matter: the reduction is deferred)
    layers = len(w.layers)
    passes = 2 * plan_iteration(P, w, None).microbatches
    assert plain == layers * passes
    assert overlapped == layers * passes + (0 if blocking else layers)
    assert single == 2 * layers + layers   # one forward and one (last) backward per stage


def test_stacked_transfer_entries_give_the_arrays_taken_one_by_one(monkeypatch):
    """The transfer entries' arrays for the compiled loop computed over the stacked loads
    (engine._stacked_entry_arrays) equal those taken entry by entry, bit for bit: times alone,
    loaded links, shares and tiers (some entries loading the stored phase, some not, equal
    contents in other arrays, unused entries, ties in the first task). A graph's entries of
    several lengths take the entry-by-entry path."""
    from sysmodel import engine
    rng = np.random.default_rng(31)
    checked = 0
    for _ in range(60):
        links = int(rng.integers(3, 12))
        entries = []
        for _ in range(int(rng.integers(1, 7))):
            loads = rng.random(links) * (rng.random(links) < 0.5)
            loads[int(rng.integers(links))] = 1.0 + rng.random()
            entries.append((loads, 0.5 + rng.random(links)))
        entries.append((entries[0][0].copy(), entries[0][1].copy()))   # same content, other arrays
        shared = np.full(links, -1, dtype=np.int64)
        shared[links - 1] = 0                                      # link 0's phase is stored
        task_entry = rng.integers(-1, len(entries), size=int(rng.integers(1, 20)))
        stacked = engine._entry_arrays(entries, 0.0, shared, task_entry)
        with monkeypatch.context() as m:
            m.setattr(engine, "_stack_width", lambda _entries: None)
            each = engine._entry_arrays(entries, 0.0, shared, task_entry)
        assert stacked.keys() == each.keys()
        for key, value in each.items():
            assert np.array_equal(stacked[key], value), key
            assert np.asarray(stacked[key]).dtype == np.asarray(value).dtype, key
        holding = [e for e in range(len(entries)) if entries[e][0][0] > 0]
        checked += 0 < len(holding) < len(entries)
    assert checked >= 10   # both kinds of entry in many cases
    assert engine._stack_width([(np.ones(3), np.ones(3)), (np.ones(4), np.ones(4))]) is None
    cells = engine.STACKED_ENTRY_CELLS   # large entry sets go entry by entry (faster there)
    assert engine._stack_width([(np.ones(cells // 4), np.ones(cells // 4))] * 4) is not None
    assert engine._stack_width([(np.ones(cells // 4 + 1), np.ones(cells // 4 + 1))] * 4) is None


def test_kept_transfer_entry_arrays_are_made_again_when_any_input_changes(monkeypatch):
    """The transfer entries' arrays kept in the model cache (engine._kept_stacked_entry_arrays)
    are found again only for equal inputs: each thing the key covers -- the tasks' entry order
    (which sets the tiers), an entry's loads changed in place in the same array, its
    bandwidths, the number of links, the number of entries, the preemption costs, the shared
    phases -- changed alone gives a miss and the arrays taken entry by entry (no cache), each
    of which differs from the first inputs' (a stale entry would fail). Equal values in other
    arrays are a hit. Every call returns its own writable copies: writing one changes neither
    the kept arrays nor the next call's, nor does changing the caller's preemption costs
    afterwards. The cache stays within its bound."""
    from sysmodel import engine
    from sysmodel.model_cache import ModelCache, using
    rng = np.random.default_rng(27)
    links = 6
    entries = []
    for _ in range(4):
        loads = rng.random(links) * (rng.random(links) < 0.6)
        loads[int(rng.integers(links - 1))] = 1.0 + rng.random()
        entries.append((loads, 0.5 + rng.random(links)))
    entries[1][0][0] = entries[2][0][0] = 2.0    # two entries load the stored phase (link 0)
    shared = np.full(links, -1, dtype=np.int64)
    shared[links - 1] = 0
    task_entry = np.array([-1, 0, 1, -1, 2, 3, 1, 2], dtype=np.int64)

    def each(entries, preempt_s, shared, task_entry):   # the arrays taken entry by entry, uncached
        with monkeypatch.context() as m:
            m.setattr(engine, "_stack_width", lambda _entries: None)
            return engine._entry_arrays(entries, preempt_s, shared, task_entry)

    def same(a, b) -> bool:
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and np.asarray(a[k]).dtype
                                            == np.asarray(b[k]).dtype for k in a)

    with using(ModelCache()) as cache:
        memo = cache.transfer_entry_arrays
        first = engine._entry_arrays(entries, 0.0, shared, task_entry)
        assert len(memo) == 1 and same(first, each(entries, 0.0, shared, task_entry))
        again = engine._entry_arrays([(l.copy(), b.copy()) for l, b in entries], 0.0, shared,
                                     array_module_copy(task_entry))
        assert len(memo) == 1 and same(again, first)             # equal values: found again
        kept = next(iter(memo.values()))
        for key, value in again.items():
            if type(value) is np.ndarray:
                assert value.flags.writeable and value.flags.c_contiguous, key
                assert not np.shares_memory(value, kept[key]) and not np.shares_memory(value, first[key]), key
        again["alone"][:] = -1.0
        again["tier"][:] = 99
        assert same(engine._entry_arrays(entries, 0.0, shared, task_entry), first)

        def changed(name, entries=entries, preempt_s=0.0, shared=shared, task_entry=task_entry):
            size = len(memo)
            got = engine._entry_arrays(entries, preempt_s, shared, task_entry)
            want = each(entries, preempt_s, shared, task_entry)
            assert not same(want, first), f"{name}: the change must change the arrays"
            assert same(got, want), name
            assert len(memo) == size + 1, f"{name}: made again, not found"

        # the tasks' order: entry 2's first task before entry 1's swaps their tiers
        changed("task order", task_entry=np.array([-1, 0, 2, -1, 1, 3, 1, 2], dtype=np.int64))
        changed("bandwidths", entries=[entries[0], (entries[1][0], entries[1][1] * 2)] + entries[2:])
        changed("one more link", entries=[(np.append(l, 0.5 if e == 0 else 0.0), np.append(b, 1.0))
                                          for e, (l, b) in enumerate(entries)], shared=np.append(shared, -1))
        changed("one entry fewer", entries=entries[:3], task_entry=np.where(task_entry == 3, -1, task_entry))
        changed("preemption cost", preempt_s=1e-6)
        changed("preemption per link", preempt_s=np.linspace(0.0, 1e-6, links))
        changed("no shared phase", shared=None)
        entries[2][0][0] = 0.0   # changed in place: the same array objects, other values
        changed("loads changed in place")
        costs = np.full((2, first["n_links"]), 1e-6)   # the kept costs are not a view of these
        before = engine._entry_arrays(entries, costs, shared, task_entry)
        costs[:] = 5e-6
        assert same(engine._entry_arrays(entries, np.full((2, first["n_links"]), 1e-6), shared, task_entry),
                    before)
        assert cache.CACHES["transfer_entry_arrays"][0] == memo.bound
        for k in range(memo.bound + 5):
            engine._entry_arrays(entries, float(k + 1), shared, task_entry)
            assert len(memo) <= memo.bound


def array_module_copy(values: np.ndarray) -> array:
    """``values`` (int64) as a typed array, as an engine holds its tasks' entries."""
    return array("q", values.tolist())


def test_a_blocks_evenly_spaced_queue_offsets_become_a_range():
    """TaskBlock.typed keeps a queue's offsets as a range only where they are exactly one."""
    from sysmodel.engine import _as_range
    assert _as_range([1, 3, 5, 7]) == range(1, 9, 2)
    assert _as_range([0, 1]) == range(0, 2)
    assert _as_range([0, 2, 5]) == [0, 2, 5]
    assert _as_range([0, 2, 4, 5]) == [0, 2, 4, 5]
    assert _as_range([4]) == [4]
    assert _as_range([]) == []


def _codes_without_segments(eng):
    """``eng``'s task_kinds() and _category_codes() made from its columns alone (no block
    segments): what the engine made before blocks were coded once each."""
    copy = eng.retimed(np.array(eng._duration, dtype=np.float64))
    copy._segments, copy._kinds, copy._codes = [], None, None
    return copy.task_kinds(), copy._category_codes()


def test_task_codes_made_per_block_equal_those_made_per_task(monkeypatch):
    """The category and NPU codes made once per appended block (Engine._pieces) equal those
    made task by task: on Transformer-17B's graph (blocks between tasks added one by one) and
    on blocks whose NPUs a float would round or that are not ints, where the codes are None;
    small blocks (fewer than TASKS_PER_PIECE tasks each on average) are coded task by task."""
    from sysmodel import engine
    from sysmodel.engine import TaskBlock
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from sysmodel.training import build_task_graph, link_priority
    plan = plan_iteration(P, get_workload("transformer-17b"), None)
    eng = StageEngine(blocking=False, **link_priority(P, "fred-d"))
    build_task_graph(eng, plan, "fred-d")
    assert len(eng._segments) >= 8 and len(eng) > eng._segments[-1][0] + len(eng._segments[-1][1])
    assert len(eng._pieces(1)) == len(eng._segments) + 1   # 32 blocks, then the tasks added one by one
    (code, names, npu), (code2, names2) = eng.task_kinds(), eng._category_codes()
    (ref_code, ref_names, ref_npu), (ref_code2, ref_names2) = _codes_without_segments(eng)
    assert names == names2 == ref_names == ref_names2 == ["compute", "dp", "mp", "pp"]
    for a, b in ((code, ref_code), (code2, ref_code2), (npu, ref_npu)):
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
    assert np.array_equal(code, [names.index(c) for c in eng._category])
    assert np.array_equal(npu, [-1 if x is None else x for x in eng._npu])

    def graph(block_npus, added_npu):
        g = Engine()
        block = TaskBlock.typed(("a", "b", "c"), [1.0, 1.0, 1.0], ["compute", "io", "mp"], block_npus,
                                [-1, -1, -1], [None] * 3, [1, 1], [0, 1], [("r", [0, 1, 2])])
        g.add("first", "r", 1.0, category="dp", npu=added_npu)
        for k in range(3):
            g._extend(block, f"{k} ", (len(g) - 1,))
            g.add(f"between {k}", "q", 1.0, [len(g) - 1], category="pp", npu=added_npu)
        return g
    assert graph([3, None, 1], 7)._pieces(2) == [(False, graph([3, None, 1], 7)._npu)]   # small blocks
    monkeypatch.setattr(engine, "TASKS_PER_PIECE", 1)
    g = graph([3, None, 2 ** 53 - 1], 7)
    assert len(g._pieces(1)) == 7
    kinds = g.task_kinds()
    assert kinds[1] == ["compute", "dp", "io", "mp", "pp"]
    assert list(kinds[0]) == [1] + [0, 2, 3, 4] * 3
    assert list(kinds[2]) == [7] + [3, -1, 2 ** 53 - 1, 7] * 3
    assert list(graph([5, 5, 5], None).task_kinds()[2]) == [-1] + [5, 5, 5, -1] * 3   # one NPU per block
    assert graph([3, None, 2 ** 53], 7).task_kinds() is None      # a float would round it
    assert graph([3, None, True], 7).task_kinds() is None         # not an int
    assert graph([3, None, 1], 2 ** 53 + 1).task_kinds() is None  # a task added one by one
    assert graph([3, None, 1], -2).task_kinds() is None


def _same_blocks(a, b) -> None:
    """Two LayerBlocks with the same fields, column by column (value and type)."""
    for f in dataclasses.fields(a.block):
        x, y = getattr(a.block, f.name), getattr(b.block, f.name)
        assert type(x) is type(y) and x == y, f.name
    assert (a.last_compute, a.last, a.ends_with_mp, a.send_blocks, a.computes) == \
        (b.last_compute, b.last, b.ends_with_mp, b.send_blocks, b.computes)


@pytest.mark.parametrize("blocking", [False, True])
def test_passes_made_by_columns_equal_the_layer_loop(blocking):
    """A pass whose every layer has MP is made by columns (PassColumns, StageEngine's
    _mp_pass_block): Transformer-17B's four passes on Fred-D (with and without their sends,
    blocking or not) are the blocks the layer-by-layer loop makes of the same layers, field by
    field, the transfer entries numbered in the same order; hand-made runs too -- one layer,
    and layers whose MP time objects alternate (entries numbered as first seen), where each
    task depends on the one before it and the send on the last task and, blocking, the last
    compute task."""
    from types import SimpleNamespace
    from sysmodel.compute_timing import compute_timer
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import PassColumns, PassSkeleton, StageEngine, _StationaryPipeline
    from sysmodel.training import comm_timer, link_priority
    plan = plan_iteration(P, get_workload("transformer-17b"), None)

    def pipeline():
        eng = StageEngine(blocking=blocking, **link_priority(P, "fred-d"))
        return _StationaryPipeline(eng, plan, compute_timer(plan), comm_timer(plan, "fred-d"))

    def as_tuples(run):   # the per-layer tuples the loop takes
        return [(name, run.on_compute, s, src, run.npu, run.on_mp, mp)
                for name, src, s, mp in zip(run.names, run.sources, run.compute_s, run.mp)]

    by_columns, by_loop = pipeline(), pipeline()
    for key in ((0, "F", 0), (1, "F", 1), (1, "B", 1), (0, "B", 0)):
        run = by_columns._run_fields(*key)
        assert type(run) is PassColumns and len(run.names) == len(plan.virtual_stages[key[2]])   # 41 and 39
        again = by_loop._run_fields(*key)   # the same fields from another pipeline's timers
        assert (again.names, again.compute_s, again.on_compute, again.on_mp, again.npu) == \
            (run.names, run.compute_s, run.on_compute, run.on_mp, run.npu)
        assert [(s[0], id(s[1]), s[2]) for s in again.sources] == [(s[0], id(s[1]), s[2]) for s in run.sources]
        for send in (None, by_columns._block_send(key[0], key[2], key[1])):
            made = by_columns.eng.layer_block(run, send)
            _same_blocks(made, by_loop.eng.layer_block(as_tuples(run), send))
    assert [tuple(map(id, e)) for e in by_columns.eng.entries] == [tuple(map(id, e)) for e in by_loop.eng.entries]

    def mp(seconds):
        return SimpleNamespace(time_s=seconds, loads=np.array([1.0, 0.0]), bw=np.array([2.0, 2.0]))
    a, b = mp(0.5), mp(0.25)
    send = ("send", "s0.pp", mp(0.125), 7, True)
    for mps in ([a], [a, b, a, b, b], [b, a]):
        skeleton = PassSkeleton.of([f"l{k}" for k in range(len(mps))], [("layer", k, False) for k in range(len(mps))],
                                   range(len(mps)))
        run = PassColumns(skeleton, [float(k) for k in range(len(mps))], mps, "s0.compute", "s0.mp", 7)
        one, other = StageEngine(blocking=blocking), StageEngine(blocking=blocking)
        made = one.layer_block(run, send)
        _same_blocks(made, other.layer_block(as_tuples(run), send))
        assert [tuple(map(id, e)) for e in one.entries] == [tuple(map(id, e)) for e in other.entries]
        assert len(one.entries) == len({id(m) for m in mps}) + 1
        tasks = 2 * len(mps)
        # each task after the one before it, named twice; the send after the last task and,
        # blocking (the send's own flag), the last compute task
        assert list(made.block.deps) == [k for k in range(tasks - 1) for _ in (0, 1)] + [tasks - 1, tasks - 2]
        assert made.block.queues == [("s0.compute", range(0, tasks, 2) if tasks > 2 else [0]),
                                     ("s0.mp", range(1, tasks + 1, 2) if tasks > 2 else [1]),
                                     ("s0.pp", [tasks])]
