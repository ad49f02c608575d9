"""The packet switch's shared stored flows (docs/switch.md, "Shared stored flows"), in Amaranth's
simulator on Fred_3(4) int32, 8-flit packets, 16-flit VC buffers: several stored flows of one VC
served at once, interleaved per packet at the output they share.

Slots 0..2 hold the flows' lanes; slot 3 is the shared phase (the header's ``phase``), each
packet's ``flow`` naming its slot through the shared table. Every flit's data names its flow,
packet and position, so the checks see any loss, duplicate, corruption or reorder."""

from __future__ import annotations

import random

import pytest

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.encoding import SwitchConfig
from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.contracts.timing import reduction_latency, switch_latency
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.lib.scoreboard import TaggedScoreboard
from cocotb_tests.packet_sim import Injection, run_packet_switch

PKT = PacketFormat(phase_bits=2, seq_bits=8, flow_bits=4, packet_flits=8)
P, M, SHARED = 4, 3, 3
PF = PKT.packet_flits


def config(flows):
    return route(ports=P, middle=M, flows=flows).phases[0].config


def switch(depth=16, *, ctrl_depth=0, dtype="int32"):
    return PacketSwitch(ports=P, middle=M, dtype=dtype, lanes=1, phases=4, packet=PKT, depth=depth,
                        shared_phase=SHARED, flows=8, ctrl_depth=ctrl_depth)


def host(dut, *, ports, flows):
    """Writes the flow-port table (``ports``: (slot, input, partners, outputs)) and the shared
    table (``flows``: flow id -> slot), one entry per cycle from cycle 0."""
    writes = [("port", e) for e in ports] + [("flow", e) for e in flows.items()]

    async def drive(ctx, cycle):
        kind, entry = writes[cycle] if cycle < len(writes) else (None, None)
        ctx.set(dut.flow_we, int(kind == "port"))
        ctx.set(dut.shared_we, int(kind == "flow"))
        if kind == "port":
            slot, port, partners, outputs = entry
            for signal, value in ((dut.flow_slot, slot), (dut.flow_input, port),
                                  (dut.flow_partners, partners), (dut.flow_outputs, outputs)):
                ctx.set(signal, value)
        elif kind == "flow":
            ctx.set(dut.shared_flow, entry[0])
            ctx.set(dut.shared_slot, entry[1])
            ctx.set(dut.shared_valid, 1)

    drive.start = len(writes) + 2
    return drive


def data(flow, seq, k):
    """Flit k of packet seq of a flow: unique over the test."""
    return flow << 16 | seq << 8 | k


def stream(port, flow, packets, at, *, value=data):
    return [Injection(port, at, packetize(PKT, [value(flow, s, k) for k in range(PF)], phase=SHARED,
                                          vc=VC.DP, flow=flow, first_seq=s)[0])
            for s in range(packets)]


def packets_at(run, port, pkt=PKT):
    """Output ``port``'s flits as packets: [(flow, first cycle, last cycle, [data])]."""
    out, cur = [], None
    for cycle, value, last, tag in run.received[port]:
        flow = pkt.unpack_header(tag)["flow"]
        if cur is None:
            cur = (flow, cycle, [])
        assert cur[0] == flow, f"output {port}: a packet of flow {cur[0]} mixed with flow {flow}"
        cur[2].append(value)
        if last:
            out.append((cur[0], cur[1], cycle, cur[2]))
            cur = None
    assert cur is None, f"output {port}: a packet cut short"
    return out


def check_delivery(run, expected):
    """``expected``: {port: {flow: [data ...]}}: every flit once, in its flow's order, and whole
    packets (TaggedScoreboard: loss, duplicate, corruption, misroute, reorder)."""
    board = TaggedScoreboard("shared flows", ordered=True)
    for port, flows in expected.items():
        for flow, values in flows.items():
            for i, v in enumerate(values):
                board.expect((port, flow), (flow, i), v)
    seen = {}
    for port in range(P):
        for flow, _, _, values in packets_at(run, port):
            for v in values:
                i = seen.setdefault((port, flow), 0)
                seen[(port, flow)] = i + 1
                board.observe((port, flow), (flow, i), v)
    board.check()
    assert run.flags["overflow"] == 0 and run.flags["credit_error"] == 0 and run.credit_errors == []
    assert run.flags["busy"] == 0


