"""An iteration plan's stages, microbatches and memory plan are kept by what they are made of.

``plan_iteration`` keeps (``iteration_shapes``) per (the platform's memory capacity and
optimizer bytes per parameter, the workload, strategy, schedule, samples, requested
microbatches and whether they are fixed) what ``interleaved_stages`` and the memory plan give,
and hands out copies. These tests pin that a kept plan is the one made afresh (the path it
replaces), that each key input alone gives its own entry and the result made for it, that a
platform differing only in what the plan does not read shares the entry, that a caller cannot
change a kept entry, and that errors are raised every time. Both sides are computed here.
"""

from __future__ import annotations

import dataclasses

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.iteration_plan import _fitting_microbatches, interleaved_stages, plan_iteration
from sysmodel.model_cache import ModelCache, using
from sysmodel.platform import default_platform
from sysmodel.workload_file import get_workload

P = default_platform()
T17 = get_workload("transformer-17b")


def _fields(plan) -> tuple:
    return (plan.stages, plan.virtual_stages, plan.microbatches, type(plan.microbatches),
            plan.requested_microbatches, plan.memory, plan.chunks, plan.samples_per_dp, plan.schedule,
            plan.strategy, plan.platform, plan.workload, plan.stages is plan.virtual_stages)


def _by_hand(platform, workload, strategy=None, *, schedule="1f1b", samples=None, microbatches=None):
    """What plan_iteration computed before its memo: the stages, then the fitting microbatches
    and memory plan."""
    strategy = strategy or workload.strategy
    samples = workload.samples_per_dp if samples is None else samples
    requested = microbatches or (workload.microbatches if strategy.pp > 1 else 1)
    chunks = workload.interleave if strategy.pp > 1 and workload.mode == "weight-stationary" else 1
    stages, virtual = interleaved_stages(workload, strategy.pp, chunks)
    m, memory = _fitting_microbatches(platform, workload, strategy, stages, samples, requested, schedule,
                                      fixed=bool(microbatches))
    return (stages, virtual, m, type(m), requested, memory, chunks, samples, schedule, strategy, platform,
            workload, stages is virtual)


def _plan(platform, workload, strategy=None, **kw):
    return plan_iteration(platform, workload, strategy, schedule=kw.get("schedule", "1f1b"),
                          samples_per_dp=kw.get("samples"), microbatches=kw.get("microbatches"))


