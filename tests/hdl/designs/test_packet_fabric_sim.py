"""The packet fabric (hdl/designs/fabric/packet_fabric_top.py: packet switches in header mode,
packetizing NPU engines, credit-based links) in Amaranth's simulator on a small in-switch
fabric (4 NPUs, two L1 Fred_3(3), an L2 Fred_3(2)): every collective completes with every flit
checked by the engines, every packet's sequence number in order at its NPU, no credit,
overflow or header error anywhere; plus the building blocks' hand cases."""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from hdl.compiler.fabric_program import fabric_program
from hdl.compiler.packet_fabric_program import flow_port_entries, packet_headers
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import VC, PacketFormat, stream_packets
from hdl.designs.fabric.packet_fabric_top import packet_format
from hdl.designs.fabric.packetizer import Packetizer

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth

SMALL = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1)
#: the same with Fred-B's half-rate uplink
SMALL_HALF = fabric_spec("fred-b", npus=4, npus_per_l1=2)


@pytest.mark.parametrize("op, backpressure", [("all-reduce", 0.0), ("all-reduce", 0.3),
                                              ("reduce", 0.3), ("multicast", 0.0)])
def test_in_switch_collectives_complete_checked_on_the_small_packet_fabric(op, backpressure):
    size = 21          # two full 8-flit packets and a short one
    request = make_request(SMALL, op=op, size_flits=size, group="wafer")
    run = run_packet_fabric_amaranth(SMALL, request, sink_backpressure=backpressure,
                                     watchdog_cycles=4000)
    assert run.errors == []
    receivers = [r for r, e in enumerate(run.program.engines) if e["recv_count"]]
    assert receivers and all(run.engines[r]["received"] == size for r in receivers)
    # every switch selected its one phase from the first header, once
    assert [s["selects"] for s in run.switches] == [1, 1, 1]
    # bounds: at least the stream through the fabric, at most that plus generous slack
    assert size <= run.cycles <= size * (3 if backpressure else 1) + 200


def test_a_half_rate_uplink_carries_the_all_reduce_in_about_twice_the_size():
    """Fred-B's uplink (1/2 flit per cycle): the L1s' reduced streams queue at the uplink and
    leave at half rate, so the all-reduce takes about 2 x size plus latency."""
    size = 48
    request = make_request(SMALL_HALF, op="all-reduce", size_flits=size, group="wafer")
    run = run_packet_fabric_amaranth(SMALL_HALF, request, watchdog_cycles=4000)
    assert run.errors == []
    assert 2 * size <= run.cycles <= 2 * size + 60


def test_packet_fabric_cycles_grow_by_one_per_flit():
    """Doubling the size adds about the size in cycles (one flit per cycle per link)."""
    cycles = []
    for size in (16, 48):
        request = make_request(SMALL, op="all-reduce", size_flits=size, group="wafer")
        run = run_packet_fabric_amaranth(SMALL, request, watchdog_cycles=4000)
        assert run.errors == []
        cycles.append(run.cycles)
    assert 32 <= cycles[1] - cycles[0] <= 32 + 8


@pytest.mark.parametrize("register, value, named", [
    ("phase", 5, "flags 0x1"),          # an unloaded slot: the L1 drops NPU 0's packets
    ("last_seq", 1, "errors"),          # NPU 0 expects its stream to end a packet early
])
def test_a_wrong_header_program_is_caught(register, value, named):
    from hdl.designs.fabric.packet_fabric_top import PACKET_REGS

    def edit(load):
        writes = [[u, r, value if (u, r) == (0, PACKET_REGS[register]) else v]
                  for u, r, v in load["writes"]]
        return {**load, "writes": writes}
    request = make_request(SMALL, op="all-reduce", size_flits=21, group="wafer")
    with pytest.raises(FredError, match=named):
        run = run_packet_fabric_amaranth(SMALL, request, watchdog_cycles=1500, edit_load=edit)
        if run.errors:
            raise FredError("; ".join(run.errors))