def test_bad_parameters_are_refused():
    for kwargs, words in [({"shared_phase": 4, "flows": 2}, "shared_phase"),
                          ({"shared_phase": True, "flows": 2}, "shared_phase"),
                          ({"shared_phase": 3, "flows": 0}, "flows"),
                          ({"shared_phase": 3, "flows": 17}, "flows"),
                          ({"shared_phase": None, "flows": 2}, "shared_phase")]:
        with pytest.raises(FredError, match=words):
            PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=4, packet=PKT,
                         depth=16, **kwargs)
    with pytest.raises(FredError, match="phases >= 2"):
        PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=1,
                     packet=PacketFormat(phase_bits=1, seq_bits=8, flow_bits=4, packet_flits=8),
                     depth=16, shared_phase=0, flows=2)
    with pytest.raises(TypeError):
        PacketSwitch(P, M, "int32", 1, 4, PKT, 16)


#: three flows into output 3, from inputs 0, 1 and 2, one slot each
TO_3 = [config([Flow(inputs=(n,), outputs=(3,))]) for n in range(3)]
TO_3_PORTS = [(n, n, 0, 1 << 3) for n in range(3)]


@pytest.mark.parametrize("flows", [2, 3])
@pytest.mark.parametrize("ctrl_depth", [0, 4])
def test_flows_sharing_an_output_interleave_per_packet(flows, ctrl_depth):
    """Two (three) flows of 4 packets each, all waiting at once, share output 3: the output
    takes them per packet in round robin (A B [C] A B [C] ...), every packet whole.

    Hand-over behind (ctrl_depth 0): the previous packet's last flit enters the datapath at t,
    its slot is passed and the next one granted at t + reduction latency (1 on int32), the
    lanes set and its first flit entering the next cycle: the packets leave output 3 with
    exactly reduction_latency idle cycles between them (a gap of 2 cycles from last flit to
    first flit). With a control VC (ctrl_depth 4, its flits may stall an output between two
    packets) the switch keeps the rule before: the last flit leaves at t, the slot is released
    and the next one granted at t + 1, the lanes set at t + 2 when its first flit enters, which
    leaves Fred_3(4)'s latency later: a gap of latency(Fred_3(4)) + 2 = 7 cycles."""
    dut = switch(ctrl_depth=ctrl_depth)
    h = host(dut, ports=TO_3_PORTS[:flows], flows={f: f for f in range(flows)})
    inj = [i for f in range(flows) for i in stream(f, f, 4, h.start)]
    run = run_packet_switch(dut, configs=TO_3[:flows] + [None] * (4 - flows), injections=inj,
                            host=h, check_order=False, max_cycles=2000, quiet=40)
    check_delivery(run, {3: {f: [data(f, s, k) for s in range(4) for k in range(PF)]
                             for f in range(flows)}})
    got = packets_at(run, 3)
    order = [f for f, *_ in got]
    assert order == list(range(flows)) * 4
    gaps = {b[1] - a[2] for a, b in zip(got, got[1:])}
    if ctrl_depth:
        assert gaps == {switch_latency(ports=P, middle=M, dtype="int32") + 2}
    else:
        assert gaps == {reduction_latency("int32") + 1} == {2}


#: an L1 of the striped weight streaming in small: two controller trees 0 -> {2, 3} and
#: 1 -> {2, 3} (output 3 the uplink, output 2 the NPU) and the downlink's tree 3 -> {2}
UPLINK_TREES = [config([Flow(inputs=(0,), outputs=(2, 3))]), config([Flow(inputs=(1,), outputs=(2, 3))]),
                config([Flow(inputs=(3,), outputs=(2,))])]
UPLINK_PORTS = [(0, 0, 0, 0b1100), (1, 1, 0, 0b1100), (2, 3, 0, 0b0100)]