CASES = [
    (P, T17, None, {}),
    (P, T17, parse_strategy("MP2-DP2-PP4"), {"schedule": "gpipe"}),
    (P, dataclasses.replace(T17, interleave=2), parse_strategy("MP2-DP2-PP4"), {}),
    (P, get_workload("gpt-3"), None, {}),
    (P, get_workload("resnet-152"), None, {"samples": 12, "microbatches": 3}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_kept_plan_is_the_one_made_afresh(case):
    """Made (a miss), then found (a hit): both are what the stages and memory plan give
    computed by hand -- stages, virtual stages (the same list without interleaving),
    microbatches, memory plan, chunks."""
    platform, workload, strategy, kw = CASES[case]
    with using(ModelCache()) as cache:
        made = _plan(platform, workload, strategy, **kw)
        assert len(cache.iteration_shapes) == 1
        found = _plan(platform, workload, strategy, **kw)
        assert len(cache.iteration_shapes) == 1
        expected = _by_hand(platform, workload, strategy, **kw)
        assert _fields(made) == expected and _fields(found) == expected


def test_each_key_input_gives_its_own_entry():
    """With Transformer-17B's default plan kept, change each input alone -- the memory
    capacity (low enough for full recomputation), the optimizer bytes per parameter, the
    workload (another object, one layer's weights doubled), the strategy, the schedule, the
    samples per replica, the microbatches (given, as an int and as True) -- and the plan
    is the one made for it by hand, from an entry of its own, and differs from the base."""
    heavier = dataclasses.replace(T17, layers=tuple(
        dataclasses.replace(x, params=x.params * 2) if i == 3 else x for i, x in enumerate(T17.layers)))
    changes = [
        ((dataclasses.replace(P, memory_capacity_gb=25.0), T17, None), {}),
        ((dataclasses.replace(P, optimizer_bytes_per_param=16), T17, None), {}),
        ((P, heavier, None), {}),
        ((P, T17, parse_strategy("MP3-DP6-PP1")), {}),
        ((P, T17, None), {"schedule": "gpipe"}),
        ((P, T17, None), {"samples": 32}),
        ((P, T17, None), {"microbatches": 4}),
        ((P, T17, None), {"microbatches": True}),   # a bool is an int equal to 1: its own entry
    ]
    with using(ModelCache()) as cache:
        base = _fields(_plan(P, T17))
        for k, (args, kw) in enumerate(changes):
            got = _fields(_plan(*args, **kw))
            assert got == _by_hand(*args, **kw), k
            assert got != base, k
            assert len(cache.iteration_shapes) == k + 2, k
        assert _fields(_plan(P, T17)) == base and len(cache.iteration_shapes) == len(changes) + 1
    # what the changes moved: full recomputation; the count's type
    with using(ModelCache()):
        assert _plan(dataclasses.replace(P, memory_capacity_gb=25.0), T17).memory.strongest_recompute == "full"
        assert _plan(P, T17, microbatches=1).microbatches == 1
        assert _plan(P, T17, microbatches=True).microbatches is True


def test_a_platform_differing_elsewhere_shares_the_entry():
    """A platform with another compute efficiency (not read by the plan) finds the entry, and
    its plan holds that platform."""
    other = dataclasses.replace(P, compute_efficiency=P.compute_efficiency / 2)
    assert other != P
    with using(ModelCache()) as cache:
        _plan(P, T17)
        plan = _plan(other, T17)
        assert len(cache.iteration_shapes) == 1 and plan.platform is other
        assert _fields(plan) == _by_hand(other, T17)


def test_a_caller_cannot_change_a_kept_entry():
    """The stages, virtual stages and memory plan handed out are copies: changing them leaves
    the next plan as made."""
    strategy = parse_strategy("MP2-DP2-PP4")
    interleaved = dataclasses.replace(T17, interleave=2)
    with using(ModelCache()):
        for wl in (T17, interleaved):
            plan = _plan(P, wl, strategy)
            plan.stages[0].append(999)
            plan.virtual_stages[-1].clear()
            plan.memory.weights = -1.0
            assert _fields(_plan(P, wl, strategy)) == _by_hand(P, wl, strategy)


def test_errors_are_raised_every_time_and_not_kept():
    """A plan that fits nothing raises each time, naming what overflows; nothing is kept."""
    tiny = dataclasses.replace(P, memory_capacity_gb=1.0)
    with using(ModelCache()) as cache:
        for _ in range(2):
            with pytest.raises(FredError, match="does not fit in 1 GB per NPU"):
                _plan(tiny, T17)
        assert len(cache.iteration_shapes) == 0


def test_a_fixed_count_is_its_own_entry():
    """At 21 GB Transformer-17B's 8 microbatches do not fit and 16 do: asked for by default the
    plan falls back to 16 (kept); asked for as fixed, the same 8 raise and are not answered by
    the fallback's entry."""
    small = dataclasses.replace(P, memory_capacity_gb=21.0)
    with using(ModelCache()) as cache:
        plan = _plan(small, T17)
        assert (plan.requested_microbatches, plan.microbatches) == (8, 16)
        assert _fields(plan) == _by_hand(small, T17)
        with pytest.raises(FredError, match="stage 0 needs 21.5 GB even with activation recomputation"):
            _plan(small, T17, microbatches=8)
        assert len(cache.iteration_shapes) == 1


@pytest.mark.parametrize("bad", [4.0, "4", 2.5])
def test_a_microbatch_count_that_is_not_a_whole_number_is_refused(bad):
    """A count given as a float or a string is an error naming it (it was a TypeError from
    range() deep in the plan), and nothing is kept for it."""
    with using(ModelCache()) as cache:
        with pytest.raises(FredError, match=f"microbatches must be a whole number, got {bad!r}"):
            _plan(P, T17, microbatches=bad)
        assert len(cache.iteration_shapes) == 0
