"""The I/O chain plan's key (``collectives._io_chain_plan_key``) holds what the plan reads of the
network and nothing else (docs/sysmodel.md, Speed, "s15-dse"): networks that differ only in
what it leaves out have equal keys and, made apart in fresh caches, equal plans; a change of
anything it holds changes the key and the plan; and the traffic timed through a shared plan
equals a fresh cache's (the bytes' rows key on the stripe's wire bytes, which the plan's key
does not hold)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sysmodel import collectives as C
from sysmodel.collectives import Collective, build_network
from sysmodel.model_cache import ModelCache, using
from sysmodel.platform import default_platform

P = default_platform()
_ACROSS = (0, 5, 10, 15)                     # four L1s
_INSIDE = (4, 5, 6, 7)                       # one L1
CASES = [Collective(op, group, 1.0) for op in ("io-load", "io-store") for group in (_ACROSS, _INSIDE)]


def _plan(platform, fabric, c):
    """The plan made in a fresh cache, and its key."""
    with using(ModelCache()):
        net = build_network(platform, fabric)
        return C._io_chain_plan_key(net), C._io_chain_plan(net, c)


def _equal_plans(a, b) -> None:
    per_a, lat_a, rows_a, heads_a, layout_a = a
    per_b, lat_b, rows_b, heads_b, layout_b = b
    assert repr(per_a) == repr(per_b)
    assert lat_a == lat_b and heads_a == heads_b
    for x, y in zip(rows_a, rows_b):
        assert len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y))
    for x, y in zip(layout_a, layout_b):
        assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y)


def _in_switch_timing_only(platform):
    """``platform`` with its switches' in-switch timing and labels changed (phase select,
    configuration load, select copy, preemption, the source and design names), as Fred_2(P)
    and Fred_3(P) differ in the design-space grid."""
    def other(s):
        return None if s is None else replace(
            s, phase_switch_cycles=s.phase_switch_cycles * 3 + 7, config_load_cycles=s.config_load_cycles * 2 + 5,
            select_copy_cycles=11.0, preemption_cycles=13.0, source="another characterization",
            design="Fred_2(8) fp16")
    return replace(platform, switch=other(platform.switch), l2_switch=other(platform.l2_switch),
                   name="other", description="other")


@pytest.mark.parametrize("c", CASES, ids=[f"{c.op}-{c.group[1]}" for c in CASES])
@pytest.mark.parametrize("fabric", ["fred-a", "fred-c"])
def test_networks_that_differ_only_in_what_the_key_leaves_out_have_equal_plans(fabric, c):
    key, plan = _plan(P, fabric, c)
    for other, other_fabric in ((_in_switch_timing_only(P), fabric),
                                (replace(P, npu_send_gbps=P.npu_send_gbps / 2, io_gbps=P.io_gbps * 3,
                                         link_efficiency=0.8), fabric),
                                (P, "fred-c" if fabric == "fred-a" else "fred-a")):   # the L1-L2 rate
        other_key, other_plan = _plan(other, other_fabric, c)
        assert other_key == key
        _equal_plans(other_plan, plan)


def _changed(platform, what):
    if what == "first-flit latency":
        return replace(platform, switch=replace(platform.switch, first_flit_latency_cycles=platform.switch.first_flit_latency_cycles + 3))
    if what == "clock":
        return replace(platform, switch=replace(platform.switch, clock_mhz=platform.switch.clock_mhz / 2))
    if what == "link latency":
        return replace(platform, link_latency_ns=platform.link_latency_ns + 5)
    if what == "forwarding latency":
        return replace(platform, forward_latency_ns=platform.forward_latency_ns + 40)
    if what == "NPUs per L1":
        return replace(platform, npus_per_l1=platform.npus_per_l1 // 2)
    if what == "controllers":
        return replace(platform, io_controllers=platform.io_controllers - 4)
    raise AssertionError(what)


@pytest.mark.parametrize("what", ["first-flit latency", "clock", "link latency", "forwarding latency",
                                  "NPUs per L1", "controllers"])
def test_a_change_of_what_the_plan_reads_changes_the_key_and_the_plan(what):
    """Each of these is read by the plan (its routes, heads or latency change), so the key must
    hold it: equal keys here would hand one network the other's plan."""
    c = Collective("io-load", _ACROSS, 1.0)
    key, plan = _plan(P, "fred-c", c)
    other_key, other_plan = _plan(_changed(P, what), "fred-c", c)
    assert other_key != key
    assert (other_plan[1], other_plan[3]) != (plan[1], plan[3])      # latency and heads


def test_a_shared_plan_at_another_flit_equals_a_fresh_cache():
    """The flit is not in the plan's key (the plan reads no byte count) but the stripe's wire
    bytes round to it: the bytes' rows must not be shared across flits. A stripe that is not a
    whole number of flits, timed on one network and then on one with another flit in the same
    cache, equals the second timed in a fresh cache."""
    small = replace(P, switch=replace(P.switch, flit_bytes=P.switch.flit_bytes * 4),
                    l2_switch=replace(P.l2_switch, flit_bytes=P.switch.flit_bytes * 4))
    c = Collective("io-store", _ACROSS, 18 * (10 * P.switch.flit_bytes + 3))
    with using(ModelCache()) as cache:
        first = C.collective_traffic(build_network(P, "fred-c"), c)[1]
        shared = C.collective_traffic(build_network(small, "fred-c"), c)[1]
        assert len(cache.io_chain_plans) == 1 and len(cache.io_chain_rows) == 2
    with using(ModelCache()):
        fresh = C.collective_traffic(build_network(small, "fred-c"), c)[1]
    assert not np.array_equal(first.loads, fresh.loads)          # the flit matters to the bytes
    assert shared.loads.tobytes() == fresh.loads.tobytes() and shared.sent.tobytes() == fresh.sent.tobytes()
    assert shared.latency_s == fresh.latency_s


def test_one_plan_serves_two_switch_designs_and_each_times_as_a_fresh_cache():
    """The dse grid's case: a network and one differing only in in-switch timing share one
    plan in one cache, and each's traffic equals its own fresh cache's, field by field."""
    other = _in_switch_timing_only(P)
    with using(ModelCache()) as cache:
        got = [C.collective_traffic(build_network(p, "fred-a"), replace(c, size=3e6 + 5))[1]
               for p in (P, other) for c in CASES]
        assert len(cache.io_chain_plans) == len(CASES)
    for t, (p, c) in zip(got, [(p, c) for p in (P, other) for c in CASES]):
        with using(ModelCache()):
            fresh = C.collective_traffic(build_network(p, "fred-a"), replace(c, size=3e6 + 5))[1]
        assert t.loads.tobytes() == fresh.loads.tobytes() and t.sent.tobytes() == fresh.sent.tobytes()
        assert (t.latency_s, t.controller_flit_bytes) == (fresh.latency_s, fresh.controller_flit_bytes)