@pytest.mark.parametrize("seed", [1, 2])
def test_inputs_waiting_for_room_take_turns_between_uncontested_grants(seed):
    """Issue 29's starvation, on one switch: two trees wait for room on a slow output 3 (freed
    with probability 1/4 a cycle: an uplink), while a third input's tree (outputs {2}: never
    short of room) is granted alone between them. Those uncontested grants do not move the
    round-robin pointer, so each time room appears the two waiting inputs take turns: their
    packets alternate at output 3 (0 1 0 1 ...). With the pointer moved by every grant (before
    issue 29's fix), each downlink grant put input 0 first again: 0 1 0 0 0 1 1 1 on both
    seeds, input 1 waiting while input 0 sent three packets. Every flit once and in order at
    both outputs."""
    dut = switch()
    h = host(dut, ports=UPLINK_PORTS, flows={0: 0, 1: 1, 2: 2})
    inj = stream(0, 0, 4, h.start) + stream(1, 1, 4, h.start) + stream(3, 2, 24, h.start)
    run = run_packet_switch(dut, configs=UPLINK_TREES + [None], injections=inj, host=h,
                            rng=random.Random(seed), drain_rate={3: 0.25}, check_order=False,
                            max_cycles=4000, quiet=60)
    ctl = {f: [data(f, s, k) for s in range(4) for k in range(PF)] for f in (0, 1)}
    check_delivery(run, {3: ctl, 2: {**ctl, 2: [data(2, s, k) for s in range(24) for k in range(PF)]}})
    assert [f for f, *_ in packets_at(run, 3)] == [0, 1] * 4
    # the downlink's packets did pass between the controllers' (the grants that used to reset it)
    at_2 = [f for f, *_ in packets_at(run, 2)]
    assert any(a != 2 and b == 2 for a, b in zip(at_2, at_2[1:]))


def test_a_flow_alone_streams_at_one_flit_per_cycle():
    """One flow's 6 packets: its slot stays set up, each next packet granted the cycle its head
    arrives and started at once, so the output carries 48 flits in 48 consecutive cycles."""
    dut = switch()
    h = host(dut, ports=TO_3_PORTS[:1], flows={0: 0})
    run = run_packet_switch(dut, configs=TO_3[:1] + [None] * 3, injections=stream(0, 0, 6, h.start),
                            host=h, check_order=False, max_cycles=2000, quiet=40)
    check_delivery(run, {3: {0: [data(0, s, k) for s in range(6) for k in range(PF)]}})
    cycles = [c for c, *_ in run.received[3]]
    assert cycles == list(range(cycles[0], cycles[0] + 6 * PF))


def test_several_flow_ids_on_one_slot_need_no_set_up_between_them():
    """Flow ids 0 and 5 both name slot 0 (several stripes on one tree, as an L1's downlink
    carries 14 stripes): their packets alternate at input 0 and leave output 3 back to back."""
    dut = switch()
    h = host(dut, ports=TO_3_PORTS[:1], flows={0: 0, 5: 0})
    inj = []
    for s in range(3):
        inj += stream(0, 0, 3, h.start)[s:s + 1] + stream(0, 5, 3, h.start)[s:s + 1]
    run = run_packet_switch(dut, configs=TO_3[:1] + [None] * 3, injections=inj, host=h,
                            check_order=False, max_cycles=2000, quiet=40)
    check_delivery(run, {3: {f: [data(f, s, k) for s in range(3) for k in range(PF)] for f in (0, 5)}})
    assert [f for f, *_ in packets_at(run, 3)] == [0, 5] * 3
    cycles = [c for c, *_ in run.received[3]]
    assert cycles == list(range(cycles[0], cycles[0] + 6 * PF))


#: a multicast 0 -> {1, 2, 3} (slot 0) and a reduction {1, 2} -> 3 (slot 1), sharing output 3
MULTI = config([Flow(inputs=(0,), outputs=(1, 2, 3))])
REDUCE = config([Flow(inputs=(1, 2), outputs=(3,))])
MR_PORTS = [(0, 0, 0, 0b1110), (1, 1, 1 << 2, 1 << 3), (1, 2, 1 << 1, 1 << 3)]


