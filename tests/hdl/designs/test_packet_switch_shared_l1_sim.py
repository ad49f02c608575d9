"""Fred-B's L1 0 as one packet switch serving the striped I/O trees as shared stored flows
(docs/switch.md, "Shared stored flows"; the tables from hdl/compiler/io_stripe_shared.py), in
Amaranth's simulator: 18 stripes of 2 packets, every sender in ``stripe_packet_order``, the
packet fabric's buffer depth (``default_depth``: room for the credit loop through the switch).

io-broadcast: controllers 5..8 send stripes 0, 5, 10, 15 and the downlink (input 4) the other
14; each NPU output (0..3) gets all 18 stripes, the uplink (4) the four local ones.
io-reduce: every NPU input sends all 18 stripes, the uplink input the partial sums of the four
local stripes; each controller output gets its stripe's sum of five, the uplink the other
14 stripes' sums of four. Every flit checked once and in order per stripe and output."""

from __future__ import annotations

import pytest

from hdl.compiler.io_stripe_shared import shared_stripe_tables
from hdl.compiler.io_stripe_trees import stripe_packet_order
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.packet import VC, PacketFormat, packetize
from hdl.contracts.timing import reduction_latency, switch_latency
from hdl.designs.fabric.packet_fabric_top import default_depth
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.lib.scoreboard import TaggedScoreboard
from cocotb_tests.packet_sim import Injection, run_packet_switch

SPEC = fabric_spec("fred-b", io_controllers=18)
#: Fred-D: 8 trees at an L1 (Fred_3(12)), so 9 slots and a 4-bit phase
SPEC_D = fabric_spec("fred-d", io_controllers=18)
STRIPES, PACKETS, PF = 18, 2, 8


def value(port, stripe, seq, k):
    """Input ``port``'s flit k of packet seq of a stripe (small: sums of five fit 32 bits)."""
    return port << 20 | stripe << 12 | seq << 8 | k


def run_l1(op, *, drain_rate=1.0, rng=None, spec=SPEC, lockstep=False):
    t = shared_stripe_tables(spec, op, 0)
    ports = spec.switch_ports[0]
    PKT = PacketFormat(phase_bits=max(1, (t.phases - 1).bit_length()), seq_bits=8, flow_bits=5,
                       packet_flits=PF)
    dut = PacketSwitch(ports=ports, middle=spec.middle, dtype="int32", lanes=1, phases=t.phases,
                       packet=PKT, depth=default_depth(spec), shared_phase=t.shared_phase,
                       flows=STRIPES, shared_lockstep=lockstep)
    writes = [("port", e) for e in t.flow_ports] + [("flow", e) for e in t.stripe_slots.items()]

    async def host(ctx, cycle):
        kind, entry = writes[cycle] if cycle < len(writes) else (None, None)
        ctx.set(dut.flow_we, int(kind == "port"))
        ctx.set(dut.shared_we, int(kind == "flow"))
        if kind == "port":
            for signal, v in zip((dut.flow_slot, dut.flow_input, dut.flow_partners, dut.flow_outputs), entry):
                ctx.set(signal, v)
        elif kind == "flow":
            ctx.set(dut.shared_flow, entry[0])
            ctx.set(dut.shared_slot, entry[1])
            ctx.set(dut.shared_valid, 1)

    start = len(writes) + 2
    inj = []
    for stripe, seq in stripe_packet_order(STRIPES, PACKETS * PF, PF):
        for port, stripes in t.inputs.items():
            if stripe in stripes:
                inj.append(Injection(port, start, packetize(
                    PKT, [value(port, stripe, seq, k) for k in range(PF)], phase=t.shared_phase,
                    vc=VC.DP, flow=stripe, first_seq=seq)[0]))
    run = run_packet_switch(dut, configs=list(t.configs) + [None], injections=inj, host=host,
                            check_order=False, max_cycles=6000, quiet=60, drain_rate=drain_rate,
                            rng=rng)
    # expected: per output, per stripe, the sum over the inputs of the stripe's flow there
    board = TaggedScoreboard(f"{spec.name} L1 0 {op}", ordered=True)
    slots = t.stripe_slots
    by_slot = {}
    for slot, n, partners, outputs in t.flow_ports:
        by_slot.setdefault(slot, [set(), outputs])[0].add(n)
    for stripe in range(STRIPES):
        inputs, outputs = by_slot[slots[stripe]]
        for o in range(ports):
            if outputs >> o & 1:
                for i, (seq, k) in enumerate((s, k) for s in range(PACKETS) for k in range(PF)):
                    board.expect((o, stripe), i, sum(value(n, stripe, seq, k) for n in inputs) & 0xFFFFFFFF)
    seen = {}
    for o in range(ports):
        for _, v, _, tag in run.received[o]:
            stripe = PKT.unpack_header(tag)["flow"]
            i = seen.get((o, stripe), 0)
            seen[(o, stripe)] = i + 1
            board.observe((o, stripe), i, v)
    board.check()
    assert run.flags["overflow"] == 0 and run.flags["credit_error"] == 0 and run.credit_errors == []
    assert run.flags["busy"] == 0
    return dut, run, PKT


