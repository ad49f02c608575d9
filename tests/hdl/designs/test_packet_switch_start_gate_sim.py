"""The packet switch's start gate (docs/switch.md, "Starting a packet"), in Amaranth's
simulator on Fred_3(8) int32, slot 0 = ``0,2>0,2; 4>5`` on the DP VC (a reduction of inputs 0
and 2, a unicast 4 -> 5), slot 1 an MP permutation, 8-flit packets, 16-flit VC buffers.

With the flow-port table written, a packet starts only when its reduction partners' packets of
the same number are at their heads and its outputs have room for a whole packet; so a packet
that cannot finish never enters the datapath, and a higher-priority packet is served at once
instead of waiting behind it. Each case is checked against the same run without the table
(the old behaviour), so neither test passes without the mechanism."""

from __future__ import annotations

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, flow_port_writer, run_packet_switch

PKT = PacketFormat(phase_bits=2, seq_bits=8, flow_bits=4, packet_flits=8)
P, M = 8, 3
REDUCE, UNICAST, MP_FLOW = 0, 1, 2


def config(flows):
    return route(ports=P, middle=M, flows=flows).phases[0].config


SLOT0 = config([Flow(inputs=(0, 2), outputs=(0, 2)), Flow(inputs=(4,), outputs=(5,))])
MP_PERMUTATION = config([Flow(inputs=(n,), outputs=((n + 1) % P,)) for n in range(P)])
#: (slot, input, partners, outputs) of both slots
TABLE = ([(0, 0, 1 << 2, 0b101), (0, 2, 1 << 0, 0b101), (0, 4, 0, 1 << 5)]
         + [(1, n, 0, 1 << (n + 1) % P) for n in range(P)])
START = len(TABLE) + 10     # the first packet after the table is written


def packet(phase, vc, flow, seq):
    return packetize(PKT, [seq * 8 + k for k in range(8)], phase=phase, vc=vc, flow=flow,
                     first_seq=seq)[0]


def flits(run, port, vc):
    return [(c, d) for c, d, _, tag in run.received[port] if PKT.unpack_header(tag)["vc"] == vc]


def switch():
    return PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=3, packet=PKT, depth=16)


def run(injections, *, table, **kwargs):
    dut = switch()
    host = flow_port_writer(dut, TABLE if table else [])
    return dut, run_packet_switch(dut, configs=[SLOT0, MP_PERMUTATION], injections=injections,
                                  host=host, max_cycles=3000, **kwargs)


def test_a_reduction_operand_waits_outside_the_datapath_for_its_partner():
    """Input 0's reduction packet arrives at START, an MP packet at START + 40, the partner
    (input 2) at START + 200. With the table, input 0's packet does not start alone, so the MP
    packet is served at once (an idle switch's select + settle + latency, plus the packet);
    without it, the operand holds the datapath and the MP packet leaves after the partner."""
    inj = [Injection(0, START, packet(0, VC.DP, REDUCE, 0)),
           Injection(6, START + 40, packet(1, VC.MP, MP_FLOW, 0)),
           Injection(2, START + 200, packet(0, VC.DP, REDUCE, 0))]
    outs = {}
    for table in (True, False):
        dut, r = run(inj, table=table)
        assert [d for _, d in flits(r, 0, VC.DP)] == [2 * k for k in range(8)]
        assert [d for _, d in flits(r, 7, VC.MP)] == list(range(8))
        assert r.flags["busy"] == 0 and r.flags["overflow"] == 0 and r.credit_errors == []
        outs[table] = flits(r, 7, VC.MP)[0][0] - (START + 40)
    assert outs[True] <= dut.select_cycles + 2 + dut.latency + 4
    assert outs[False] > 200 - 40


def test_a_packet_without_room_downstream_waits_outside_the_datapath():
    """Input 4 sends 3 packets to output 5, whose receiver frees nothing for 400 cycles (16
    credits: two packets). With the table the third packet does not start (the switch is not
    busy), so an MP packet at START + 150 leaves at once; without it the third packet's flits
    fill the datapath and the MP packet waits for output 5's receiver."""
    inj = [Injection(4, START, packet(0, VC.DP, UNICAST, s)) for s in range(3)]
    inj += [Injection(6, START + 150, packet(1, VC.MP, MP_FLOW, 0))]
    outs = {}
    for table in (True, False):
        dut, r = run(inj, table=table, drain_delay=400, quiet=500)
        assert [d for _, d in flits(r, 5, VC.DP)] == list(range(24))
        assert [d for _, d in flits(r, 7, VC.MP)] == list(range(8))
        assert r.flags["overflow"] == 0 and r.credit_errors == []
        outs[table] = flits(r, 7, VC.MP)[0][0] - (START + 150)
    assert outs[True] <= dut.select_cycles + 2 + dut.latency + 4
    assert outs[False] > 400 - 150


#: an all-reduce's two flows at an L1 (docs/switch.md, "Control unit"), on a Fred_3(4): up
#: (input 0 -> output 1) and down (input 2 -> output 3), one flow id, neither a partner of the
#: other; slot 1 an MP unicast 1 -> 2
SMALL_P = 4
UP_DOWN = route(ports=SMALL_P, middle=M, flows=[Flow(inputs=(0,), outputs=(1,)),
                                                 Flow(inputs=(2,), outputs=(3,))]).phases[0].config
MP_1_TO_2 = route(ports=SMALL_P, middle=M, flows=[Flow(inputs=(1,), outputs=(2,))]).phases[0].config
UP_DOWN_TABLE = [(0, 0, 0, 1 << 1), (0, 2, 0, 1 << 3), (1, 1, 0, 1 << 2)]


def test_draining_stops_a_flow_that_shares_its_id_but_is_no_partner():
    """The down flow (input 2, from 60 cycles after the up flow) is numbered behind the up
    flow (input 0), both flow 0; senders send a flit with probability 1/2 per cycle, as a
    half-rate link delivers. An MP packet arrives 90 cycles after the start: with the table
    the drain lets only a partner's lagging packet start, so input 2 stops at its packet
    boundary and MP leaves within the rest of one packet at half rate, the datapath (twice)
    and a select (29 cycles); by flow id alone (no table: the rule before) input 2 kept
    starting its packets up to the up flow's number, several more at its pace (91 cycles)."""
    start = len(UP_DOWN_TABLE) + 10
    inj = [Injection(0, start + s, packet(0, VC.DP, REDUCE, s)) for s in range(7)]
    inj += [Injection(2, start + 60, packet(0, VC.DP, REDUCE, s)) for s in range(7)]
    inj += [Injection(1, start + 90, packet(1, VC.MP, MP_FLOW, 0))]
    waits = {}
    for table in (True, False):
        dut = PacketSwitch(ports=SMALL_P, middle=M, dtype="int32", lanes=1, phases=3, packet=PKT,
                           depth=16)
        host = flow_port_writer(dut, UP_DOWN_TABLE if table else [])
        r = run_packet_switch(dut, configs=[UP_DOWN, MP_1_TO_2], injections=inj, host=host,
                              max_cycles=1000, quiet=20, send_rate=0.5)
        assert [d for _, d in flits(r, 3, VC.DP)] == list(range(56))
        assert len(flits(r, 2, VC.MP)) == 8 and r.flags["busy"] == 0 and r.credit_errors == []
        waits[table] = flits(r, 2, VC.MP)[0][0] - (start + 90)
    bound = 2 * PKT.packet_flits + 2 * dut.latency + dut.select_cycles + 2
    assert waits[True] <= bound < waits[False]
