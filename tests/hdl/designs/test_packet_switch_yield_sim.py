"""The control unit's work-conserving yield (docs/switch.md, "Control unit"), in Amaranth's
simulator on Fred_3(4) with online routing: an online stream from input 2 to output 3 whose
receiver never frees a slot (an I/O controller's sink, stopped), and a stored phase's packet
(slot 0 = ``0>1``) arriving at input 0 while the stream's next packets wait for room.

Holding the active phase (``yield_after`` = 0, the rule before) the slot-0 packet never
leaves; with the yield (the default guard, a select's cost) it leaves within a bound computed
by hand from the unit's states. Nothing is lost, duplicated or reordered either way."""

from __future__ import annotations

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.designs.switch.control_unit import CUState
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, flow_port_writer, run_packet_switch

PKT = PacketFormat(phase_bits=2, seq_bits=6, flow_bits=2, packet_flits=4, dest_bits=2)
ONLINE = PKT.online_phase
P, M, DEPTH = 4, 3, 8
SLOT0 = route(ports=P, middle=M, flows=[Flow(inputs=(0,), outputs=(1,))]).phases[0].config
TABLE = [(0, 0, 0, 1 << 1)]
START = 10                 # the first packet, once the table is written
STORED_AT = START + 80     # the slot-0 packet: the stream has been stuck for long by then
STREAM = 4                 # online packets; the stopped output takes DEPTH // 4 = 2 of them


def _run(yield_after):
    dut = PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=2, packet=PKT,
                       depth=DEPTH, online=True, yield_after=yield_after)
    inj = [Injection(2, START, pk) for pk in packetize(
        PKT, list(range(100, 100 + 4 * STREAM)), phase=ONLINE, vc=VC.DP, flow=2, first_seq=0, dest=3)]
    inj += [Injection(0, STORED_AT, pk) for pk in packetize(
        PKT, [7, 8, 9, 10], phase=0, vc=VC.DP, flow=0, first_seq=0)]
    run = run_packet_switch(dut, configs=[SLOT0], injections=inj, host=flow_port_writer(dut, TABLE),
                            drain_rate={3: 0.0}, max_cycles=600, quiet=150)
    assert run.flags["overflow"] == 0 and run.flags["credit_error"] == 0 and run.credit_errors == []
    # the stopped output got the packets it had room for, in order, nothing more
    assert [d for _, d, _, _ in run.received[3]] == list(range(100, 100 + DEPTH))
    return dut, run


def test_a_blocked_online_phase_holds_the_switch_without_the_yield():
    _, run = _run(0)
    assert run.received[1] == []
    assert run.counters["selects"] == 1                 # the online phase, never left


def test_a_blocked_online_phase_yields_to_a_stored_packet_with_room_within_the_bound():
    """The slot-0 packet is on input 0's link in cycle STORED_AT, at its buffer's head the next
    cycle; the stream has been stuck for more than ``yield_after`` cycles, so the unit yields
    at once: DRAIN the cycle after (the online path was released when its last packet left),
    SELECT the cycle after that for the memory's ``select_cycles``, SETTLE one cycle, RUN
    starts the packet, and its first flit leaves ``latency`` cycles after it entered the
    datapath (the input FIFO's cycle, counted in ``latency``, already passed)."""
    dut, run = _run(None)
    assert dut.yield_after == dut.select_cycles > 0
    assert [d for _, d, _, _ in run.received[1]] == [7, 8, 9, 10]
    first = run.received[1][0][0]
    # head (1) + DRAIN (1) + SELECT's first cycle (1) + the rest of the select + SETTLE (1) +
    # latency: 14 cycles on Fred_3(4) (select 4, latency 6); measured 13 (2026-11-27)
    bound = 1 + 1 + 1 + dut.select_cycles + 1 + dut.latency
    assert first - STORED_AT <= bound, (first - STORED_AT, bound)
    # and not before the select could have completed: the yield paid one select
    assert first - STORED_AT >= dut.select_cycles + 2
    # online, slot 0, online again (the stream's packets still wait): no preemption, a yield
    assert run.counters["selects"] == 3 and run.counters["preemptions"] == 0


def test_the_guard_delays_the_yield_by_exactly_its_cycles():
    """The stored packet arrives with the stream's first packets, before the stream blocks (when
    the stopped output's 8 credits are spent): the unit yields in the (G + 1)-th cycle stuck in
    a row (guard G), so the stored packet leaves exactly 36 cycles later with a guard of 40
    than with one of 4 (a guard of 0 never yields: the hold rule)."""
    def first_stored(guard):
        dut = PacketSwitch(ports=P, middle=M, dtype="int32", lanes=1, phases=2, packet=PKT,
                           depth=DEPTH, online=True, yield_after=guard)
        inj = [Injection(2, START, pk) for pk in packetize(
            PKT, list(range(100, 100 + 4 * STREAM)), phase=ONLINE, vc=VC.DP, flow=2, first_seq=0,
            dest=3)]
        inj += [Injection(0, START + 2, pk) for pk in packetize(
            PKT, [7, 8, 9, 10], phase=0, vc=VC.DP, flow=0, first_seq=0)]
        run = run_packet_switch(dut, configs=[SLOT0], injections=inj,
                                host=flow_port_writer(dut, TABLE), drain_rate={3: 0.0},
                                max_cycles=600, quiet=150)
        assert [d for _, d, _, _ in run.received[1]] == [7, 8, 9, 10]
        assert [d for _, d, _, _ in run.received[3]] == list(range(100, 100 + DEPTH))
        return run.received[1][0][0]
    assert first_stored(40) - first_stored(4) == 36
