"""A pass's block shape (everything but its durations and entries) is kept by what it is made of.

``StageEngine._pass_block_shape`` keeps, per (pass skeleton, compute and MP resources, NPU,
the send's name, resource, NPU and whether it blocks), a pass's names, categories, NPUs,
sources, dependencies and queues; ``_mp_pass_block`` makes only the durations and entries per
call. These tests pin that a block made through a kept shape is the block the layer-by-layer
loop makes (the path the columns replace), that each key input alone gives its own shape (a
key missing an input fails here) and that the kept shape holds no duration or entry. Both
sides of every comparison are computed in the test.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.model_cache import ModelCache, current, using
from sysmodel.task_graphs import PassColumns, PassSkeleton, StageEngine
from tests.sysmodel.test_sysmodel_speed_identity import _same_blocks


def _mp(seconds, link=0):
    """An MP time object as the engine reads it: its time, link loads and bandwidths."""
    loads = np.zeros(3)
    loads[link] = 1.0
    return SimpleNamespace(time_s=seconds, loads=loads, bw=np.array([2.0, 2.0, 2.0]))


def _skeleton(names):
    return PassSkeleton.of(list(names), [("layer", k, False) for k in range(len(names))], range(len(names)))


def _loop_block(run, send, blocking):
    """The block the layer-by-layer loop (StageEngine.layer_block on per-layer tuples) makes
    of ``run`` in a new engine, and that engine's entries."""
    eng = StageEngine(blocking=blocking)
    tuples = [(name, run.on_compute, s, src, run.npu, run.on_mp, mp)
              for name, src, s, mp in zip(run.names, run.sources, run.compute_s, run.mp)]
    return eng.layer_block(tuples, send), eng.entries


def _made(run, send, blocking):
    eng = StageEngine(blocking=blocking)
    return eng.layer_block(run, send), eng.entries


def _check(run, send, blocking):
    made, entries = _made(run, send, blocking)
    loop, loop_entries = _loop_block(run, send, blocking)
    _same_blocks(made, loop)
    assert [tuple(map(id, e)) for e in entries] == [tuple(map(id, e)) for e in loop_entries]
    return made


a, b = _mp(0.5), _mp(0.25, link=1)
RUN = PassColumns(_skeleton(["l0", "l1", "l2", "l3"]), [1.0, 2.0, 3.0, 4.0], [a, b, a, b], "s0.compute", "s0.mp", 7)
SEND = ("send", "s0.pp", _mp(0.125, link=2), 7, False)


@pytest.mark.parametrize("blocking", [False, True])
@pytest.mark.parametrize("send", [None, SEND, SEND[:4] + (True,)])
def test_a_kept_shape_gives_the_block_the_layer_loop_makes(blocking, send):
    """The first block made keeps its shape (one entry, no durations or entries in it); a
    block made through the kept shape in another engine is the loop's block field by field,
    its entries numbered in the same order (the layers' first seen first, then the send's)."""
    with using(ModelCache()) as cache:
        first = _check(RUN, send, blocking)
        assert len(cache.pass_block_shapes) == 1
        (kept,) = cache.pass_block_shapes.values()
        assert len(kept.block.duration) == 0 and len(kept.block.entry) == 0
        again = _check(RUN, send, blocking)   # through the kept shape
        assert len(cache.pass_block_shapes) == 1
        assert again.block.names is first.block.names and again.block.deps is first.block.deps
        # other durations and MP time objects, the same shape: found, and the loop's block
        other = PassColumns(RUN.skeleton, [5.0, 6.0, 7.0, 8.0], [b, b, a, _mp(0.75)], "s0.compute", "s0.mp", 7)
        made = _check(other, send, blocking)
        assert len(cache.pass_block_shapes) == 1
        assert list(made.block.duration[:8]) == [5.0, 0.25, 6.0, 0.25, 7.0, 0.5, 8.0, 0.75]
        assert list(made.block.entry[1:8:2]) == [0, 0, 1, 2]


def test_each_key_input_gives_its_own_shape():
    """With the base pass's shape kept, change each input alone -- the skeleton (a layer
    renamed, one layer fewer), the compute resource, the MP resource, the NPU, the send's name,
    resource, NPU and blocking flag, the engine's blocking (with a send that does not block by
    itself), no send -- and the block is the loop's for the changed pass, from a shape of its
    own; repeating the base hits."""
    def run(skeleton=RUN.skeleton, on_compute="s0.compute", on_mp="s0.mp", npu=7):
        mps = RUN.mp[:len(skeleton.names)]
        return PassColumns(skeleton, RUN.compute_s[:len(mps)], mps, on_compute, on_mp, npu)

    changes = [
        (run(skeleton=_skeleton(["l0", "other", "l2", "l3"])), SEND, False),
        (run(skeleton=_skeleton(["l0", "l1", "l2"])), SEND, False),
        (run(on_compute="s1.compute"), SEND, False),
        (run(on_mp="s1.mp"), SEND, False),
        (run(npu=3), SEND, False),
        (run(), ("recv",) + SEND[1:], False),
        (run(), (SEND[0], "s1.pp") + SEND[2:], False),
        (run(), SEND[:3] + (9, False), False),
        (run(), SEND[:4] + (True,), False),
        (run(), None, False),
    ]
    with using(ModelCache()) as cache:
        _check(run(), SEND, False)
        for k, (changed, send, blocking) in enumerate(changes):
            _check(changed, send, blocking)
            assert len(cache.pass_block_shapes) == k + 2, k
        _check(run(), SEND, False)
        assert len(cache.pass_block_shapes) == len(changes) + 1
    # the engine's blocking enters as the send's flag it makes (add_transfer's rule): a blocking
    # engine with a send that does not block by itself is the shape of a blocking send
    with using(ModelCache()) as cache:
        _check(run(), SEND, False)
        _check(run(), SEND, True)
        assert len(cache.pass_block_shapes) == 2
        _check(run(), SEND[:4] + (True,), False)
        assert len(cache.pass_block_shapes) == 2


def test_graphs_reuse_their_pass_shapes_across_builds():
    """Transformer-17B on Fred-D built twice from an empty cache: the second build finds every
    pass's shape (no entry added) and its graph is the first's, column by column."""
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.platform import default_platform
    from sysmodel.training import build_task_graph, link_priority
    from sysmodel.workload_file import get_workload
    from tests.sysmodel.test_sysmodel_pass_skeleton import _columns
    platform = default_platform()
    plan = plan_iteration(platform, get_workload("transformer-17b"))

    def built():
        eng = StageEngine(blocking=False, **link_priority(platform, "fred-d"))
        build_task_graph(eng, plan, "fred-d")
        return eng
    with using(ModelCache()):
        fresh = built()
        kept = len(current().pass_block_shapes)
        assert kept == 4   # two stages' forward and backward passes
        again = built()
        assert len(current().pass_block_shapes) == kept
        assert _columns(again) == _columns(fresh)
