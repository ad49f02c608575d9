"""The per-cycle probe of a preemption on the packet fabric (studies/preemption_trace.py;
docs/fabric_validation.md, "Drains along a path"): the reduction of a trace to per-switch
events on a hand-written trace, and, in Amaranth's simulator (``-m full``), the mechanism the
model's further-on cost rests on: an online lower class keeps the L2 draining, an in-switch
one has stalled there."""

from __future__ import annotations

import pytest

from hdl.contracts.fabric import fabric_spec
from hdl.contracts.fabric_partition import uplinks
from hdl.contracts.packet import VC
from hdl.designs.switch.control_unit import CUState
from studies.preemption_trace import switch_events, trace_case, uplink_timeline

MP, DP = int(VC.MP), int(VC.DP)
RUN, DRAIN, SELECT = int(CUState.RUN), int(CUState.DRAIN), int(CUState.SELECT)


def test_switch_events_reads_waits_drains_and_the_lower_flits_arriving():
    """A hand-written trace of the 6-NPU Fred-D (three L1s, one L2): L1.1 sees MP waiting at
    cycle 1, drains 2 cycles, selects, and starts it at 5; the L2 sees it at 4 and starts it
    at 5 without a drain; 3 DP flits enter the L2 over its uplinks in cycles 1-3."""
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1)
    ends = uplinks(spec)
    into_l2 = [e.name for e in ends if e.sink == spec.l1_count]
    idle = (RUN, DP, 0)
    l1 = [idle, (RUN, DP, 1 << MP), (DRAIN, DP, 1 << MP), (DRAIN, DP, 1 << MP), (SELECT, DP, 1 << MP),
          (RUN, MP, 0), (RUN, MP, 0)]
    l2 = [idle, idle, idle, idle, (SELECT, DP, 1 << MP), (RUN, MP, 0), (RUN, MP, 0)]
    cycles = []
    for c in range(len(l1)):
        up = {e.name: None for e in ends}
        if 1 <= c <= 3:
            up[into_l2[c % len(into_l2)]] = DP
        cycles.append({"sw": [idle, l1[c], idle, l2[c]], "up": up})
    events = switch_events({"spec": spec, "cycles": cycles, "uplinks": ends})
    assert [e["first_wait"] for e in events] == [None, 1, None, 4]
    assert events[1] == {"switch": "switch_l1_1", "first_wait": 1, "drain": 2, "running": 5,
                         "low_flits_in": 0}
    assert events[3]["drain"] == 0 and events[3]["running"] == 5
    assert events[3]["low_flits_in"] == 3


def _l2(events):
    return next(e for e in events if e["switch"].startswith("switch_l2") and e["first_wait"] is not None)


@pytest.mark.full
def test_an_online_dp_ring_keeps_the_l2_draining_after_the_l1s_switched():
    """6-NPU Fred-A, DP ring of NPUs 1, 2, 4 (online unicasts) under MP 3 <-> 5 from cycle 200:
    MP's header reaches the L2 only after L1.1 / L1.2 selected MP, and the L2 still serves DP
    then (measured: DRAIN 11 cycles; alone 1)."""
    trace = trace_case("fred-a", "mp-under-dp", size=40, load_size=400, delay=200,
                       npus=6, npus_per_l1=2)
    assert trace["run"].errors == []
    events = switch_events(trace)
    l1s = [e for e in events[:3] if e["first_wait"] is not None]
    l2 = _l2(events)
    assert l2["first_wait"] > max(e["running"] for e in l1s)     # the drains come in sequence
    assert l2["drain"] > 2
    assert l2["low_flits_in"] > 0


@pytest.mark.full
def test_an_in_switch_dp_all_reduce_has_stalled_at_the_l2_when_mp_arrives():
    """6-NPU Fred-D (one uplink port), DP in-switch all-reduce: the L1s drain, and the L2,
    whose reduction lost two of its three L1s' operands, selects MP without a drain beyond
    the select's own cycle (measured: DRAIN 1, as alone)."""
    trace = trace_case("fred-d", "mp-under-dp", size=40, load_size=400, delay=200,
                       npus=6, npus_per_l1=2, uplink_ports=1)
    assert trace["run"].errors == []
    events = switch_events(trace)
    assert all(e["drain"] > 2 for e in events[:3] if e["first_wait"] is not None)
    assert _l2(events)["drain"] <= 1


def test_the_timeline_shows_each_links_vc_and_leaves_idle_links_out():
    """Hand-written: one uplink carries DP, DP, idle, MP; the others nothing."""
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1)
    ends = uplinks(spec)
    idle = (RUN, DP, 0)
    busy = ends[0].name
    vcs = [DP, DP, None, MP, None, None, None]
    cycles = [{"sw": [idle] * 4, "up": {e.name: (v if e.name == busy else None) for e in ends}}
              for v in vcs]
    trace = {"spec": spec, "cycles": cycles, "uplinks": ends}
    assert uplink_timeline(trace, 5) == {busy: "dd.M."}
    assert uplink_timeline(trace, 0) == {}


@pytest.mark.full
def test_a_pausing_mp_ring_preempts_again_at_each_switch_of_its_path():
    """Paper-size Fred-C, mp-dp-pp at 40 flits (docs/fabric_validation.md, under the concurrent
    block): the MP ring of NPUs 5 and 9 pauses between its two steps (each NPU waits for its
    partner's chunk) and its packets end at the chunk end, so the switches of its path serve
    DP and PP in the pause and MP preempts them again: more preemptions on MP's path (L1.1,
    L1.2, the L2 plane 1) than its three switches (measured: 4; 1 before the chunk-end cut),
    and MP later than alone."""
    loaded = trace_case("fred-c", "mp-dp-pp", size=40, load_size=400, delay=0)
    alone = trace_case("fred-c", "mp-dp-pp", size=40, load_size=400, delay=0, alone="mp")
    assert loaded["run"].errors == [] and alone["run"].errors == []

    def mp_end(trace):
        done = [e["done_cycle"] for e in trace["run"].engines]
        mp = next(c for c in trace["classes"] if c.name == "mp")
        return max(done[r] for coll in mp.request.collectives for r in coll.ranks)

    path = [1, 2, loaded["spec"].l1_count + 1]
    preemptions = [loaded["run"].switches[s]["preemptions"] for s in path]
    assert sum(preemptions) > len(path), preemptions
    assert mp_end(loaded) > mp_end(alone) + 20
