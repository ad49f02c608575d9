"""A graph template used on another network (sysmodel/graph_template.py, "On another network")
is the graph a fresh build adds on that network, and is refused where it would not be.

Both sides are computed in the test: a template built on the paper's platform, copied onto a
platform with other link rates, latencies, efficiencies and switch timing, against the graph
built from scratch on that platform. The comparison covers everything the compiled loop reads
(:class:`sysmodel.engine_compiled.GraphArrays`) and every task's fields, exactly.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from hdl.contracts.placement import parse_strategy
from sysmodel import graph_template
from sysmodel.comm_timing import CommTime
from sysmodel.engine import preempt_per_link
from sysmodel.compute_timing import compute_timer
from sysmodel.graph_template import GraphTemplate, network_free_key, structure_key
from sysmodel.iteration_plan import plan_iteration
from sysmodel.model_cache import ModelCache, current, using
from sysmodel.platform import default_platform
from sysmodel.task_graphs import StageEngine
from sysmodel.training import build_task_graph, comm_timer, link_priority, simulate_iteration
from sysmodel.workloads import WORKLOADS
from sysmodel.workload_file import get_workload

P = default_platform()


def random_network(rng: random.Random):
    """The paper's platform with other link rates, latencies, efficiencies and switch timing
    (its network_spec), the rest unchanged."""
    sw = P.switch
    return dataclasses.replace(
        P, npu_send_gbps=P.npu_send_gbps * rng.uniform(0.2, 5),
        npu_recv_gbps=P.npu_recv_gbps * rng.uniform(0.2, 5), io_gbps=P.io_gbps * rng.uniform(0.2, 5),
        mesh_link_gbps=P.mesh_link_gbps * rng.uniform(0.2, 5),
        link_latency_ns=P.link_latency_ns * rng.uniform(0.2, 5), link_efficiency=rng.uniform(0.4, 1.0),
        switch=dataclasses.replace(sw, preemption_cycles=sw.preemption_cycles * rng.uniform(0, 4) + rng.uniform(0, 50),
                                  first_flit_latency_cycles=sw.first_flit_latency_cycles * rng.uniform(0.5, 3)))


def build(platform, fabric, workload, strategy=None, overlap=True):
    """(the engine a fresh build gives, its communication timer) for ``platform``."""
    eng = StageEngine(blocking=not overlap, **link_priority(platform, fabric))
    plan = plan_iteration(platform, workload, strategy)
    return eng, build_task_graph(eng, plan, fabric), plan


def on_network(template: GraphTemplate, platform, fabric, workload, strategy=None):
    plan = plan_iteration(platform, workload, strategy)
    comm = comm_timer(plan, fabric)
    eng = template.on_network(compute_timer(plan), comm, link_priority(platform, fabric), plan)
    return eng, comm


def assert_same_graph(copied, fresh):
    """Every array the compiled loop reads and every task's fields, exactly equal."""
    a, b = copied.arrays(), fresh.arrays()
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name
    for s, t in zip(copied.tasks, fresh.tasks, strict=True):
        assert (s.name, s.resource, s.duration, s.deps, s.category, s.npu) == \
            (t.name, t.resource, t.duration, t.deps, t.category, t.npu)
        for field in ("loads", "bw"):
            u, v = getattr(s, field), getattr(t, field)
            assert (u is None) == (v is None) and (u is None or np.array_equal(u, v))


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("fabric, overlap", [("fred-d", True), ("fred-d", False), ("mesh", True)])
def test_a_template_on_random_networks_equals_a_fresh_build(workload, fabric, overlap):
    """Each preset: the template built on the paper's network, copied onto three random
    networks, is the graph built there, with the same configuration load."""
    w = get_workload(workload)
    eng, comm, plan = build(P, fabric, w, overlap=overlap)
    template = GraphTemplate(eng, comm.config_load_s(), comm, plan)
    rng = random.Random(f"{workload} {fabric} {overlap}")
    for _ in range(3):
        q = random_network(rng)
        copied, new_comm = on_network(template, q, fabric, w)
        assert copied is not None
        fresh, fresh_comm, _ = build(q, fabric, w, overlap=overlap)
        assert_same_graph(copied, fresh)
        assert new_comm.config_load_s() == fresh_comm.config_load_s()
        # preemptions cost what they cost on q's network (one cost per link; none on the mesh)
        want = preempt_per_link(link_priority(q, fabric).get("preempt_s", 0.0), copied.arrays().n_links)
        assert np.array_equal(copied.arrays().preempt_s, want) and (len(want) > 0) == (fabric != "mesh")


