"""The model's one cache owner (sysmodel/model_cache.py): keys are hashable values, so equal
platforms share entries, a section-keyed cache ignores the other sections, and clear() and a
fresh owner isolate a computation. Results are compared with what a fresh cache computes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from sysmodel.collectives import Collective, build_network, evaluate
from sysmodel.model_cache import FrozenDict, ModelCache, Ref, current, using
from sysmodel.platform import Platform, default_platform, load_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload

P = default_platform()


def test_platform_is_a_hashable_value():
    """Two platforms loaded separately are distinct objects, equal and of one hash; so are
    their sections; a changed field makes another value."""
    a, b = load_platform(), load_platform()
    assert a is not b and a == b and hash(a) == hash(b)
    assert a.network_spec == b.network_spec and hash(a.npu_compute) == hash(b.npu_compute)
    assert a.scaled(iterations=3) != a and hash(a.scaled(iterations=3)) != hash(a)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.npus = 1
    with pytest.raises(TypeError):
        a.variants["fred-x"] = a.variants["fred-d"]
    assert isinstance(a.variants, dict) and a.variants == dict(a.variants)


def test_every_platform_field_is_in_exactly_one_section():
    """A field a later change adds must be placed (the platform module checks it on import),
    so a cache keyed by a section cannot miss a field its result depends on."""
    from sysmodel.platform import _LABEL_FIELDS, _SECTIONS
    placed = [f for s in _SECTIONS.values() for f in s.__dataclass_fields__] + list(_LABEL_FIELDS)
    assert sorted(placed) == sorted(Platform.__dataclass_fields__)
    for attr, section in _SECTIONS.items():
        value = getattr(P, attr)
        assert all(getattr(value, f) == getattr(P, f) for f in section.__dataclass_fields__)


def test_equal_platforms_built_separately_share_a_cache_entry():
    w = get_workload("resnet-152")
    colls = (Collective("all-reduce", tuple(range(P.npus)), 1e8),)
    with using(ModelCache()) as cache:
        a, b = load_platform(), load_platform()
        result = evaluate(a, "fred-c", colls)
        assert evaluate(b, "fred-c", colls) is result
        assert build_network(a, "fred-c") is build_network(b, "fred-c")
        assert cache.sizes()["networks"] == 1 and cache.sizes()["collectives"] == 1
        from sysmodel.iteration_memo import simulate_once
        it = simulate_once(a, "fred-c", w)
        assert simulate_once(b, "fred-c", w) is it and len(cache.iterations) == 1


def test_a_compute_only_change_reuses_the_network_entry_not_the_compute_entry():
    """peak_tflops is a compute field: the scaled platform's iteration finds the network, the
    collective results and the task graph already made, but times its layers anew."""
    w = get_workload("transformer-17b")
    with using(ModelCache()) as cache:
        simulate_iteration(P, "fred-d", w)
        before = cache.sizes()
        fast = P.scaled(peak_tflops=P.peak_tflops * 2)
        assert fast.network_spec == P.network_spec and fast.npu_compute != P.npu_compute
        network = build_network(P, "fred-d")
        result = simulate_iteration(fast, "fred-d", w)
        after = cache.sizes()
        assert build_network(fast, "fred-d") is network
        assert after["networks"] == before["networks"]
        assert after["collectives"] == before["collectives"]
        assert after["graph_templates"] == before["graph_templates"]
        assert after["layer_times"] > before["layer_times"]      # new compute entries
    with using(ModelCache()):
        fresh = simulate_iteration(fast, "fred-d", w)
    assert fresh.time_s == result.time_s and fresh.breakdown == result.breakdown


def test_a_network_change_misses_the_network_entry():
    with using(ModelCache()) as cache:
        build_network(P, "fred-d")
        build_network(P.scaled(link_latency_ns=P.link_latency_ns + 1), "fred-d")
        assert len(cache.networks) == 2


def test_clear_empties_every_cache_and_using_restores_the_owner():
    outer = current()
    with using(ModelCache()) as cache:
        assert current() is cache
        default_platform()
        w = get_workload("resnet-152")
        from sysmodel.iteration_memo import simulate_once
        simulate_once(P, "fred-b", w)
        simulate_iteration(P.with_compute_scale(2), "fred-b", w)
        filled = {name for name, n in cache.sizes().items() if n}
        assert {"networks", "comm_times", "routing_phases", "iterations", "graph_templates",
                "resource_names", "workloads", "platforms", "transfer_entry_arrays"} <= filled
        cache.clear()
        assert not any(cache.sizes().values())
    assert current() is outer


def test_a_bounded_memo_is_emptied_when_full():
    cache = ModelCache()
    memo = cache.graph_templates
    for i in range(memo.bound):
        memo.put(i, i)
    assert len(memo) == memo.bound
    memo.put("one more", 0)
    assert len(memo) == 1


def test_a_keep_recent_memo_drops_only_its_oldest_entry_when_full():
    """ModelCache.KEEP_RECENT's memos (few, large entries whose hits come a few dozen entries
    later) drop the entry put first, one per new key; a full memo given a key it holds keeps
    every entry (of either kind)."""
    cache = ModelCache()
    memo = cache.engine_runs
    assert memo.keep_recent and "engine_runs" in ModelCache.KEEP_RECENT
    for i in range(memo.bound):
        memo.put(i, i)
    memo.put("one more", 0)
    assert len(memo) == memo.bound and 0 not in memo and 1 in memo and "one more" in memo
    memo.put("another", 0)
    assert len(memo) == memo.bound and 1 not in memo and 2 in memo
    memo.put(5, "again")                  # held already: nothing dropped
    assert len(memo) == memo.bound and 2 in memo and memo[5] == "again"
    emptied = cache.graph_templates
    assert not emptied.keep_recent
    for i in range(emptied.bound):
        emptied.put(i, i)
    emptied.put(3, "again")
    assert len(emptied) == emptied.bound


def test_keys_hold_what_they_name():
    """Ref: equal only to a Ref of the same object; FrozenDict and section hashes survive a
    trip to another process (the kept hash is not pickled)."""
    obj = [1]
    assert Ref(obj) == Ref(obj) and Ref(obj) != Ref([1]) and hash(Ref(obj)) == id(obj)
    table = FrozenDict({"l1": {"ports": 12}})
    assert isinstance(table["l1"], FrozenDict) and hash(table) == hash(FrozenDict({"l1": {"ports": 12}}))
    hash(P.network_spec)
    copy = pickle.loads(pickle.dumps(P))
    assert copy == P and "_hash" not in copy.network_spec.__dict__ and hash(copy) == hash(P)