def reduce_value(flow, seq, k):
    return data(flow, seq, k)


@pytest.mark.parametrize("seed, depth", [(0, 16), pytest.param(1, 16, marks=pytest.mark.full), (2, 8),
                                         pytest.param(3, 8, marks=pytest.mark.full)])
def test_a_multicast_and_a_reduction_under_random_backpressure(seed, depth):
    """Flow 0 multicasts input 0's 5 packets to outputs 1, 2 and 3; flow 1 reduces inputs 1 and
    2 (5 packets each) into output 3. Senders send at 0.6 flit per cycle, receivers free a flit
    with probability 0.5 after 3 cycles: every output gets every flit of its flows once, in
    order, sums exact, packets whole; flow 0's packets go to its three outputs at once (the
    same cycles). Depth 8 (one packet per VC buffer): a packet is granted only when its
    outputs' receivers have freed the previous one."""
    rng = random.Random(seed)
    dut = switch(depth)
    h = host(dut, ports=MR_PORTS, flows={0: 0, 1: 1})
    a = {n: [rng.randrange(1 << 20) for _ in range(5 * PF)] for n in (1, 2)}
    inj = stream(0, 0, 5, h.start)
    for n in (1, 2):
        inj += [Injection(n, h.start, p) for p in packetize(PKT, a[n], phase=SHARED, vc=VC.DP, flow=1)]
    run = run_packet_switch(dut, configs=[MULTI, REDUCE, None, None], injections=inj, host=h,
                            rng=rng, send_rate=0.6, drain_rate=0.5, drain_delay=3,
                            check_order=False, max_cycles=4000, quiet=60)
    multicast = [data(0, s, k) for s in range(5) for k in range(PF)]
    sums = [(x + y) & 0xFFFFFFFF for x, y in zip(a[1], a[2])]
    check_delivery(run, {1: {0: multicast}, 2: {0: multicast}, 3: {0: multicast, 1: sums}})
    assert not run.received[0]
    # all outputs of a multicast packet granted at once: its first flits leave together
    firsts = {o: [c for f, c, _, _ in packets_at(run, o) if f == 0] for o in (1, 2)}
    assert firsts[1] == firsts[2]


def test_an_unknown_flow_waits_and_is_flagged():
    """A packet of the shared phase whose flow id has no table entry does not start (the switch
    cannot know its lanes) and raises the sticky ``shared_unknown``; the known flow behind it
    on another input is served."""
    dut = switch()
    h = host(dut, ports=TO_3_PORTS[:2], flows={0: 0})
    inj = stream(1, 1, 1, h.start) + stream(0, 0, 2, h.start)
    flags = {}

    async def watch(ctx, cycle):
        await h(ctx, cycle)
        flags["unknown"] = ctx.get(dut.shared_unknown)

    run = run_packet_switch(dut, configs=TO_3[:2] + [None] * 2, injections=inj, host=watch,
                            check_order=False, max_cycles=400, quiet=40)
    assert [f for f, *_ in packets_at(run, 3)] == [0, 0]
    assert flags["unknown"] == 1


def part_of(joint, names):
    """The slot of one flow cut from a configuration routing several (``names``: its
    microswitches; the others idle)."""
    return SwitchConfig.from_modes(P, M, {s.name: mode for s, mode in zip(joint.slots, joint.modes)
                                          if s.name in names})