def test_a_transfer_no_timer_key_gave_makes_the_template_unusable_elsewhere():
    """A communication task whose link loads the timer did not give (here a timed task scaled
    by a builder) cannot be re-timed on another network: None (the caller builds)."""
    w = get_workload("transformer-17b")
    eng, comm, plan = build(P, "fred-d", w)
    assert GraphTemplate(eng, comm.config_load_s(), comm, plan)._comm_trace() is not None
    eng, comm, plan = build(P, "fred-d", w)     # a template seals its graph: the task goes on a new one
    timed = next(t for t in comm.timed().values() if t.loads is not None)
    eng.add("scaled", "io.in", timed * 2, category="io")
    copied, _ = on_network(GraphTemplate(eng, comm.config_load_s(), comm, plan), random_network(random.Random(1)),
                           "fred-d", w)
    assert copied is None


def test_a_template_is_refused_where_a_time_changes_sign():
    """Where a communication task that took time takes none on the new network (so the builder
    would not add its MP task), the template is stale for it: None."""
    w = get_workload("transformer-17b")
    eng, comm, plan = build(P, "fred-d", w)
    template = GraphTemplate(eng, comm.config_load_s(), comm, plan)
    new = comm_timer(plan, "fred-d")
    new.mp = lambda layer, stage, backward=False, recompute="none": new._memoised(
        ("mp", stage, plan.microbatch_samples * (layer.out_bytes or layer.in_bytes),
         layer.mp_allreduces * (new.mp_backward_factor(recompute) if backward else 1.0)),
        lambda: CommTime(0.0, np.zeros(4), np.ones(4)), ("mp", (layer, stage, backward, recompute)))
    assert template.on_network(compute_timer(plan), new, {}, plan) is None
    assert template.on_network(compute_timer(plan), comm_timer(plan, "fred-d"), {}, plan) is not None


def test_a_template_is_refused_for_another_plan():
    """The plan is made from the whole platform: where another network's plan has other stages
    or microbatches, the template built for the first plan is not used (None), even though
    every communication time would keep its sign."""
    w = get_workload("transformer-17b")
    eng, comm, plan = build(P, "fred-d", w, parse_strategy("MP4-DP2-PP2"))
    template = GraphTemplate(eng, comm.config_load_s(), comm, plan)
    other = dataclasses.replace(plan, microbatches=plan.microbatches + 1)
    assert template.on_network(compute_timer(plan), comm_timer(plan, "fred-d"), {}, other) is None
    assert template.on_network(compute_timer(plan), comm_timer(plan, "fred-d"), {}, plan) is not None
    assert GraphTemplate(eng, comm.config_load_s(), comm).on_network(
        compute_timer(plan), comm_timer(plan, "fred-d"), {}, plan) is None   # no plan recorded


def test_the_comparison_fails_on_a_stale_template():
    """The identity check above can fail: a template of another strategy (another structure)
    forced onto a plan is not the plan's fresh graph."""
    w = get_workload("transformer-17b")
    eng, comm, plan = build(P, "fred-d", w, parse_strategy("MP4-DP4-PP1"))
    template = GraphTemplate(eng, comm.config_load_s(), comm, plan)
    q = random_network(random.Random(2))
    stale, _ = on_network(template, q, "fred-d", w, parse_strategy("MP4-DP4-PP1"))
    fresh, _, _ = build(q, "fred-d", w, parse_strategy("MP2-DP8-PP1"))
    with pytest.raises(AssertionError):
        assert_same_graph(stale, fresh)


def test_the_network_free_key_drops_only_the_network():
    """Platforms that differ in their network share the key; another training policy, fabric or
    overlap policy does not; it never equals a structure key."""
    w = get_workload("transformer-17b")
    q = random_network(random.Random(3))
    args = (w, None, "1f1b", None, None, True)
    assert network_free_key(q, "fred-d", *args) == network_free_key(P, "fred-d", *args)
    assert structure_key(q, "fred-d", *args) != structure_key(P, "fred-d", *args)
    assert network_free_key(dataclasses.replace(P, dp_bucket_elements=1e6), "fred-d", *args) != \
        network_free_key(P, "fred-d", *args)
    assert network_free_key(P, "fred-b", *args) != network_free_key(P, "fred-d", *args)
    assert network_free_key(P, "fred-d", *args) != structure_key(P, "fred-d", *args)