def test_packet_headers_name_the_collective_slot_flow_and_last_sequence_number():
    spec = fabric_spec("fred-d")
    request = make_request(spec, op="all-reduce", size_flits=20, strategy="MP2-DP5-PP2", dim="dp")
    program = fabric_program(spec, request)
    fmt = packet_format(8)
    headers = packet_headers(program, request, fmt)
    flows = {h["flow"] for h in headers}
    assert flows == set(range(len(request.collectives)))
    for index, coll in enumerate(request.collectives):
        assert {headers[r]["flow"] for r in coll.ranks} == {index}
    assert all(h["phase"] == 0 and h["vc"] == VC.DP and h["last_seq"] == 2 for h in headers)


def test_flow_port_entries_name_each_inputs_reduction_partners_and_outputs():
    """The small fabric's wafer all-reduce (hand-derived): each L1 (ports 0, 1 = its NPUs, 2 =
    the uplink) reduces its NPUs up (partners of each other, output the uplink) and sends the
    uplink's result to both NPUs; the L2 (ports 0, 1 = the L1s) reduces both and returns the
    sum to both."""
    request = make_request(SMALL, op="all-reduce", size_flits=16, group="wafer")
    tables = flow_port_entries(fabric_program(SMALL, request))
    l1 = {(0, 0, 0b010, 0b100), (0, 1, 0b001, 0b100), (0, 2, 0, 0b011)}
    assert [set(t) for t in tables] == [l1, l1, {(0, 0, 0b10, 0b11), (0, 1, 0b01, 0b11)}]


def test_what_the_packet_fabric_does_not_run_yet_is_refused_by_name():
    spec = fabric_spec("fred-c")
    request = make_request(spec, op="all-reduce", size_flits=400, group="wafer")
    program = fabric_program(spec, request, algorithm="hierarchical")
    with pytest.raises(FredError, match="one-stage"):
        packet_headers(program, request, packet_format(8))
    # two reductions sharing the uplink on one VC and two on another: a switch follows one
    # phase order
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    four = FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 4)),
                                        FabricCollective("all-reduce", (1, 5)),
                                        FabricCollective("all-reduce", (2, 6)),
                                        FabricCollective("all-reduce", (3, 7))), 40, "four")
    eight = fabric_spec("fred-b", npus=8, npus_per_l1=4)
    with pytest.raises(FredError, match=r"L1\.0 has several phases on VCs \['DP', 'MP'\]"):
        packet_headers(fabric_program(eight, four), four, packet_format(8),
                       vcs={0: VC.DP, 1: VC.DP, 2: VC.MP, 3: VC.MP})


def test_the_packetizer_cuts_packets_numbers_them_and_waits_for_credits():
    """10 flits, 4-flit packets, 4 credits: the first packet leaves at once, the second when
    the receiver has freed 4 slots (one per cycle from cycle 12), the third is the short
    remainder; the header names the NPU's phase, VC and flow and numbers the packets."""
    fmt = PacketFormat(phase_bits=1, seq_bits=4, flow_bits=2, packet_flits=4)
    dut = Packetizer(flit=FlitFormat(dtype="int32", lanes=1, tag_width=1), packet=fmt, depth=4)
    seen = []

    async def bench(ctx):
        ctx.set(dut.vc, VC.MP)
        ctx.set(dut.flow, 2)
        ctx.set(dut.phase, 1)
        k, freed = 0, 0
        for cycle in range(40):
            ctx.set(dut.i.valid, k < 10)
            ctx.set(dut.i.payload.data, k)
            ctx.set(dut.i.payload.last, k == 9)
            give = int(cycle >= 12 and freed < len(seen))
            ctx.set(dut.credit[VC.MP], give)
            freed += give
            if ctx.get(dut.o.valid):
                seen.append((cycle, ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.last),
                             fmt.unpack_header(ctx.get(dut.o.payload.tag))))
            taken = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            await ctx.tick()
            k += int(taken)
        assert not ctx.get(dut.credit_error)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert [d for _, d, _, _ in seen] == list(range(10))
    assert [last for _, _, last, _ in seen] == [0, 0, 0, 1] * 2 + [0, 1]
    assert [h["seq"] for *_, h in seen] == [0] * 4 + [1] * 4 + [2] * 2
    assert all(h["flow"] == 2 and h["vc"] == VC.MP and h["phase"] == 1 for *_, h in seen)
    cycles = [c for c, *_ in seen]
    assert cycles[:4] == [0, 1, 2, 3]
    assert cycles[4] == 16        # 4 credits back in cycles 12..15