def test_flows_on_disjoint_lanes_run_at_once():
    """0 -> 1 and 2 -> 3 routed together (on middles 0 and 1), cut into one slot each: no
    microswitch in common, so both are set up at once and both outputs carry their 4 packets
    at one flit per cycle in the same cycles (within the one cycle between the two grants)."""
    joint = config([Flow(inputs=(0,), outputs=(1,)), Flow(inputs=(2,), outputs=(3,))])
    slots = [part_of(joint, {"in[0]", "mid[0].rd", "out[0]"}),
             part_of(joint, {"in[1]", "mid[1].rd", "out[1]"})]
    assert slots[0].to_int() & slots[1].to_int() == 0 and slots[0].to_int() | slots[1].to_int() == joint.to_int()
    dut = switch()
    h = host(dut, ports=[(0, 0, 0, 1 << 1), (1, 2, 0, 1 << 3)], flows={0: 0, 1: 1})
    inj = stream(0, 0, 4, h.start) + stream(2, 1, 4, h.start)
    run = run_packet_switch(dut, configs=slots + [None, None], injections=inj, host=h,
                            check_order=False, max_cycles=2000, quiet=40)
    check_delivery(run, {1: {0: [data(0, s, k) for s in range(4) for k in range(PF)]},
                         3: {1: [data(1, s, k) for s in range(4) for k in range(PF)]}})
    cycles = {o: [c for c, *_ in run.received[o]] for o in (1, 3)}
    for o in (1, 3):
        assert cycles[o] == list(range(cycles[o][0], cycles[o][0] + 4 * PF))
    assert abs(cycles[1][0] - cycles[3][0]) <= 1


def test_mp_preempts_the_shared_phase_which_resumes():
    """Flows 0 and 1 (inputs 0, 1 -> output 3, DP) run 4 packets each; an MP packet of the
    stored slot 2 (3 -> 0) arrives at input 3 meanwhile: the control unit drains the shared
    phase (packets granted still start), selects slot 2, serves MP, then selects the shared
    phase again (no copy) and the flows finish: every flit once and in order, MP's packet
    leaves before the last DP packet; one preemption and three selects (shared, 2, shared)."""
    dut = switch()
    mp = config([Flow(inputs=(3,), outputs=(0,))])
    h = host(dut, ports=TO_3_PORTS[:2] + [(2, 3, 0, 1 << 0)], flows={0: 0, 1: 1})
    inj = stream(0, 0, 4, h.start) + stream(1, 1, 4, h.start)
    inj.append(Injection(3, h.start + 30, packetize(PKT, list(range(PF)), phase=2, vc=VC.MP, flow=7)[0]))
    run = run_packet_switch(dut, configs=TO_3[:2] + [mp, None], injections=inj, host=h,
                            check_order=False, max_cycles=2000, quiet=40)
    check_delivery(run, {3: {f: [data(f, s, k) for s in range(4) for k in range(PF)] for f in (0, 1)},
                         0: {7: list(range(PF))}})
    assert run.counters["preemptions"] == 1 and run.counters["selects"] == 3
    assert run.received[0][-1][0] < run.received[3][-1][0]


#: Fred_3(5) (odd P: the last port's demux and mux): five trees, multicasts and reductions,
#: sharing inputs and outputs
P5_FLOWS = [Flow(inputs=(4,), outputs=(0, 1)), Flow(inputs=(0, 1), outputs=(4,)),
            Flow(inputs=(2,), outputs=(3, 4)), Flow(inputs=(3,), outputs=(0,)),
            Flow(inputs=(2, 3), outputs=(1,))]


@pytest.mark.parametrize("seed", [0, 1, pytest.param(2, marks=pytest.mark.full),
                                  pytest.param(3, marks=pytest.mark.full)])