def test_simulate_iteration_uses_the_template_on_another_network_and_equals_a_fresh_one():
    """Through simulate_iteration: after the paper's platform, another network's iteration
    comes from the template (kept then under its own structure key) and equals the result
    with no template at all, bit for bit."""
    w = get_workload("gpt-3")
    current().graph_templates.clear()
    simulate_iteration(P, "fred-d", w)
    q = random_network(random.Random(4))
    key = structure_key(q, "fred-d", w, None, "1f1b", None, None, True)
    assert graph_template.lookup(key) is None
    copied = simulate_iteration(q, "fred-d", w)
    assert graph_template.lookup(key) is not None
    current().graph_templates.clear()
    fresh = simulate_iteration(q, "fred-d", w)
    assert (copied.time_s, copied.breakdown, copied.comm_busy, copied.config_load_s, copied.tasks) == \
        (fresh.time_s, fresh.breakdown, fresh.comm_busy, fresh.config_load_s, fresh.tasks)


def test_usable_needs_a_source_on_every_compute_task():
    """GraphTemplate.usable: a graph can be re-timed only if every task on a compute resource
    records its compute source; tasks elsewhere need none."""
    from sysmodel.engine import Engine
    layer = get_workload("transformer-17b").layers[0]
    eng = Engine()
    eng.add("f", "s0.compute", 1.0, source=("layer", layer, False))
    eng.add("send", "s0.pp", 1.0, [0], category="pp")
    assert GraphTemplate.usable(eng)
    eng.add("opt", "s1.compute", 1.0, [1])
    assert not GraphTemplate.usable(eng)


def test_a_stored_template_that_cannot_be_retimed_is_not_looked_up():
    """A graph is stored as a template whether or not it can be re-timed (the check costs
    about 3 % of an evaluation whose graph is never asked for again); lookup asks
    GraphTemplate.reusable and returns None for a graph with a compute task without its
    source, the template of a graph with every source."""
    from sysmodel.engine import Engine
    layer = get_workload("transformer-17b").layers[0]
    whole, part = Engine(), Engine()
    for eng in (whole, part):
        eng.add("f", "s0.compute", 1.0, source=("layer", layer, False))
    part.add("opt", "s0.compute", 1.0, [0])
    with using(ModelCache()):
        kept = GraphTemplate(whole, 0.0)
        graph_template.store(("whole",), kept)
        graph_template.store(("part",), GraphTemplate(part, 0.0))
        assert graph_template.lookup(("whole",)) is kept
        assert graph_template.lookup(("part",)) is None
        assert ("part",) in current().graph_templates   # stored, not looked up


@pytest.mark.parametrize("workload", ["transformer-17b", "gpt-3"])
def test_layers_of_one_shape_are_one_source_and_the_retimed_graph_equals_a_fresh_build(workload, monkeypatch):
    """GraphTemplate._sources numbers layers of one shape (equal but for their names) as one
    source, timed by the first of them: a transformer's blocks give one source per (shape,
    pass), not one per layer, and layers of other shapes stay apart (the count is that of the
    distinct shapes by value). Re-timed at another compute speed (GraphTemplate._durations,
    which asks the timer once per source), every task's duration equals a fresh build's at
    that speed, bit for bit."""
    from sysmodel.workloads import layer_shape
    wl = get_workload(workload)
    eng, _, plan = build(P, "fred-d", wl)
    template = GraphTemplate(eng, plan)
    code, distinct = template._sources()
    layers = [src for src in eng.sources if src is not None and src[0] == "layer"]
    by_layer = {(id(src[1]), *src[2:]) for src in layers}          # pass and recomputation
    by_shape = {(layer_shape(src[1]), *src[2:]) for src in layers}
    assert len(by_shape) < len(by_layer)                      # blocks of one shape exist
    assert sum(src[0] == "layer" for src in distinct) == len(by_shape)
    for task, c in enumerate(code.tolist()):                  # each task's source is its shape and pass
        if c >= 0 and distinct[c][0] == "layer":
            src = eng.sources[task]
            assert layer_shape(src[1]) is layer_shape(distinct[c][1]) and src[2:] == distinct[c][2:]
    faster = P.with_compute_scale(1.7)
    fresh, _, fresh_plan = build(faster, "fred-d", wl)
    timer = compute_timer(fresh_plan)
    asked = []
    layer_s = type(timer).layer_s
    monkeypatch.setattr(type(timer), "layer_s", lambda self, layer, *, backward, recompute: (
        asked.append(layer), layer_s(self, layer, backward=backward, recompute=recompute))[1])
    retimed = template._durations(timer)
    assert len(asked) == len(by_shape)
    assert retimed.tobytes() == fresh.arrays().duration.tobytes()
    assert not np.array_equal(retimed, eng.arrays().duration)          # the speed changed them


