"""The engine's arrays made faster without changing them (docs/sysmodel.md, Speed, thirty-first
increment): the dependents' CSR by one compiled counting sort (``engine_compiled.dependents_csr``)
against the numpy sort it replaces, and an appended block's category and NPU codes kept across
graphs (model cache ``block_codes``) against the codes made task by task. Both sides are
computed in the test."""

from __future__ import annotations

import numpy as np
import pytest

from sysmodel import engine
from sysmodel.engine import Engine, TaskBlock
from sysmodel.engine_compiled import dependents_csr
from sysmodel.model_cache import ModelCache, Ref, using
from sysmodel.platform import default_platform
from sysmodel.workload_file import get_workload
from tests.sysmodel.test_sysmodel_speed_identity import _codes_without_segments

P = default_platform()


def _sorted_dependents(counts: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What Engine.arrays computed before: a stable argsort of the dependencies by what they
    name, the task numbers repeated per dependency, a bincount and a cumsum."""
    n = len(counts)
    order = np.argsort(flat, kind="stable")
    dependents = np.repeat(np.arange(n, dtype=np.int64), counts)[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat, minlength=n), out=ptr[1:])
    return ptr, dependents


def _t17b_graph():
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from sysmodel.training import build_task_graph, link_priority
    eng = StageEngine(blocking=False, **link_priority(P, "fred-d"))
    build_task_graph(eng, plan_iteration(P, get_workload("transformer-17b"), None), "fred-d")
    return eng


def test_dependents_counting_sort_equals_the_stable_sort():
    """dependents_csr gives the stable sort's CSR, value and type, on random graphs (no
    dependencies, duplicates, a task named by many, empty graphs) and on Transformer-17B's
    graph (Engine.arrays' own fields); a dependency naming no task, or counts that do not add
    up, raise rather than read or write out of bounds."""
    rng = np.random.default_rng(23)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        counts = rng.integers(0, 5, n).astype(np.int64)
        if n:
            counts[0] = 0
        flat = np.concatenate([np.zeros(0, dtype=np.int64)]
                              + [rng.integers(0, t, c) for t, c in enumerate(counts) if t]).astype(np.int64)
        if trial % 7 == 0 and n > 2:
            flat[:] = 0                       # one task every other waits for, duplicates too
        ptr, dependents = dependents_csr(counts, flat)
        want_ptr, want = _sorted_dependents(counts, flat)
        assert ptr.dtype == dependents.dtype == np.int64
        assert np.array_equal(ptr, want_ptr) and np.array_equal(dependents, want), trial
    eng = _t17b_graph()
    g = eng.arrays()
    counts, flat = np.array(eng._dep_count, dtype=np.int64), np.array(eng._dep_flat, dtype=np.int64)
    want_ptr, want = _sorted_dependents(counts, flat)
    assert len(flat) > len(counts) > 2000
    assert np.array_equal(g.dependents_ptr, want_ptr) and np.array_equal(g.dependents, want)
    for counts, flat in (([0, 1], [2]), ([0, 1], [-1]), ([0, 2], [0]), ([0, 1], [0, 0])):
        with pytest.raises(ValueError, match="internal"):
            dependents_csr(np.array(counts, dtype=np.int64), np.array(flat, dtype=np.int64))


def _codes_task_by_task(eng):
    """``eng``'s task_kinds() made from its columns alone (no block segments, no kept codes)."""
    return _codes_without_segments(eng)[0]


def test_t17b_block_codes_are_kept_and_found_by_the_next_graph():
    """Transformer-17B's graph built twice from an empty model cache: the first keeps one entry
    per distinct block category and NPU tuple (the kept pass shapes'), the second finds them all
    and adds none; both graphs' codes equal those made task by task. The kept arrays are read
    only, the graph's own writable."""
    with using(ModelCache()) as cache:
        memo = cache.block_codes
        first = _t17b_graph()
        kinds = first.task_kinds()
        distinct = {id(s[1]) for s in first._segments} | {id(s[2]) for s in first._segments}
        assert len(memo) == len(distinct) >= 4
        for key, value in memo.items():
            assert type(key) is Ref and type(key.obj) is tuple
            arrays = value[1] if type(value) is tuple else value
            assert not arrays.flags.writeable
        second = _t17b_graph()
        again = second.task_kinds()
        assert len(memo) == len(distinct)   # found, not made again
    want = _codes_task_by_task(first)
    for got in (kinds, again):
        assert got[1] == want[1] == ["compute", "dp", "mp", "pp"]
        for a, b in ((got[0], want[0]), (got[2], want[2])):
            assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
        assert got[2].flags.writeable


def _graph(categories, npus, blocks: int = 3, added=("dp", 7)):
    """Blocks of three tasks (``categories``, ``npus``: their columns, made into tuples once per
    graph) between tasks added one by one (category and NPU ``added``), coded block by block."""
    g = Engine()
    block = TaskBlock.typed(("a", "b", "c"), [1.0] * 3, categories, npus, [-1] * 3, [None] * 3,
                            [1, 1], [0, 1], [("r", [0, 1, 2])])
    g.add("first", "r", 1.0, category=added[0], npu=added[1])
    for k in range(blocks):
        g._extend(block, f"{k} ", (len(g) - 1,))
        g.add(f"between {k}", "q", 1.0, [len(g) - 1], category=added[0], npu=added[1])
    return g, block


def test_each_block_tuple_has_its_own_codes_and_equal_ones_share_nothing(monkeypatch):
    """The key is the block's tuple itself: a tuple with one category or one NPU changed gets
    its own entry and its own codes; an equal tuple that is another object gets an entry of its
    own with equal codes; codes are renumbered among each graph's categories (a block's 'mp'
    is 3 in one graph, 2 in another); an NPU tuple that cannot be coded is kept as such and
    gives None each time; the memo stays within its bound. Every graph's codes equal those made
    task by task."""
    monkeypatch.setattr(engine, "TASKS_PER_PIECE", 1)   # small blocks coded block by block
    with using(ModelCache()) as cache:
        memo = cache.block_codes

        def coded(categories, npus, added=("dp", 7)):
            g, block = _graph(categories, npus, added=added)
            kinds = g.task_kinds()
            want = _codes_task_by_task(g)
            if want is None:
                assert kinds is None
            else:
                assert kinds[1] == want[1]
                assert np.array_equal(kinds[0], want[0]) and np.array_equal(kinds[2], want[2])
            return kinds, block

        base, block = coded(["compute", "io", "mp"], [3, None, 1])
        assert len(memo) == 2 and Ref(block.category) in memo and Ref(block.npu) in memo
        assert list(base[0]) == [1] + [0, 2, 3, 1] * 3
        other, _ = coded(["compute", "io", "pp"], [3, None, 1])              # a category changed
        assert len(memo) == 4 and list(other[0]) == [1] + [0, 2, 3, 1] * 3 and other[1][3] == "pp"
        npus, _ = coded(["compute", "io", "mp"], [3, 4, 1])                   # an NPU changed
        assert len(memo) == 6 and list(npus[2]) == [7] + [3, 4, 1, 7] * 3
        equal, eq_block = coded(["compute", "io", "mp"], [3, None, 1])        # equal, other tuples
        assert len(memo) == 8 and eq_block.category is not block.category
        assert all(np.array_equal(a, b) for a, b in ((equal[0], base[0]), (equal[2], base[2])))
        renumbered, _ = coded(["compute", "io", "mp"], [3, None, 1], added=("a2a", 7))
        assert renumbered[1] == ["a2a", "compute", "io", "mp"] and list(renumbered[0][1:5]) == [1, 2, 3, 0]
        g, block = _graph(["compute", "io", "mp"], [3, None, 2 ** 53])       # a float would round it
        assert g.task_kinds() is None and memo[Ref(block.npu)] is False
        g._kinds = None
        assert g.task_kinds() is None
        assert cache.CACHES["block_codes"][0] == memo.bound
        for _ in range(memo.bound // 2 + 5):
            _graph(["compute", "io", "mp"], [3, None, 1], blocks=1)[0].task_kinds()
            assert len(memo) <= memo.bound


def test_a_graph_of_one_block_gets_writable_codes_of_its_own(monkeypatch):
    """A graph that is one appended block: its NPU codes are a copy of the kept ones (writable,
    as a concatenation of pieces is), its category codes the graph's read-only column."""
    monkeypatch.setattr(engine, "TASKS_PER_PIECE", 1)
    with using(ModelCache()) as cache:
        g = Engine()
        block = TaskBlock.typed(("a", "b"), [1.0, 1.0], ["mp", "compute"], [2, 2], [-1, -1], [None] * 2,
                                [1], [0], [("r", [0, 1])])
        g._extend(block, "x ", ())
        code, names, npu = g.task_kinds()
        assert names == ["compute", "mp"] and list(code) == [1, 0] and list(npu) == [2, 2]
        assert g._pieces(2) == [(True, block.npu)]
        assert npu.flags.writeable and not cache.block_codes[Ref(block.npu)].flags.writeable
