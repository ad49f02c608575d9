"""The model's side of concurrent traffic classes (studies/concurrent_case.py): the model's
own priority engine (MP > PP > DP on shared links, each preemption the measured drain of the
switches where it happens, sysmodel/preemption.py) on the packet fabric's platform, hand-computed on Fred-B
where every class shares the one half-rate uplink; ``fred fabric-sim --concurrent``."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from studies.concurrent_case import build_concurrent_case, scenario_classes
from sysmodel.fabric_model import fabric_platform


def test_mp_under_dp_on_fred_b_pays_one_preemption_and_delays_dp_by_its_link_time():
    case = build_concurrent_case(fabric="fred-b", scenario="mp-under-dp", size=40,
                                 load_size=400, delay=100)
    dp, mp = case.model
    plat = fabric_platform(case.spec, switch="packet")[0]
    l1, l2 = plat.switch_at("l1"), plat.switch_at("l2")       # both Fred_3(5) int32 on Fred-B
    # MP starts while DP holds the uplinks it needs: its time alone plus one preemption, the
    # switches' drain (sysmodel/preemption.py) plus what DP's packet in flight on the half-rate
    # uplink adds to it: 8 flits in 16 cycles instead of 8
    preempt = max(l1.preemption_cycles, l2.preemption_cycles) + l1.preemption_packet_flits * (2 - 1)
    assert l1.preemption_cycles > 0 and l1.preemption_packet_flits == 8
    assert mp["latency"] == pytest.approx(mp["alone"] + preempt)
    # DP is stopped while MP's 40 flits cross the half-rate uplink (80 cycles), and after them
    # until MP's last packet has left the switches (docs/sysmodel.md, "A switch held per
    # switch"): MP's in-switch tree passes its L1s last on the way down, NPU link, L1, uplink,
    # L2, down link, L1 (1 + 9 + 1 + 9 + 1 + 9 = 30 cycles) after its head, so its bytes'
    # end plus 30; the model charges MP's drain at its end, so that moves by it too
    cycle = l1.cycle_s
    tree = (2 * l1.packet_latency_s + l2.packet_latency_s + plat.link_latency_s
            + 2 * plat.l1_l2_latency_s) / cycle
    assert tree == pytest.approx(30)
    assert dp["cycles"] == pytest.approx(dp["alone"] + 2 * 40 + tree + preempt)
    # sharing the uplink fairly instead: MP slower than with priority
    assert mp["fair"] > mp["latency"]


def test_scenarios_place_the_classes_on_disjoint_npus_sharing_the_dp_uplink():
    spec = fabric_spec("fred-d")
    mp, dp, pp = scenario_classes(spec, "mp-dp-pp", size=8, load_size=16)
    assert dp.request.collectives[0].members == (1, 4, 8, 12, 16)
    assert mp.request.collectives[0].members == (5, 9)
    assert (pp.request.collectives[0].root, pp.request.collectives[0].members) == (2, (6, 10))
    assert [c.kind for c in (mp, dp, pp)] == ["mp", "dp", "pp"]
    with pytest.raises(FredError, match="--delay applies to mp-under-dp"):
        scenario_classes(spec, "mp-dp-pp", size=8, load_size=16, delay=5)
    with pytest.raises(FredError, match="unknown scenario"):
        scenario_classes(spec, "all-at-once", size=8, load_size=16)


def test_on_fred_d_dp_waits_at_the_switches_mp_crosses_although_their_links_have_room():
    # Fred-D's L1-L2 connection carries both classes at once, but a switch serves one phase
    # at a time (sysmodel/switch_phases.py): DP stops while MP's 400 flits cross (1 flit per
    # cycle on an NPU link), and MP pays one preemption over its time alone
    case = build_concurrent_case(fabric="fred-d", scenario="mp-under-dp", size=400,
                                 load_size=400, delay=100)
    dp, mp = case.model
    plat = fabric_platform(case.spec, switch="packet")[0]
    # the larger drain of the switches where MP meets DP: the L1s' Fred_3(8) int32 and the L2
    # plane's Fred_3(5) int32 (the L1-L2 links carry 4 flits per cycle: no slow link)
    preempt = max(plat.switch_at("l1").preemption_cycles, plat.switch_at("l2").preemption_cycles)
    assert mp["latency"] == pytest.approx(mp["alone"] + preempt)
    # ... and after MP's bytes until its last packet has left the switches (its tree's down
    # pass leaves the L1s last: NPU link, L1, uplink, L2, down link, L1 after its head; MP's
    # drain, charged at its end, moves that by it too: docs/sysmodel.md, "A switch held per
    # switch")
    l1, l2 = plat.switch_at("l1"), plat.switch_at("l2")
    tree = (2 * l1.packet_latency_s + l2.packet_latency_s + plat.link_latency_s
            + 2 * plat.l1_l2_latency_s) / l1.cycle_s
    assert tree == pytest.approx(30)
    assert dp["cycles"] == pytest.approx(dp["alone"] + 400 + tree + preempt)
