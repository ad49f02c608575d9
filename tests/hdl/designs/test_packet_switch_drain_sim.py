"""The packet switch's drain rule and the host ordering rule of reductions (docs/switch.md,
"Control unit" and "Host rules"), in Amaranth's simulator, on the reproductions an independent
bench found: Fred_3(8) int32, slot 0 = ``0,2>0,2; 4>5`` (a reduction of inputs 0 and 2 to
outputs 0 and 2, flow 0; a unicast 4 -> 5, flow 1) on the DP VC, 8-flit packets, 8-bit
sequence numbers.

* The drain rule lets an input start a packet while draining only when some input already
  started a packet of the same flow with a sequence number at least as high: a reduction's
  lagging operand catches up, every other packet waits. Before, it compared the packet's seq
  with the highest seq started in the whole phase, which deadlocked (seq 128 against S = 0
  is neither <= nor >= in 8-bit serial arithmetic) and let a flow numbered lower than another
  keep sending while an MP packet waited.
* A slot-ordering deadlock the switch cannot avoid (a packet of another phase queued ahead of
  a reduction's operand): the senders check the host rule and refuse the plan.
"""

from __future__ import annotations

import random

import pytest

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, run_packet_switch

PKT = PacketFormat(phase_bits=2, seq_bits=8, flow_bits=4, packet_flits=8)
P, M = 8, 3
REDUCE, UNICAST, MP_FLOW = 0, 1, 2     # flow ids


def config(flows):
    return route(ports=P, middle=M, flows=flows).phases[0].config


SLOT0 = config([Flow(inputs=(0, 2), outputs=(0, 2)), Flow(inputs=(4,), outputs=(5,))])
MP_PERMUTATION = config([Flow(inputs=(n,), outputs=((n + 1) % P,)) for n in range(P)])


def switch():
    return PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=3, packet=PKT, depth=16)


def packet(phase, vc, flow, seq):
    return packetize(PKT, [seq * 8 + k for k in range(8)], phase=phase, vc=vc, flow=flow,
                     first_seq=seq)[0]


def flits(run, port, vc):
    return [(c, d) for c, d, _, tag in run.received[port] if PKT.unpack_header(tag)["vc"] == vc]


@pytest.mark.parametrize("seq", [128, 129])
def test_a_reduction_operand_numbered_half_the_space_from_another_flow_still_drains(seq):
    """The reproduction: input 4 sends flow 1's seq 0 at cycle 0, input 0 its reduction packet
    with seq ``seq`` at 60, input 6 an MP packet at 100 (the unit drains), input 2 the partner
    packet at 200. Deadlocked at 128 before (busy stayed 1, the MP packet never left)."""
    inj = [Injection(4, 0, packet(0, VC.DP, UNICAST, 0)),
           Injection(0, 60, packet(0, VC.DP, REDUCE, seq)),
           Injection(6, 100, packet(1, VC.MP, MP_FLOW, 0)),
           Injection(2, 200, packet(0, VC.DP, REDUCE, seq))]
    run = run_packet_switch(switch(), configs=[SLOT0, MP_PERMUTATION], injections=inj,
                            max_cycles=3000)
    total = [2 * (seq * 8 + k) for k in range(8)]
    assert [d for _, d in flits(run, 0, VC.DP)] == total == [d for _, d in flits(run, 2, VC.DP)]
    assert [d for _, d in flits(run, 5, VC.DP)] == list(range(8))
    assert [d for _, d in flits(run, 7, VC.MP)] == list(range(8))
    assert run.flags["busy"] == 0 and run.flags["overflow"] == 0 and run.credit_errors == []
    # the MP packet waited for the reduction to be completed: it leaves after the partner came
    assert flits(run, 7, VC.MP)[0][0] > 200