def test_a_relinked_run_with_an_earlier_runs_values_takes_its_times_and_any_change_runs_again(monkeypatch):
    """A sealed graph relinked onto values a relinked run had before -- every duration, entry
    load and bandwidth, preemption cost and shared phase equal bit for bit, in other arrays --
    takes that run's times from the model cache (``engine_runs``) without the compiled loop;
    one duration a ulp longer, one load changed, a bandwidth changed, or other preemption costs
    run the loop again, and every run equals the same relinked graph run with empty caches."""
    from sysmodel import engine_compiled
    from sysmodel.model_cache import ModelCache, using
    w = get_workload("transformer-17b")
    eng, comm, plan = build(P, "fred-d", w)
    template = GraphTemplate(eng, comm.config_load_s(), comm, plan)
    graph = template.engine
    loops = []
    real = engine_compiled.run_arrays
    monkeypatch.setattr(engine_compiled, "run_arrays", lambda arrays: loops.append(1) or real(arrays))

    def relinked(duration, entries, preempt, shared):
        return graph.relinked(duration.copy(), [(l.copy(), b.copy()) for l, b in entries],
                              preempt.copy() if isinstance(preempt, np.ndarray) else preempt,
                              None if shared is None else shared.copy())

    def fresh_run(duration, entries, preempt, shared):
        with using(ModelCache()):
            return relinked(duration, entries, preempt, shared).run()

    with using(ModelCache()) as cache:
        first, _ = on_network(template, random_network(random.Random(7)), "fred-d", w)
        base = (first.arrays().duration, first.entries, first.preempt_s, first.shared_phase)
        first.run()
        assert len(loops) == 1 and len(cache.engine_runs) == 1
        again = relinked(*base)
        ran = again.run()
        assert len(loops) == 1                      # the times were found, not run again
        want = fresh_run(*base)
        assert ran.makespan == want.makespan
        assert again.timeline().start == want.engine.timeline().start
        assert again.timeline().end == want.engine.timeline().end
        duration, entries, preempt, shared = base
        longer = duration.copy()
        longer[len(longer) // 2] = np.nextafter(longer[len(longer) // 2], np.inf)
        loads = [(l, b) for l, b in entries]
        loads[0] = (loads[0][0] * 1.5, loads[0][1])
        rates = [(l, b * 0.5) for l, b in entries]
        cheaper = np.asarray(preempt) * 0.5 if np.ndim(preempt) else float(preempt) * 0.5 + 1e-9
        changed = [(longer, entries, preempt, shared), (duration, loads, preempt, shared),
                   (duration, rates, preempt, shared), (duration, entries, cheaper, shared)]
        for k, values in enumerate(changed):
            before = len(loops)
            run = relinked(*values).run()
            assert len(loops) == before + 1, k     # another value: the loop runs
            assert run.makespan == fresh_run(*values).makespan, k
            assert run.engine.timeline().end == fresh_run(*values).engine.timeline().end, k


def test_only_a_sealed_graph_relinked_without_a_hold_keeps_its_runs():
    """An unsealed graph may still change under a key naming it, and a hold is a function (not
    a value): relinked from either, the engine runs the loop and keeps nothing."""
    from sysmodel.model_cache import ModelCache, using
    w = get_workload("resnet-152")
    eng, comm, plan = build(P, "fred-d", w)
    assert not eng.sealed
    copied, _ = on_network(GraphTemplate(eng, comm.config_load_s(), comm, plan), P, "fred-d", w)
    args = (copied.arrays().duration, copied.entries, copied.preempt_s, copied.shared_phase)
    with using(ModelCache()) as cache:
        eng2, _, _ = build(P, "fred-d", w)           # unsealed
        eng2.relinked(*args).run()
        assert len(cache.engine_runs) == 0
        copied.run()
        assert len(cache.engine_runs) == 1           # the template's graph is sealed

