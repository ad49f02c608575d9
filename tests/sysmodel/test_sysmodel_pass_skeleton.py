"""A pass's skeleton (names, sources, shapes) is kept across evaluations by what it is made of.

``sysmodel.task_graphs.pass_skeleton`` keeps, per (workload, the pass's layer numbers,
backward), what the builder used to make per layer on every evaluation. These tests pin that
a kept skeleton is the one made afresh, that each key input changes it (a key missing an input
fails here), and that graphs built through kept skeletons are the graphs built with none kept.
No value is a stored snapshot: both sides are computed in the test.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sysmodel import graph_template
from sysmodel.model_cache import ModelCache, current, using
from sysmodel.platform import default_platform
from sysmodel.task_graphs import PassSkeleton, _made_pass_skeleton, pass_skeleton
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload
from sysmodel.workloads import Workload, layer_shape

P = default_platform()


def _by_hand(workload, layer_ids, backward, recompute="none") -> tuple:
    """The per-layer fields as the builder's loop made them before the skeleton: names,
    sources (tag, layer identity, backward, recomputation), and shape numbers in first-seen order."""
    layers = workload.layers
    number: dict = {}
    which = [number.setdefault(layer_shape(layers[li]), len(number)) for li in layer_ids]
    firsts = [next(li for li, k in zip(layer_ids, which) if k == n) for n in range(len(number))]
    return ([layers[li].name for li in layer_ids],
            [("layer", id(layers[li]), backward, recompute) for li in layer_ids], which, firsts)


def _fields(sk: PassSkeleton) -> tuple:
    return (list(sk.names), [(s[0], id(s[1]), *s[2:]) for s in sk.sources], list(sk.which), list(sk.firsts))


def test_a_kept_skeleton_is_the_one_made_by_hand():
    """Transformer-17B's passes (a stage's forward and backward), a ResNet-152 stretch (many
    shapes) and a one-layer pass: the kept skeleton's per-layer fields are what the loop made,
    and its task columns interleave each layer's compute and MP task."""
    t17, resnet = get_workload("transformer-17b"), get_workload("resnet-152")
    cases = [(t17, list(range(41)), False, "none"), (t17, list(reversed(range(41, 80))), True, "none"),
             (t17, list(reversed(range(41, 80))), True, "full"),
             (resnet, list(range(10, 52)), False, "none"), (resnet, [3], True, "selective")]
    with using(ModelCache()):
        for wl, ids, backward, recompute in cases:
            sk = pass_skeleton(wl, ids, backward, recompute)
            assert _fields(sk) == _by_hand(wl, ids, backward, recompute)
            assert pass_skeleton(wl, ids, backward, recompute) is sk   # kept
            assert sk.task_names[0::2] == sk.names
            assert sk.task_names[1::2] == tuple(n + " mp" for n in sk.names)
            assert sk.task_sources[0::2] == sk.sources and set(sk.task_sources[1::2]) == {None}
        # the transformer's blocks are one shape; the embedding and head are others
        assert len(pass_skeleton(t17, list(range(41)), False).firsts) < 5
        assert len(pass_skeleton(resnet, list(range(10, 52)), False).firsts) > 5


def test_each_key_input_gives_its_own_skeleton():
    """Change each input alone -- the layer numbers (one fewer, reversed), the direction, the
    backward's recomputation, the workload (another object with one layer renamed, and with one
    layer of another shape) -- and the skeleton is the one made afresh for it, not the first
    one (the recomputation's: not the backward's without it); equal inputs hit."""
    wl = get_workload("transformer-17b")
    ids = list(range(1, 30))
    layers = list(wl.layers)
    renamed = dataclasses.replace(wl, layers=tuple(
        dataclasses.replace(x, name="other") if i == 5 else x for i, x in enumerate(layers)))
    reshaped = dataclasses.replace(wl, layers=tuple(
        dataclasses.replace(x, params=x.params * 2) if i == 7 else x for i, x in enumerate(layers)))
    assert isinstance(renamed, Workload)
    with using(ModelCache()):
        first = pass_skeleton(wl, ids, False)
        backward = pass_skeleton(wl, ids, True)
        for args, other in (((wl, ids[:-1], False, "none"), first), ((wl, ids[::-1], False, "none"), first),
                            ((wl, ids, True, "none"), first), ((wl, ids, True, "full"), backward),
                            ((renamed, ids, False, "none"), first), ((reshaped, ids, False, "none"), first)):
            got = pass_skeleton(*args)
            assert _fields(got) == _fields(_made_pass_skeleton(args[0], tuple(args[1]), *args[2:]))
            assert _fields(got) != _fields(other), args[1:]
        assert pass_skeleton(wl, tuple(ids), False) is first            # a tuple or a list: one key
        assert len(current().pass_skeletons) == 7
    # what each change moved: a name, the sources' direction, a shape
    assert _fields(pass_skeleton(renamed, ids, False))[0][4] == "other"
    assert len(_made_pass_skeleton(reshaped, tuple(ids), False, "none").firsts) == len(first.firsts) + 1


def _source(src):
    """A task's source as compared: a layer by identity (the workload's own object), an
    optimizer step by its value."""
    return src if src is None or src[0] != "layer" else (src[0], id(src[1]), src[2])


def _columns(eng) -> tuple:
    """An engine's graph, column by column (values; layer sources by identity)."""
    a = eng.arrays()
    return (eng.names(), list(eng._category), list(eng._npu), a.duration.tobytes(), a.entry.tobytes(),
            a.dependents.tobytes(), a.dependents_ptr.tobytes(), a.queue.tobytes(), a.resource.tobytes(),
            sorted(eng.queues), [_source(s) for s in eng.sources],
            [(lo.tobytes(), bw.tobytes()) for lo, bw in eng.entries])   # each timer scales its own MP loads


def test_graphs_built_through_kept_skeletons_equal_graphs_built_without():
    """Transformer-17B on Fred-D (default, and on the mesh with PP 4) and ResNet-152 with PP 4 (no MP: its passes as per-layer tuples): the second
    build in a process reads every pass's skeleton from the cache; its graph and figures are
    those of a build with the skeletons cleared first, column by column and bit for bit."""
    from sysmodel.training import build_task_graph, link_priority
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from hdl.contracts.placement import parse_strategy
    cases = [("transformer-17b", "fred-d", None), ("transformer-17b", "mesh", "MP2-DP2-PP4"),
             ("resnet-152", "fred-d", "MP1-DP5-PP4")]
    for name, fabric, strategy in cases:
        wl = get_workload(name)
        plan = plan_iteration(P, wl, None if strategy is None else parse_strategy(strategy))

        def built():
            eng = StageEngine(blocking=False, **link_priority(P, fabric))
            build_task_graph(eng, plan, fabric)
            return eng
        current().pass_skeletons.clear()
        fresh = built()
        kept_before = len(current().pass_skeletons)
        assert kept_before > 0
        again = built()
        assert len(current().pass_skeletons) == kept_before   # every pass found
        assert _columns(again) == _columns(fresh)
        graph_template.clear()
        one = simulate_iteration(P, fabric, wl, strategy=plan.strategy)
        current().pass_skeletons.clear()
        graph_template.clear()
        other = simulate_iteration(P, fabric, wl, strategy=plan.strategy)
        assert (one.time_s, one.breakdown, one.tasks) == (other.time_s, other.breakdown, other.tasks)
        assert np.isfinite(one.time_s) and one.tasks == len(fresh)