def test_the_packetizer_ends_a_packet_at_its_chunks_end():
    """12 flits in chunks of 6 (``cut`` on flits 5 and 11), 4-flit packets, credits to spare:
    each chunk is cut into packets of 4 and 2 flits (issue 28: no packet holds two chunks), so
    4 packets, numbered 0..3, not 3 of 4."""
    fmt = PacketFormat(phase_bits=1, seq_bits=4, flow_bits=2, packet_flits=4)
    dut = Packetizer(flit=FlitFormat(dtype="int32", lanes=1, tag_width=1), packet=fmt, depth=16)
    seen = []

    async def bench(ctx):
        ctx.set(dut.vc, VC.DP)
        k = 0
        for _ in range(20):
            ctx.set(dut.i.valid, k < 12)
            ctx.set(dut.i.payload.data, k)
            ctx.set(dut.i.payload.last, k == 11)
            ctx.set(dut.cut, k % 6 == 5)
            if ctx.get(dut.o.valid):
                seen.append((ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.last),
                             fmt.unpack_header(ctx.get(dut.o.payload.tag))["seq"]))
            taken = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            await ctx.tick()
            k += int(taken)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert [d for d, _, _ in seen] == list(range(12))
    assert [last for _, last, _ in seen] == [0, 0, 0, 1, 0, 1] * 2
    assert [seq for *_, seq in seen] == [0] * 4 + [1] * 2 + [2] * 4 + [3] * 2
    assert stream_packets(12, 4, 6) == 4


def _dp_and_mp(spec, dp_ranks, mp_ranks, size):
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    return FabricRequest("all-reduce", (FabricCollective("all-reduce", dp_ranks),
                                        FabricCollective("all-reduce", mp_ranks)), size, "DP + MP")


def test_mp_started_later_preempts_dp_at_every_switch_and_both_complete():
    """Concurrent traffic classes on the 4-NPU fabric: a DP all-reduce of NPUs 0, 2 (VC DP,
    slot 0) and an MP all-reduce of NPUs 1, 3 (VC MP, slot 1) starting 30 cycles later: every
    switch preempts DP once and selects DP again afterwards; every flit checked."""
    request = _dp_and_mp(SMALL, (0, 2), (1, 3), 200)
    run = run_packet_fabric_amaranth(SMALL, request, watchdog_cycles=4000,
                                     vcs={0: VC.DP, 1: VC.MP}, delays={1: 30})
    assert run.errors == []
    assert [(s["selects"], s["preemptions"]) for s in run.switches] == [(3, 1)] * 3
    # both share the one uplink: at least the 400 flits it carries each way
    assert 400 <= run.cycles <= 400 + 150


THREE_L1 = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1)