def test_random_trees_on_an_odd_switch_in_one_packet_order(seed):
    """Five trees on Fred_3(5), 4 packets of 4 flits each, every sender following one random
    packet order (round p of every tree in a random tree order, host rule 5), random arrival
    times, sender idles (0.7) and receiver backpressure (0.6 after 2 cycles), 8-flit buffers
    (two packets): every output gets each of its trees' sums once, in order, exact."""
    rng = random.Random(seed)
    pkt = PacketFormat(phase_bits=3, seq_bits=8, flow_bits=4, packet_flits=4)
    ports, middle = 5, M
    dut = PacketSwitch(ports=ports, middle=middle, dtype="int32", lanes=1, phases=6, packet=pkt,
                       depth=8, shared_phase=5, flows=8)
    entries = [(k, n, sum(1 << j for j in f.inputs if j != n), sum(1 << o for o in f.outputs))
               for k, f in enumerate(P5_FLOWS) for n in sorted(f.inputs)]
    h = host(dut, ports=entries, flows={k: k for k in range(len(P5_FLOWS))})
    order = [(k, p) for p in range(4) for k in rng.sample(range(len(P5_FLOWS)), len(P5_FLOWS))]
    sent, inj = {}, []
    for k, p in order:
        for n in P5_FLOWS[k].inputs:
            sent[(k, p, n)] = [rng.randrange(1 << 20) for _ in range(4)]
            inj.append(Injection(n, h.start + rng.randrange(30), packetize(
                pkt, sent[(k, p, n)], phase=5, vc=VC.DP, flow=k, first_seq=p)[0]))
    configs = [route(ports=ports, middle=middle, flows=[f]).phases[0].config for f in P5_FLOWS]
    run = run_packet_switch(dut, configs=configs + [None], injections=inj, host=h, rng=rng,
                            send_rate=0.7, drain_rate=0.6, drain_delay=2, check_order=False,
                            max_cycles=5000, quiet=80)
    board = TaggedScoreboard("Fred_3(5) trees", ordered=True)
    for k, f in enumerate(P5_FLOWS):
        for o in f.outputs:
            for i in range(16):
                board.expect((o, k), i, sum(sent[(k, i // 4, n)][i % 4] for n in f.inputs) & 0xFFFFFFFF)
    seen = {}
    for o in range(ports):
        for _, v, _, tag in run.received[o]:
            k = pkt.unpack_header(tag)["flow"]
            seen[(o, k)] = seen.get((o, k), -1) + 1
            board.observe((o, k), seen[(o, k)], v)
    board.check()
    assert run.flags["busy"] == 0 and run.flags["overflow"] == 0 and run.credit_errors == []


def test_hand_over_behind_waits_the_reduction_latency_on_fp16():
    """On fp16 the input and RD microswitches read their mode again 7 cycles (the float
    adder's 6 stages and its output register) after a flit entered, so a passed slot's lanes
    change hands 7 cycles after its last flit entered: the two flows into output 3 alternate
    with exactly 7 idle cycles between their packets (a gap of 8), against Fred_3(4) fp16's
    latency + 1 = 18 before the hand-over behind."""
    assert reduction_latency("fp16") == 7
    dut = switch(dtype="fp16")
    h = host(dut, ports=TO_3_PORTS[:2], flows={0: 0, 1: 1})
    value = lambda flow, seq, k: (data(flow, seq, k) & 0x3FF) | 0x3C00   # finite halves, unique
    inj = [i for f in range(2) for i in stream(f, f, 3, h.start, value=value)]
    run = run_packet_switch(dut, configs=TO_3[:2] + [None] * 2, injections=inj, host=h,
                            check_order=False, max_cycles=2000, quiet=60)
    check_delivery(run, {3: {f: [value(f, s, k) for s in range(3) for k in range(PF)]
                             for f in range(2)}})
    got = packets_at(run, 3)
    assert [f for f, *_ in got] == [0, 1] * 3
    assert {b[1] - a[2] for a, b in zip(got, got[1:])} == {8}
    assert switch_latency(ports=P, middle=M, dtype="fp16") + 1 == 18


#: Fred_3(5): four multicast trees from four inputs, each to three of the outputs, every
#: output shared by three trees: the hand-over behind at every change
MULTICASTS = [Flow(inputs=(0,), outputs=(1, 2, 4)), Flow(inputs=(1,), outputs=(0, 2, 3)),
              Flow(inputs=(3,), outputs=(0, 1, 4)), Flow(inputs=(4,), outputs=(2, 3, 4))]


@pytest.mark.parametrize("seed, depth", [(0, 8), (1, 16), pytest.param(2, 8, marks=pytest.mark.full),
                                         pytest.param(3, 16, marks=pytest.mark.full)])
def test_multicast_trees_handed_over_behind_under_random_backpressure(seed, depth):
    """Four multicast trees on Fred_3(5), 6 packets each of random length 1..4 flits (a one-flit
    packet ends in the cycle it starts), each input's packets in one random packet order,
    random arrivals, senders at 0.5 flit per cycle (packets enter the datapath with bubbles:
    a slot is passed only after its last flit entered) and receivers freeing a flit with
    probability 0.5 after 2 cycles: every output gets each of its trees' flits once, in order,
    packets whole; each multicast packet's flits leave its outputs in the same cycles (no flit
    stalled inside); and some change of tree at an output costs exactly the reduction latency
    (the hand-over behind seen, not the switch's latency + 1)."""
    rng = random.Random(seed)
    pkt = PacketFormat(phase_bits=3, seq_bits=8, flow_bits=4, packet_flits=4)
    ports = 5
    dut = PacketSwitch(ports=ports, middle=M, dtype="int32", lanes=1, phases=6, packet=pkt,
                       depth=depth, shared_phase=5, flows=8)
    entries = [(k, f.inputs[0], 0, sum(1 << o for o in f.outputs)) for k, f in enumerate(MULTICASTS)]
    h = host(dut, ports=entries, flows={k: k for k in range(len(MULTICASTS))})
    sent, inj = {}, []
    for p in range(6):
        for k in rng.sample(range(len(MULTICASTS)), len(MULTICASTS)):
            sent[(k, p)] = [k << 16 | p << 8 | i for i in range(rng.randint(1, 4))]
            inj.append(Injection(MULTICASTS[k].inputs[0], h.start + rng.randrange(40), packetize(
                pkt, sent[(k, p)], phase=5, vc=VC.DP, flow=k, first_seq=p)[0]))
    configs = [route(ports=ports, middle=M, flows=[f]).phases[0].config for f in MULTICASTS]
    run = run_packet_switch(dut, configs=configs + [None], injections=inj, host=h, rng=rng,
                            send_rate=0.5, drain_rate=0.5, drain_delay=2, check_order=False,
                            max_cycles=5000, quiet=80)
    board = TaggedScoreboard("Fred_3(5) multicasts", ordered=True)
    for k, f in enumerate(MULTICASTS):
        values = [v for p in range(6) for v in sent[(k, p)]]
        for o in f.outputs:
            for i, v in enumerate(values):
                board.expect((o, k), i, v)
    seen, cycles = {}, {}
    for o in range(ports):
        for c, v, _, tag in run.received[o]:
            k = pkt.unpack_header(tag)["flow"]
            seen[(o, k)] = seen.get((o, k), -1) + 1
            board.observe((o, k), seen[(o, k)], v)
            cycles.setdefault(k, {}).setdefault(o, []).append(c)
    board.check()
    assert run.flags["busy"] == 0 and run.flags["overflow"] == 0 and run.credit_errors == []
    for k, f in enumerate(MULTICASTS):
        assert len({tuple(cycles[k][o]) for o in f.outputs}) == 1, f"tree {k}'s outputs apart"
    changes = []
    for o in range(ports):
        got = packets_at(run, o, pkt)
        changes += [b[1] - a[2] - 1 for a, b in zip(got, got[1:]) if a[0] != b[0]]
    assert min(changes) == reduction_latency("int32")



#: two reductions into output 3 sharing input 1: {0, 1} (summed at input microswitch 0, whose
#: adder joins the two, so they always enter together) and {1, 2} (ports of two input
#: microswitches, summed further in: its operands may enter apart)
REDUCE_01 = config([Flow(inputs=(0, 1), outputs=(3,))])
REDUCE_12 = config([Flow(inputs=(1, 2), outputs=(3,))])
LOCKSTEP_PORTS = [(0, 0, 1 << 1, 1 << 3), (0, 1, 1 << 0, 1 << 3),
                  (1, 1, 1 << 2, 1 << 3), (1, 2, 1 << 1, 1 << 3)]


def _two_reductions(*, lockstep, rng=None, send_rate=1.0, drain_rate=1.0, packets=4):
    """Trees 0 ({0, 1} -> 3) and 1 ({1, 2} -> 3) alternating per packet at input 1 (the one
    packet order: 0, 1, 0, 1, ...), ``packets`` each: the run, the sums expected at output 3."""
    rng = rng or random.Random(0)
    dut = PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=4, packet=PKT, depth=16,
                       shared_phase=SHARED, flows=8, shared_lockstep=lockstep)
    h = host(dut, ports=LOCKSTEP_PORTS, flows={0: 0, 1: 1})
    sent, inj = {}, []
    for p in range(packets):
        for k, inputs in ((0, (0, 1)), (1, (1, 2))):
            for n in inputs:
                sent[(k, p, n)] = [rng.randrange(1 << 20) for _ in range(PF)]
                inj.append(Injection(n, h.start, packetize(PKT, sent[(k, p, n)], phase=SHARED, vc=VC.DP,
                                                           flow=k, first_seq=p)[0]))
    run = run_packet_switch(dut, configs=[REDUCE_01, REDUCE_12, None, None], injections=inj, host=h,
                            rng=rng, send_rate=send_rate, drain_rate=drain_rate, drain_delay=2,
                            check_order=False, max_cycles=4000, quiet=60)
    sums = {k: [(sent[(k, p, a)][i] + sent[(k, p, b)][i]) & 0xFFFFFFFF
                for p in range(packets) for i in range(PF)]
            for k, (a, b) in ((0, (0, 1)), (1, (1, 2)))}
    return run, sums


def test_bad_lockstep_is_refused():
    for kwargs in ({}, {"shared_phase": SHARED, "flows": 8, "ctrl_depth": 4}):
        with pytest.raises(FredError, match="shared_lockstep"):
            PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=4, packet=PKT,
                         depth=16, shared_lockstep=True, **kwargs)
    with pytest.raises(FredError, match="shared_lockstep must be a bool"):
        PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=4, packet=PKT, depth=16,
                     shared_phase=SHARED, flows=8, shared_lockstep=1)


@pytest.mark.parametrize("lockstep", [False, True])
def test_reducing_trees_entering_in_lock_step_are_handed_over_behind(lockstep):
    """Two reductions alternating at output 3, every packet waiting whole (inputs at full rate,
    output free): each gang's inputs pass their flits in the same cycles. With ``lockstep``
    the reducing slot is passed like a multicast's: reduction_latency (1) idle cycles between
    the trees' packets at output 3, a gap of 2 from last flit to first. Without it (the switch
    as before) a reducing slot is released only after its last flit left, the next set up the
    cycle after: Fred_3(4)'s latency + 2 = 7. Every sum exact either way."""
    run, sums = _two_reductions(lockstep=lockstep)
    check_delivery(run, {3: sums})
    got = packets_at(run, 3)
    assert [f for f, *_ in got] == [0, 1] * 4
    gaps = {b[1] - a[2] for a, b in zip(got, got[1:])}
    if lockstep:
        assert gaps == {reduction_latency("int32") + 1} == {2}
    else:
        assert gaps == {switch_latency(ports=P, middle=M, dtype="int32") + 2} == {7}


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.full),
                                  pytest.param(4, marks=pytest.mark.full)])
def test_reducing_trees_under_random_idles_and_backpressure_with_lockstep(seed):
    """The two reductions with senders idling at random (0.6 flit per cycle: tree 1's operands,
    from two input microswitches, enter apart) and receivers freeing a flit with probability
    0.6 after 2 cycles: every sum exact and in order, every packet whole, nothing left inside.
    A gang that entered apart keeps its lanes until its flits have left, so its flits never
    meet the next tree's modes; trees that entered together still hand over behind."""
    run, sums = _two_reductions(lockstep=True, rng=random.Random(seed), send_rate=0.6,
                                drain_rate=0.6, packets=6)
    check_delivery(run, {3: sums})
    got = packets_at(run, 3)
    # tree 0's operands share input microswitch 0, whose adder joins them: always in lock step,
    # so each of its packets hands output 3 over behind it (the reduction latency's idle cycle)
    assert reduction_latency("int32") + 1 in {b[1] - a[2] for a, b in zip(got, got[1:]) if a[0] == 0}