def check_gaps(spec, op, run, pkt):
    """Each NPU output's span: its 36 packets plus, per change of tree there, the hand-over
    behind's reduction latency (1 idle cycle on int32; the switch's latency + 1 before it,
    docs/switch.md, "Shared stored flows")."""
    idle = reduction_latency("int32")
    t = shared_stripe_tables(spec, op, 0)
    for o in range(spec.npus_per_l1):
        cycles = [c for c, *_ in run.received[o]]
        stripes = [pkt.unpack_header(tag)["flow"] for *_, tag in run.received[o]][::PF]
        changes = sum(t.stripe_slots[a] != t.stripe_slots[b] for a, b in zip(stripes, stripes[1:]))
        span = cycles[-1] - cycles[0] + 1
        assert span == STRIPES * PACKETS * PF + changes * idle
        assert changes >= 1


def test_io_broadcast_at_fred_b_l1_interleaves_the_five_trees():
    """Every NPU output carries the 36 packets; between two packets of different trees
    exactly the hand-over's reduction latency (1 idle cycle, docs/switch.md), between two of one
    tree none (the downlink's 14 stripes share slot 1): so each output's span is 36 packets
    plus 1 per change of tree seen there (latency + 1 = 12 per change before the hand-over
    behind: 288 + 10 x 12 = 408 cycles)."""
    _, run, pkt = run_l1("io-broadcast")
    check_gaps(SPEC, "io-broadcast", run, pkt)


def test_io_reduce_at_fred_b_l1_reduces_every_stripe():
    """Five-input reductions of five trees, each NPU input carrying all 18 stripes in the
    packet order: every packet is granted with its whole gang at its heads."""
    run_l1("io-reduce")


@pytest.mark.full
@pytest.mark.parametrize("lockstep", [False, True])
def test_io_reduce_at_fred_b_l1_under_half_rate_receivers(lockstep):
    import random
    run_l1("io-reduce", drain_rate=0.5, rng=random.Random(3), lockstep=lockstep)


@pytest.mark.parametrize("lockstep", [False, True])
def test_io_reduce_at_fred_b_l1_changes_tree_at_its_npu_inputs(lockstep):
    """Every NPU input carries the 36 packets of the 18 stripes in the packet order, all five
    trees reducing there (the home trees with the downlink, the up tree of the 14 others), every
    packet waiting whole: the gangs enter in lock step, so the switch passes a flit per cycle
    but for the changes of tree, each costing the reduction latency (1) with ``shared_lockstep``
    and the switch's latency + 1 (Fred_3(9): 12) without it. The outputs together carry the
    inputs' stream delayed by the latency, so their span is 36 packets plus that per change."""
    _, run, pkt = run_l1("io-reduce", lockstep=lockstep)
    t = shared_stripe_tables(SPEC, "io-reduce", 0)
    order = [stripe for stripe, _ in stripe_packet_order(STRIPES, PACKETS * PF, PF)]
    changes = sum(t.stripe_slots[a] != t.stripe_slots[b] for a, b in zip(order, order[1:]))
    cycles = sorted(c for o in range(SPEC.switch_ports[0]) for c, *_ in run.received[o])
    idle = reduction_latency("int32") if lockstep else switch_latency(
        ports=SPEC.switch_ports[0], middle=SPEC.middle, dtype="int32") + 1
    assert cycles[-1] - cycles[0] + 1 == STRIPES * PACKETS * PF + changes * idle


@pytest.mark.full
@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_fred_d_l1_serves_its_eight_trees(op):
    """Fred-D's L1 0 (Fred_3(12), 8 trees, 9 slots): the same checks."""
    _, run, pkt = run_l1(op, spec=SPEC_D)
    if op == "io-broadcast":
        check_gaps(SPEC_D, op, run, pkt)
