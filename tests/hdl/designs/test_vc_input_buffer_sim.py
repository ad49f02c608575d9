"""The packet switch's input port (hdl/designs/switch/vc_input_buffer.py) in Amaranth's simulator against
a naive reference: per-VC FIFOs, credit return (never more credits than slots), malformed
headers dropped whole and counted, overflow flagged when a sender ignores its credits."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import VC, PacketFormat
from hdl.designs.switch.vc_input_buffer import VCInputBuffer

PKT = PacketFormat(phase_bits=2, seq_bits=4, flow_bits=2, packet_flits=3)
FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=PKT.header_width)
PHASES = 3


def reference(packets, loaded):
    """Naive model: what each VC FIFO receives, in order, and how many packets are dropped."""
    stored, dropped = {v: [] for v in range(3)}, 0
    for header, flits in packets:
        h = PKT.unpack_header(header)
        if h["phase"] >= PHASES or not loaded >> h["phase"] & 1 or h["vc"] >= 3:
            dropped += 1
            continue
        stored[h["vc"]] += [FLIT.fields.pack(data=d, last=n == len(flits) - 1, tag=header)
                            for n, d in enumerate(flits)]
    return stored, dropped


def random_packets(rng, count):
    packets = []
    for n in range(count):
        phase = rng.choice([0, 1, 2, 2, 1, 3])          # 3 is >= K
        vc = rng.choice([0, 1, 2, 0, 1, 2, 3])          # 3 is not a data VC
        header = PKT.pack_header(phase=phase, vc=vc, seq=n % 16, flow=rng.randrange(4))
        packets.append((header, [rng.getrandbits(32) for _ in range(rng.randint(1, 3))]))
    return packets


def run(dut, packets, *, loaded, rng, honour_credits=True, read_rate=0.6, max_cycles=5000):
    out = {v: [] for v in range(3)}
    log = {"max_credit": [0, 0, 0], "credits": None}

    async def bench(ctx):
        credits = [dut.depth] * 3
        ctx.set(dut.loaded, loaded)
        queue = [(h, list(f)) for h, f in packets]
        current = None
        sel = 0
        for cycle in range(max_cycles):
            # sender: a packet starts only with credits for all its flits (virtual cut-through)
            send = None
            if current is None and queue and rng.random() < 0.8:
                header, flits = queue[0]
                v = PKT.unpack_header(header)["vc"]
                if not honour_credits or v >= 3 or credits[v] >= len(flits):
                    current = [header, flits, 0, v]
                    queue.pop(0)
            if current is not None and rng.random() < 0.8:
                header, flits, n, v = current
                send = FLIT.fields.pack(data=flits[n], last=n == len(flits) - 1,
                                        tag=header ^ (n > 0))   # later tags are ignored
                if v < 3:
                    credits[v] -= 1
                current[2] += 1
                if current[2] == len(flits):
                    current = None
            ctx.set(dut.i.valid, send is not None)
            ctx.set(dut.i.payload.as_value(), send or 0)
            if rng.random() < 0.3:
                sel = rng.randrange(3)
            ctx.set(dut.sel, sel)
            ctx.set(dut.o.ready, rng.random() < read_rate)
            _, _, valid, ready, payload, *credit = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload.as_value(), *dut.credit)
            if valid and ready:
                out[sel].append(int(payload))
            for v in range(3):
                if credit[v]:
                    credits[v] += credit[v]
                    log["max_credit"][v] = max(log["max_credit"][v], credits[v])
            if not queue and current is None and credits == [dut.depth] * 3 and cycle > 50:
                break
        log["credits"] = credits
        log["dropped"] = ctx.get(dut.dropped)
        log["bad_header"] = ctx.get(dut.bad_header)
        log["overflow"] = ctx.get(dut.overflow)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, log


@pytest.mark.parametrize("seed,depth", [(1, 3), (2, 4), (3, 7)])
def test_random_packets_match_the_reference_and_credits_balance(seed, depth):
    rng = random.Random(seed)
    packets = random_packets(rng, 60)
    loaded = 0b011   # phase 2 not loaded, phase 3 out of range
    dut = VCInputBuffer(flit=FLIT, packet=PKT, phases=PHASES, depth=depth)
    out, log = run(dut, packets, loaded=loaded, rng=rng)
    stored, dropped = reference(packets, loaded)
    assert dropped > 5    # the mix exercises the drop path
    assert out == stored
    assert log["dropped"] == dropped and log["bad_header"] == 1 and log["overflow"] == 0
    # every credit came back and never more than the buffer holds
    assert log["credits"] == [depth] * 3 and log["max_credit"] == [depth] * 3


def test_good_traffic_raises_no_flag():
    rng = random.Random(5)
    packets = [(PKT.pack_header(phase=n % 2, vc=n % 3, seq=n, flow=0), [n, n + 1]) for n in range(12)]
    dut = VCInputBuffer(flit=FLIT, packet=PKT, phases=PHASES, depth=4)
    out, log = run(dut, packets, loaded=0b011, rng=rng)
    assert out == reference(packets, 0b011)[0]
    assert (log["dropped"], log["bad_header"], log["overflow"]) == (0, 0, 0)


def test_a_sender_that_ignores_credits_sets_overflow():
    rng = random.Random(7)
    packets = [(PKT.pack_header(phase=0, vc=VC.DP, seq=n, flow=0), [n, n, n]) for n in range(3)]
    dut = VCInputBuffer(flit=FLIT, packet=PKT, phases=PHASES, depth=4)
    _, log = run(dut, packets, loaded=0b001, rng=rng, honour_credits=False, read_rate=0.0,
                 max_cycles=100)
    assert log["overflow"] == 1


def test_bad_parameters_are_refused():
    with pytest.raises(FredError, match="depth"):
        VCInputBuffer(flit=FLIT, packet=PKT, phases=PHASES, depth=2)
    with pytest.raises(FredError, match="tag_width"):
        VCInputBuffer(flit=FlitFormat(dtype="int32", lanes=1, tag_width=4), packet=PKT,
                      phases=PHASES, depth=4)
    with pytest.raises(FredError, match="phases"):
        VCInputBuffer(flit=FLIT, packet=PKT, phases=5, depth=4)


def test_a_dropped_flits_credit_leaves_one_cycle_after_it_arrives_and_a_reads_at_once():
    """The credit outputs depend on no input of the same cycle (a fabric is cut at its links
    for the lock-step simulator, docs/switch.md "Links and credits"): a dropped flit's credit
    is registered, one cycle after the flit; a read's comes in the cycle of the read."""
    dut = VCInputBuffer(flit=FLIT, packet=PKT, phases=PHASES, depth=4)
    bad = PKT.pack_header(phase=2, vc=VC.DP, seq=0, flow=0)     # phase 2 is not loaded
    good = PKT.pack_header(phase=0, vc=VC.MP, seq=1, flow=0)
    seen = []

    async def bench(ctx):
        ctx.set(dut.loaded, 0b001)
        ctx.set(dut.sel, VC.MP)
        # cycle 0: a one-flit malformed packet on DP; cycle 1: a good one on MP; then idle
        for header, data in ((bad, 7), (good, 8), (None, 0), (None, 0), (None, 0)):
            ctx.set(dut.i.valid, header is not None)
            ctx.set(dut.i.payload.as_value(),
                    FLIT.fields.pack(data=data, last=1, tag=header) if header is not None else 0)
            ctx.set(dut.o.ready, 1)
            _, _, valid, *credit = await ctx.tick().sample(dut.o.valid, *dut.credit)
            seen.append((valid, tuple(credit)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    mp, dp = VC.MP, VC.DP
    # cycle 0: the bad flit arrives, no credit yet; cycle 1: its DP credit; the good flit is at
    # the head in cycle 2 and read then, its MP credit in that same cycle
    assert [c[dp] for _, c in seen] == [0, 1, 0, 0, 0]
    assert [c[mp] for _, c in seen] == [0, 0, 1, 0, 0]
    assert [v for v, _ in seen] == [0, 0, 1, 0, 0]
