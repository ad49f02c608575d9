"""A preemption costs the drain of the switches where it happens (sysmodel/preemption.py,
docs/sysmodel.md "Preemption"): hand-computed cases on both engine loops, the per-link costs of
the RTL fabrics' platforms from the measured figures, and the characterization's
``preemption_points`` (hdl/contracts/characterization.py)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from hdl.contracts.characterization import parse_characterization
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from sysmodel.collectives import build_network
from sysmodel.engine import Engine
from sysmodel.fabric_model import fabric_platform
from sysmodel.preemption import preemption_costs
from sysmodel.switch_phases import switch_links
from sysmodel.switch_timing import load_chiplet_timings, parse_characterization as timing_of
from sysmodel.switch_timing import shipped_characterization_path
from sysmodel.training import FRED_PRIORITY

BW = np.ones(3)


def _mp_after_dp(costs, *, dp_loads, mp_loads, reference):
    """DP from 0 on ``dp_loads`` (1 s alone), MP from 0.5 on ``mp_loads`` (1 s alone):
    (MP's end, DP's end)."""
    eng = Engine(priority=FRED_PRIORITY, preempt_s=costs)
    dp = eng.add("dp", "a.dp", 1.0, category="dp", loads=dp_loads, bw=BW)
    wait = eng.add("wait", "b.compute", 0.5)
    mp = eng.add("mp", "b.mp", 1.0, [wait], category="mp", loads=mp_loads, bw=BW)
    tasks = eng.run(reference=reference).tasks
    return tasks[mp].end, tasks[dp].end


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_preempted_on_a_path_of_two_switches_pays_the_larger_drain_where_it_meets_the_lower(reference):
    # links 0, 1, 2 cost 0.1, 0.3 and 0.7; MP uses 1 and 2, DP uses 0 and 1: they meet on link 1
    # only, so MP pays link 1's 0.3 -- not link 2's 0.7 (nothing to drain there)
    costs = np.array([0.1, 0.3, 0.7])
    mp_end, dp_end = _mp_after_dp(costs, dp_loads=np.array([1.0, 1.0, 0.0]),
                                  mp_loads=np.array([0.0, 1.0, 1.0]), reference=reference)
    assert mp_end == pytest.approx(0.5 + 1.0 + 0.3)
    assert dp_end == pytest.approx(2.0)          # stopped while MP crosses link 1 (1 s)
    # meeting on both links 0 and 1: the larger of the two, once (not their sum)
    mp_end, _ = _mp_after_dp(costs, dp_loads=np.array([1.0, 1.0, 0.0]),
                             mp_loads=np.array([1.0, 1.0, 0.0]), reference=reference)
    assert mp_end == pytest.approx(0.5 + 1.0 + 0.3)


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_alone_or_on_other_links_pays_nothing(reference):
    costs = np.array([0.1, 0.3, 0.7])
    eng = Engine(priority=FRED_PRIORITY, preempt_s=costs)
    mp = eng.add("mp", "b.mp", 1.0, category="mp", loads=np.array([0.0, 1.0, 1.0]), bw=BW)
    assert eng.run(reference=reference).tasks[mp].end == pytest.approx(1.0)
    mp_end, dp_end = _mp_after_dp(costs, dp_loads=np.array([1.0, 0.0, 0.0]),
                                  mp_loads=np.array([0.0, 1.0, 1.0]), reference=reference)
    assert (mp_end, dp_end) == pytest.approx((1.5, 1.0))


def _resumed(dp_loads, *, reference, costs=np.array([0.1, 0.3, 0.7])):
    """MP on link 0 (1 s alone), PP on links 0 and 1 (1 s alone) and DP on ``dp_loads`` (4 s
    alone), all from 0: PP waits behind MP on link 0 until 1 s, then resumes. (PP's end,
    DP's end)."""
    eng = Engine(priority=FRED_PRIORITY, preempt_s=costs)
    eng.add("mp", "a.mp", 1.0, category="mp", loads=np.array([1.0, 0.0, 0.0]), bw=BW)
    pp = eng.add("pp", "b.pp", 1.0, category="pp", loads=np.array([1.0, 1.0, 0.0]), bw=BW)
    dp = eng.add("dp", "c.dp", 4.0, category="dp", loads=dp_loads, bw=BW)
    tasks = eng.run(reference=reference).tasks
    return tasks[pp].end, tasks[dp].end


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_resuming_after_a_higher_class_preempts_the_lower_class_served_meanwhile(reference):
    # DP on link 1 is served while PP waits behind MP on link 0 (PP has no packet in flight);
    # at 1 s MP is done, PP resumes and preempts DP on link 1: link 1's 0.3 (0.7 of link 2,
    # which PP does not use, is not charged), as a transfer starting then would pay. No start
    # pays: the three start at one instant (nothing served yet)
    pp_end, dp_end = _resumed(np.array([0.0, 4.0, 0.0]), reference=reference)
    assert pp_end == pytest.approx(1.0 + 1.0 + 0.3)
    assert dp_end == pytest.approx(1.0 + 1.0 + 3.0)      # 1 s done, stopped while PP's bytes cross link 1
    # the lower class on a link PP does not use: nothing to preempt at the resumption
    pp_end, dp_end = _resumed(np.array([0.0, 0.0, 4.0]), reference=reference)
    assert (pp_end, dp_end) == pytest.approx((2.0, 4.0))


@pytest.mark.parametrize("reference", [False, True])
def test_a_lower_class_waiting_behind_the_same_higher_one_is_not_drained_at_the_resumption(reference):
    # DP on links 0 and 1 waits behind MP as PP does: at 1 s both resume at one instant, PP
    # first; DP had nothing in flight, so PP pays nothing (the model's Fred-C mp-dp-pp at 40
    # flits, where the RTL's drain at the next switch comes from per-switch timing the engine
    # does not have: docs/sysmodel.md, "Preemption at a resumption")
    pp_end, dp_end = _resumed(np.array([4.0, 4.0, 0.0]), reference=reference)
    assert pp_end == pytest.approx(2.0)
    assert dp_end == pytest.approx(2.0 + 4.0)


#: A chain of two switches as the engine sees them: link 0 into switch A (an L1), then per
#: switch its stored-phase and its default-phase pseudo-link (the default one sharing the
#: stored one's time): A = links 1, 2; B (further on, an L2) = links 3, 4
CHAIN_SHARED = np.array([-1, -1, 1, -1, 3])
A_DRAIN, B_DRAIN = 0.2, 0.3
#: first row: each switch's drain on its pseudo-links; further row: B's default phase costs
#: the drains along the path to it (sysmodel/preemption.py)
CHAIN_COSTS = np.array([[A_DRAIN, A_DRAIN, A_DRAIN, B_DRAIN, B_DRAIN],
                        [0.0, 0.0, 0.0, 0.0, A_DRAIN + B_DRAIN]])
ONLINE = np.array([1.0, 0.0, 1.0, 0.0, 1.0])     # holds each switch's default phase
STORED = np.array([1.0, 1.0, 0.0, 1.0, 0.0])     # holds each switch's stored phase


def _chain(dp_loads, mp_loads, *, reference, costs=CHAIN_COSTS):
    """DP from 0 (1 s alone), MP from 0.5 (1 s alone) on the chain: MP's end."""
    eng = Engine(priority=FRED_PRIORITY, preempt_s=costs, shared_phase=CHAIN_SHARED)
    bw = np.ones(5)
    eng.add("dp", "a.dp", 1.0, category="dp", loads=dp_loads, bw=bw)
    wait = eng.add("wait", "b.compute", 0.5)
    mp = eng.add("mp", "b.mp", 1.0, [wait], category="mp", loads=mp_loads, bw=bw)
    return eng.run(reference=reference).tasks[mp].end


@pytest.mark.parametrize("reference", [False, True])
def test_drains_along_a_chain_add_where_the_lower_class_still_flows_further_on(reference):
    """Hand-computed: the lower class routed online keeps flowing at B (packets from inputs
    the preempting one does not cross), so B drains after A: 0.2 + 0.3; whichever phase the
    preempting transfer holds there."""
    for mp_loads in (ONLINE, STORED):
        assert _chain(ONLINE, mp_loads, reference=reference) == pytest.approx(0.5 + 1.0 + A_DRAIN + B_DRAIN)


@pytest.mark.parametrize("reference", [False, True])
def test_a_lower_class_stalled_further_on_costs_the_largest_drain_once(reference):
    """Hand-computed: the lower class in a stored phase at B (an in-switch reduction fed by the
    switches that already drained) has stalled there: the largest drain, 0.3, once; and the
    further-on row alone (the first row zero) charges nothing for it."""
    for mp_loads in (ONLINE, STORED):
        assert _chain(STORED, mp_loads, reference=reference) == pytest.approx(0.5 + 1.0 + B_DRAIN)
    only_further = CHAIN_COSTS * np.array([[0.0], [1.0]])
    assert _chain(STORED, ONLINE, reference=reference, costs=only_further) == pytest.approx(1.5)
    assert _chain(ONLINE, ONLINE, reference=reference, costs=only_further) == pytest.approx(
        1.5 + A_DRAIN + B_DRAIN)


def test_preemption_rows_are_checked():
    with pytest.raises(FredError, match="two rows"):
        Engine(priority=FRED_PRIORITY, preempt_s=np.zeros((3, 5)))
    with pytest.raises(FredError, match="preempt_s must be"):
        Engine(priority=FRED_PRIORITY, preempt_s=-CHAIN_COSTS)


def test_fred_a_l2_default_phase_costs_both_drains_with_their_half_rate_tails():
    """Fred-A (Fred_3(5) int32 at both levels, drain 8; one half-rate uplink port): the L2's
    default phase costs the L1's 8 + 8 (a packet's tail on the half-rate uplink) plus the
    L2's 8 + 8 (the same on its half-rate down links): 32 cycles; its first-row costs stay."""
    plat = fabric_platform(fabric_spec("fred-a"), switch="packet")[0]
    net = build_network(plat, "fred-a")
    nodes, _, _ = switch_links(net)
    first, further = preemption_costs(plat, net)
    cycle_s = plat.switch_at("l1").cycle_s
    assert {net.switch_timing(n).preemption_cycles for n in nodes} == {8}
    l2 = len(net.link_bw) + len(nodes) + nodes.index(net.l2_node)
    assert np.flatnonzero(further).tolist() == [l2]
    assert further[l2] / cycle_s == pytest.approx(8 + 8 + 8 + 8)
    assert first[l2] / cycle_s == pytest.approx(8)


@pytest.mark.parametrize("fabric, over", [("fred-a", 8 + 8 + 8 + 8), ("fred-c", 10 + 8), ("fred-d", 10)])
def test_mp_under_dp_pays_the_drains_where_dp_still_flows(fabric, over):
    """The model's side of the concurrent case (MP 40 flits from cycle 200 under the DP
    all-reduce): MP's latency is its time alone plus the preemption, hand-computed from the
    measured drains. Fred-A/C route DP online (it keeps flowing at the L2: the L1's drain, then
    the L2's, with the half-rate tails on Fred-A); Fred-D's DP is an in-switch all-reduce,
    stalled at the L2 once the L1s drained: the largest drain once (the L1's 10)."""
    from studies.concurrent_case import build_concurrent_case
    case = build_concurrent_case(fabric=fabric, scenario="mp-under-dp", size=40, load_size=4000,
                                 delay=200)
    mp = case.model[[c.name for c in case.classes].index("mp")]
    assert mp["latency"] - mp["alone"] == pytest.approx(over)


def test_per_link_costs_must_cover_the_links_and_be_non_negative():
    eng = Engine(priority=FRED_PRIORITY, preempt_s=np.array([0.1, 0.2]))
    eng.add("mp", "b.mp", 1.0, category="mp", loads=np.array([0.0, 1.0, 1.0]), bw=BW)
    with pytest.raises(FredError, match="a cost for 2 links; the transfers load 3"):
        eng.run()
    with pytest.raises(FredError, match="preempt_s must be"):
        Engine(priority=FRED_PRIORITY, preempt_s=np.array([0.1, -0.2]))


def _document():
    return json.loads(shipped_characterization_path().read_text())


def test_the_shipped_file_measures_the_preemption_on_every_switch_the_fabrics_build():
    doc = parse_characterization(_document())
    for name in ("fred-a", "fred-b", "fred-c", "fred-d"):
        spec = fabric_spec(name)
        for ports in (spec.l1_ports, spec.l2_plane_ports):
            figures = doc.preemption_at(ports=ports, middle=spec.middle, dtype=spec.dtype)
            assert figures is not None, (name, ports)
            # the busy reconfiguration is the idle one plus a drain of at least the datapath
            assert figures["reconfiguration_cycles_busy"] - figures["reconfiguration_cycles_idle"] \
                >= figures["latency_cycles"] - 1


def test_each_level_of_fred_d_times_a_preemption_with_its_own_switch():
    """Fred-D: L1 Fred_3(8) int32, L2 planes Fred_3(5) int32, each timed by its own measured
    drain (busy - idle reconfiguration), not by the reference point's Fred_3(8) fp16."""
    doc = parse_characterization(_document())
    plat = fabric_platform(fabric_spec("fred-d"), switch="packet")[0]
    net = build_network(plat, "fred-d")
    nodes, _, _ = switch_links(net)
    costs = preemption_costs(plat, net)
    cycle_s = plat.switch_at("l1").cycle_s
    for level, ports in (("l1", 8), ("l2", 5)):
        f = doc.preemption_at(ports=ports, middle=3, dtype="int32")
        timing = plat.switch_at(level)
        assert timing.preemption_design == f"Fred_3({ports}) int32"
        assert timing.preemption_cycles == f["reconfiguration_cycles_busy"] - f["reconfiguration_cycles_idle"]
    drains = {n: net.switch_timing(n).preemption_cycles for n in nodes}
    first, further = costs
    # each switch's two pseudo-links (stored phases, default phase) cost its drain
    assert first[len(net.link_bw):] / cycle_s == pytest.approx([drains[n] for n in nodes] * 2)
    # every L1-L2 link (4 flits per cycle) costs the larger drain of its two switches
    for link, (src, dst) in enumerate(zip(net.link_src, net.link_dst)):
        if src in drains and dst in drains:
            assert first[link] / cycle_s == pytest.approx(max(drains[src], drains[dst]))
    # further on: the L2's default phase costs the drains along the path to it, an L1's 10
    # then the L2's 8 (full-rate links: no packet tail); nothing else
    l2 = len(net.link_bw) + len(nodes) + nodes.index(net.l2_node)
    assert np.flatnonzero(further).tolist() == [l2]
    assert further[l2] / cycle_s == pytest.approx(10 + 8)


def test_a_half_rate_link_adds_a_packet_in_flight_at_half_rate():
    """Fred-B's one uplink port runs at half the rate: DP's packet in flight there crosses it in
    2 x 8 cycles instead of 8, so a preemption on it costs the drain plus 8 cycles."""
    plat = fabric_platform(fabric_spec("fred-b"), switch="packet")[0]
    net = build_network(plat, "fred-b")
    costs = preemption_costs(plat, net)
    l1 = plat.switch_at("l1")
    kinds = net.node_kind
    uplinks = [k for k, (s, d) in enumerate(zip(net.link_src, net.link_dst))
               if kinds[s] == "switch" and kinds[d] == "switch"]
    assert uplinks
    for link in uplinks:
        assert net.link_bw[link] == pytest.approx(l1.flit_bytes * l1.clock_mhz * 1e6 / 2)
        assert costs[0][link] / l1.cycle_s == pytest.approx(l1.preemption_cycles + 8)


def test_a_design_without_its_own_preemption_takes_the_reference_points_and_says_so():
    doc = _document()
    doc["packet_switch"]["preemption_points"] = {}
    path_free = timing_of(doc)
    ref = doc["packet_switch"]
    assert path_free.preemption_cycles == ref["reconfiguration_cycles_busy"] - ref["reconfiguration_cycles_idle"]
    assert path_free.preemption_design == "Fred_3(8) fp16"


def test_preemption_points_are_checked(tmp_path):
    doc = _document()
    points = doc["packet_switch"]["preemption_points"]
    name = next(iter(points))
    bad = copy.deepcopy(doc)
    bad["packet_switch"]["preemption_points"]["P99m3int32"] = points[name]
    with pytest.raises(FredError, match="the key must be that name"):
        parse_characterization(bad)
    bad = copy.deepcopy(doc)
    entry = bad["packet_switch"]["preemption_points"][name]
    entry["reconfiguration_cycles_busy"] = entry["reconfiguration_cycles_idle"] - 1
    with pytest.raises(FredError, match="below reconfiguration_cycles_idle"):
        parse_characterization(bad)
    bad = copy.deepcopy(doc)
    del bad["packet_switch"]["preemption_points"][name]["reconfiguration_cycles_idle"]
    with pytest.raises(FredError, match="reconfiguration_cycles_idle"):
        parse_characterization(bad)
    # a chiplet timing whose design has no preemption point of its own: the reference's
    path = tmp_path / "c.json"
    del doc["packet_switch"]["preemption_points"]["P8m3int32"]
    path.write_text(json.dumps(doc))
    timing = load_chiplet_timings({"l1": {"ports": 8, "middle": 3, "dtype": "int32"}}, path)["l1"]
    assert timing.preemption_design == "Fred_3(8) fp16"