def test_mp_waits_only_for_the_packets_in_flight_not_for_a_flow_numbered_lower():
    """The reproduction: flow 0 (inputs 0, 2) sends 30 packets from cycle 0, flow 1 (input 4)
    20 packets from cycle 100, one MP packet arrives at input 6 at cycle 150. Before, input 4
    kept starting packets numbered below flow 0's highest (11 more packets) and the MP packet
    waited 120 cycles."""
    inj = []
    for port in (0, 2):
        inj += [Injection(port, 0, packet(0, VC.DP, REDUCE, s)) for s in range(30)]
    inj += [Injection(4, 100, packet(0, VC.DP, UNICAST, s)) for s in range(20)]
    inj += [Injection(6, 150, packet(1, VC.MP, MP_FLOW, 0))]
    dut = switch()
    run = run_packet_switch(dut, configs=[SLOT0, MP_PERMUTATION], injections=inj,
                            max_cycles=5000)
    mp_out = flits(run, 7, VC.MP)[0][0]
    mp_at_head = 150 + 1
    # bound: the packets in flight (at most one per input, packet_flits to go), the datapath's
    # drain, the select and settle, and the MP packet's crossing
    bound = PKT.packet_flits + 2 * dut.latency + dut.select_cycles + 2
    assert dut.select_cycles + 2 + dut.latency <= mp_out - mp_at_head <= bound
    # until MP was out, output 5 delivered at most the datapath's contents and the rest of the
    # packet input 4 was reading (before: 94 flits, 11 packets)
    during = [c for c, _ in flits(run, 5, VC.DP) if mp_at_head < c < mp_out]
    assert len(during) <= PKT.packet_flits + dut.latency
    # and everything arrived, in order, bit-exact
    assert [d for _, d in flits(run, 5, VC.DP)] == [s * 8 + k for s in range(20) for k in range(8)]
    assert [d for _, d in flits(run, 0, VC.DP)] == [2 * (s * 8 + k) for s in range(30) for k in range(8)]
    assert run.flags["busy"] == 0 and run.credit_errors == [] and run.counters["preemptions"] == 1


SLOT1_TO_3 = config([Flow(inputs=(2,), outputs=(3,))])


def slot_ordering_plan(*, partner_first):
    """Input 0 sends its slot-0 (reduction) packet at cycle 0; input 2 sends a slot-1 packet
    and its slot-0 packet from cycle 5, the slot-1 packet first unless ``partner_first``."""
    mine = [Injection(2, 5, packet(1, VC.DP, 3, 0)), Injection(2, 5, packet(0, VC.DP, REDUCE, 0))]
    return [Injection(0, 0, packet(0, VC.DP, REDUCE, 0))] + (mine[::-1] if partner_first else mine)


def test_the_slot_ordering_reproduction_is_refused_by_the_host_rule():
    with pytest.raises(FredError, match=r"input 2 starts a packet of phase 1 on VC 1 .*reduction "
                                        r"of phase 0 flow 0"):
        run_packet_switch(switch(), configs=[SLOT0, SLOT1_TO_3],
                          injections=slot_ordering_plan(partner_first=False), max_cycles=500)


def test_the_slot_ordering_reproduction_hangs_the_switch_when_unchecked():
    """Why the rule: the switch cannot select slot 1 (input 0's operand waits in the datapath)
    and input 2's operand is behind the slot-1 packet: nothing moves, busy stays 1."""
    run = run_packet_switch(switch(), configs=[SLOT0, SLOT1_TO_3],
                            injections=slot_ordering_plan(partner_first=False), max_cycles=400,
                            quiet=100, check_order=False)
    assert run.flags["busy"] == 1 and all(not r for r in run.received.values())


def test_the_slot_ordering_plan_obeying_the_rule_completes():
    run = run_packet_switch(switch(), configs=[SLOT0, SLOT1_TO_3],
                            injections=slot_ordering_plan(partner_first=True), max_cycles=2000)
    assert [d for _, d in flits(run, 0, VC.DP)] == [2 * k for k in range(8)]
    assert [d for _, d in flits(run, 3, VC.DP)] == list(range(8))
    assert run.flags["busy"] == 0 and run.credit_errors == []


def test_random_reductions_and_unicasts_with_preemption_drain_bit_exact():
    """Random start times and backpressure: flow 0 (reduction of 0 and 2), flow 1 (4 -> 5),
    MP packets at random times; every flit delivered bit-exact, nothing left in the switch."""
    rng = random.Random(28)
    inj = []
    for port in (0, 2):
        at = rng.randrange(0, 40)
        inj += [Injection(port, at + 3 * s, packet(0, VC.DP, REDUCE, s)) for s in range(12)]
    inj += [Injection(4, rng.randrange(0, 80), packet(0, VC.DP, UNICAST, s)) for s in range(12)]
    for k in range(4):
        inj.append(Injection(6, rng.randrange(0, 300), packet(1, VC.MP, MP_FLOW, k)))
    inj.sort(key=lambda i: (i.port, i.packet.vc, i.packet.seq))
    run = run_packet_switch(switch(), configs=[SLOT0, MP_PERMUTATION], injections=inj, rng=rng,
                            send_rate=0.8, drain_rate=0.6, max_cycles=8000)
    assert [d for _, d in flits(run, 2, VC.DP)] == [2 * (s * 8 + k) for s in range(12) for k in range(8)]
    assert [d for _, d in flits(run, 5, VC.DP)] == [s * 8 + k for s in range(12) for k in range(8)]
    assert len(flits(run, 7, VC.MP)) == 4 * 8
    assert run.flags["busy"] == 0 and run.credit_errors == [] and run.flags["overflow"] == 0