def test_mp_preempting_dp_on_some_switches_of_a_reduction_completes():
    """The regression of a cross-switch deadlock (docs/fabric_rtl.md, "Packet fabric"): the DP
    all-reduce of NPUs 0, 2, 4 (one per L1) and an MP all-reduce of NPUs 1, 3 (L1.0 and
    L1.1) from cycle 30. L1.0 and L1.1 preempt DP, L1.2 (no MP) keeps sending DP. The L2
    used to start DP packets with only L1.2's operand present and then wait, draining, for
    the operands queued behind the L1s' MP traffic. With the flow-port tables written, a
    packet starts only with every operand present and room for it downstream, so the L2's
    datapath stays empty, it preempts DP too, and both complete with every flit checked."""
    request = _dp_and_mp(THREE_L1, (0, 2, 4), (1, 3), 200)
    run = run_packet_fabric_amaranth(THREE_L1, request, watchdog_cycles=3000,
                                     vcs={0: VC.DP, 1: VC.MP}, delays={1: 30})
    assert run.errors == []
    assert run.flits_checked == 3 * 200 + 2 * 200
    # L1.0, L1.1 and the L2 carry both classes and preempt DP once; L1.2 only DP
    assert [(s["selects"], s["preemptions"]) for s in run.switches] == [(3, 1), (3, 1), (1, 0),
                                                                         (3, 1)]


def test_without_the_flow_port_tables_mp_preempting_dp_on_some_switches_hangs():
    """The mechanism: the same run with no flow-port table entry written (packets start as
    soon as their own head is there) hangs as before: L1.0 on the MP slot with its datapath
    full, L1.2 still on DP, the L2 draining DP with a reduction's operand inside."""
    request = _dp_and_mp(THREE_L1, (0, 2, 4), (1, 3), 200)

    def without_tables(load):
        npus = THREE_L1.npus
        return {**load, "writes": [w for w in load["writes"] if w[0] < npus]}

    with pytest.raises(FredError, match=r"L1\.0 RUN slot 1 busy 1.*L1\.2 RUN slot 0.*L2 DRAIN slot 0 busy 1"):
        run_packet_fabric_amaranth(THREE_L1, request, watchdog_cycles=3000,
                                   vcs={0: VC.DP, 1: VC.MP}, delays={1: 30},
                                   edit_load=without_tables)


def _without_phase_orders(spec):
    """edit_load: the switches' phase orders left out (length 0: phases picked by arrival)."""
    from hdl.designs.fabric.packet_fabric_top import ORDER_REGS

    def edit(load):
        return {**load, "writes": [w for w in load["writes"]
                                   if w[0] < spec.npus or w[1] not in ORDER_REGS.values()]}
    return edit


def test_two_dp_all_reduces_sharing_the_half_rate_uplink_complete_in_one_phase_order():
    """Fred-B's DP groups in miniature: the all-reduces of NPUs 0, 2 and of NPUs 1, 3 both on
    VC DP, two stored phases at every switch, the L1s' one half-rate uplink shared, random
    NPU-sink backpressure. Every switch follows the programmed phase order (docs/switch.md,
    "Phase order"): slot 0 until its last packets, then slot 1, so the L2's input buffers
    get the two reductions' packets in one order; every flit checked. Without the order
    (next test) the same run hangs."""
    size = 120
    request = _dp_and_mp(SMALL_HALF, (0, 2), (1, 3), size)
    run = run_packet_fabric_amaranth(SMALL_HALF, request, watchdog_cycles=4000,
                                     sink_backpressure=0.5, seed=0)
    assert run.errors == []
    assert [s["selects"] for s in run.switches] == [2, 2, 2]
    # the uplink carries both reductions at half rate: at least 2 x 2 x size cycles
    assert 4 * size <= run.cycles


@pytest.mark.full
def test_without_the_phase_order_two_dp_all_reduces_hang_under_backpressure():
    """The mechanism: the same run with no phase order written. L1.0 selects slot 1 (NPU 1's
    packets wait) while slot 0's last reduced packets for NPU 0 are still behind in its
    uplink input's DP buffer, which slot 1's reduced packets need: nothing moves."""
    request = _dp_and_mp(SMALL_HALF, (0, 2), (1, 3), 120)
    with pytest.raises(FredError, match=r"not done after.*L1\.0 RUN slot 1"):
        run_packet_fabric_amaranth(SMALL_HALF, request, watchdog_cycles=600,
                                   sink_backpressure=0.5, seed=0,
                                   edit_load=_without_phase_orders(SMALL_HALF))
