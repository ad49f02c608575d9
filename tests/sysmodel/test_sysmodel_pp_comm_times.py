"""A pipeline hand-over's timing shared across communication timers (model cache
``pp_comm_times``, ``CommTimer.pp``) equals the reference timer's fresh timing, and its key
holds every input the hand-over reads: changing one alone gives a new entry and that input's
own timing, never the first one's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hdl.contracts.placement import parse_strategy
from sysmodel.comm_timing import CommTimer
from sysmodel.model_cache import ModelCache, using
from sysmodel.platform import default_platform

P = default_platform()


def fresh(platform, fabric, strategy, src, dst, nbytes):
    """The reference timer's hand-over (every collective made and timed anew) and the
    configurations it adds."""
    with using(ModelCache()):
        timer = CommTimer(platform, fabric, strategy, 1.0, memo=False)
        return timer.pp(src, dst, nbytes), timer.configurations


def assert_same(shared, reference):
    assert shared.time_s == reference.time_s
    if reference.loads is None:
        assert shared.loads is None and shared.bw is None
    else:
        assert np.array_equal(shared.loads, reference.loads) and np.array_equal(shared.bw, reference.bw)


BASE = dict(platform=dataclasses.replace(P, pp_scatter_gather=True), fabric="fred-d",
            strategy=parse_strategy("MP2-DP2-PP4"), src=1, dst=2, nbytes=3e6)
#: each input of the hand-over changed alone (the network through a link rate)
CHANGES = [
    ("network", dict(platform=dataclasses.replace(BASE["platform"], npu_send_gbps=P.npu_send_gbps / 2))),
    ("fabric", dict(fabric="mesh")),
    ("scatter-gather", dict(platform=P)),
    ("strategy", dict(strategy=parse_strategy("MP4-DP1-PP4"))),
    ("source", dict(src=0)),
    ("destination", dict(dst=3)),
    ("bytes", dict(nbytes=5e6)),
]


def test_each_input_changed_alone_gets_its_own_entry_and_timing():
    """A key missing any input would find the first hand-over's entry: the entry count would
    not grow and (where the input matters to the figure) the time would be the first one's."""
    with using(ModelCache()) as cache:
        first = CommTimer(**{k: BASE[k] for k in ("platform", "fabric", "strategy")},
                          microbatch_samples=1.0).pp(BASE["src"], BASE["dst"], BASE["nbytes"])
        assert len(cache.pp_comm_times) == 1
        for n, (what, change) in enumerate(CHANGES, start=2):
            case = {**BASE, **change}
            timer = CommTimer(case["platform"], case["fabric"], case["strategy"], 1.0)
            got = timer.pp(case["src"], case["dst"], case["nbytes"])
            assert len(cache.pp_comm_times) == n, what
            reference, configurations = fresh(**case)
            assert_same(got, reference)
            assert timer.configurations == configurations, what
    # the figures move with the inputs that change them here, so a stale entry would show
    base_time = fresh(**BASE)[0].time_s
    for what in ("network", "fabric", "scatter-gather", "strategy", "bytes"):
        case = {**BASE, **dict(CHANGES)[what]}
        assert fresh(**case)[0].time_s != base_time, what


@pytest.mark.parametrize("fabric", ["fred-d", "mesh"])
@pytest.mark.parametrize("scatter_gather", [True, False])
def test_hand_over_shared_across_timers_equals_the_reference(fabric, scatter_gather):
    """Every hand-over of a PP 4 pipeline, asked of a first and a second timer: the second gets
    the first's very object and configurations; both equal the reference timer's; a timer with
    another compute speed (the same network) shares it too."""
    platform = dataclasses.replace(P, pp_scatter_gather=scatter_gather)
    strategy = parse_strategy("MP2-DP2-PP4")
    pairs = [(s, d) for s in range(4) for d in range(4) if s != d]
    with using(ModelCache()) as cache:
        timers = [CommTimer(platform, fabric, strategy, 1.0),
                  CommTimer(platform, fabric, strategy, 1.0),
                  CommTimer(platform.with_compute_scale(2), fabric, strategy, 1.0)]
        first = {(s, d): timers[0].pp(s, d, 2e6) for s, d in pairs}
        for timer in timers[1:]:
            for (s, d), got in first.items():
                assert timer.pp(s, d, 2e6) is got
            assert timer.configurations == timers[0].configurations
        assert len(cache.pp_comm_times) == len(pairs)
        # the reference timer keeps no shared entry
        CommTimer(platform, fabric, strategy, 1.0, memo=False).pp(0, 1, 2e6)
        assert len(cache.pp_comm_times) == len(pairs)
    reference = CommTimer(platform, fabric, strategy, 1.0, memo=False)
    with using(ModelCache()):
        for (s, d), got in first.items():
            assert_same(got, reference.pp(s, d, 2e6))
    assert timers[0].configurations == reference.configurations
    if fabric == "fred-d" and not scatter_gather:
        assert reference.configurations   # the in-switch multicasts store phases: compared above
