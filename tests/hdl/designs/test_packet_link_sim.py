"""The packet fabric's link below full rate (hdl/designs/fabric/packet_link.py, Fred-A/B's
uplinks) in Amaranth's simulator: a queue per VC at its entry, served MP > PP > DP at packet
boundaries, so an MP packet waits for the rest of one DP packet, not for every DP flit the
switch had queued; under random receiver backpressure no flit is lost, duplicated or reordered
within a VC, packets never interleave on the wire, and no queue or receiver buffer overflows."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PRIORITY, VC, PacketFormat
from hdl.designs.fabric.packet_link import PacketLink
from hdl.designs.layouts import flit_layout

PACKET = PacketFormat(phase_bits=3, seq_bits=16, flow_bits=6, packet_flits=8)
SHAPE = flit_layout(FlitFormat(dtype="int32", lanes=1, tag_width=PACKET.header_width))
DEPTH = 24           # the receiver's flits per VC, as Fred-A..D's default_depth
LATENCY = 2


class _Sender:
    """A switch output as the link sees it: whole packets of one VC (virtual cut-through: a
    packet starts only with a packet's credits), at a packet boundary the highest-priority VC
    with a packet due; ``gap`` the chance of an idle cycle inside a packet (a reduction whose
    operands come late)."""

    def __init__(self, streams, rng, gap):
        self.due = {v: [] for v in DATA_VCS}          # packets (first flit number) by VC
        for start, vc, packets in streams:
            self.due[vc] += [(start, k) for k in range(packets)]
        self.credits = {v: DEPTH for v in DATA_VCS}
        self.rng, self.gap = rng, gap
        self.sent = {v: [] for v in DATA_VCS}         # data of each flit sent, by VC
        self.sent_at = {v: [] for v in DATA_VCS}      # ... and its cycle
        self.packet = None                            # (vc, flits left)

    def flit(self, t):
        """The flit sent in cycle t, as (vc, data, last), or None."""
        if self.packet is None:
            for v in PRIORITY:
                if self.due[v] and self.due[v][0][0] <= t and self.credits[v] >= PACKET.packet_flits:
                    self.due[v].pop(0)
                    self.packet = (v, PACKET.packet_flits)
                    break
        if self.packet is None or (self.packet[1] < PACKET.packet_flits and self.rng.random() < self.gap):
            return None
        vc, left = self.packet
        self.packet = (vc, left - 1) if left > 1 else None
        self.credits[vc] -= 1
        data = (int(vc) << 16) | len(self.sent[vc])
        self.sent[vc].append(data)
        self.sent_at[vc].append(t)
        return vc, data, left == 1


def _run(streams, *, rate, cycles, take=1.0, gap=0.0, seed=0):
    """Drive a ``PacketLink`` of ``rate`` with ``streams`` = [(start cycle, VC, packets)];
    the receiver frees a flit of a random VC with probability ``take`` per cycle. Returns the
    sender, the flits leaving the link [(cycle, vc, data, last)], the receiver's largest
    occupancy per VC and the link's ``overflow``."""
    rng = random.Random(seed)
    dut = PacketLink(SHAPE, latency=LATENCY, rate=rate, depth=DEPTH, packet=PACKET)
    sender = _Sender(streams, rng, gap)
    out, held = [], {v: [] for v in DATA_VCS}
    result = {"most": {v: 0 for v in DATA_VCS}, "overflow": 0}

    async def bench(ctx):
        for t in range(cycles):
            for v in DATA_VCS:
                sender.credits[v] += ctx.get(dut.credit_out[v])
            flit = sender.flit(t)
            ctx.set(dut.i.valid, flit is not None)
            if flit is not None:
                vc, data, last = flit
                ctx.set(dut.i.payload.data, data)
                ctx.set(dut.i.payload.last, last)
                ctx.set(dut.i.payload.tag, PACKET.pack_header(phase=0, vc=vc, seq=0, flow=0))
            freed = [v for v in DATA_VCS if held[v]]
            for v in DATA_VCS:
                ctx.set(dut.credit_in[v], 0)
            if freed and rng.random() < take:
                v = rng.choice(freed)
                held[v].pop(0)
                ctx.set(dut.credit_in[v], 1)
            if ctx.get(dut.o.valid):
                tag = ctx.get(dut.o.payload.tag)
                vc = VC((tag >> PACKET.header["vc"].offset) & 3)
                data = ctx.get(dut.o.payload.data)
                out.append((t, vc, data, ctx.get(dut.o.payload.last)))
                held[vc].append(data)
                result["most"][vc] = max(result["most"][vc], len(held[vc]))
            await ctx.tick()
        result["overflow"] = ctx.get(dut.overflow)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return sender, out, result


def test_an_mp_packet_overtakes_queued_dp_flits_at_the_next_packet_boundary():
    """Fred-B's half-rate uplink: the switch fills the link's entry with DP flits (its 24
    credits) at full rate; an MP packet sent at cycle 30 leaves after the rest of the DP
    packet on the wire (at most 8 flits = 16 cycles), not after every queued DP flit (a
    queue for all VCs: about 20 flits, 40 cycles)."""
    mp_start = 30
    sender, out, result = _run([(0, VC.DP, 12), (mp_start, VC.MP, 1)], rate=(1, 2), cycles=260)
    mp_sent = sender.sent_at[VC.MP][0]
    mp_out = [t for t, vc, _, _ in out if vc == VC.MP]
    assert mp_sent >= mp_start
    # the rest of one DP packet at half rate, then MP's own flits at half rate
    assert mp_out[0] - mp_sent <= 2 * PACKET.packet_flits + LATENCY
    assert mp_out[-1] - mp_sent <= 4 * PACKET.packet_flits + LATENCY
    assert len(mp_out) == PACKET.packet_flits and result["overflow"] == 0
    # DP queued at least a packet beyond the one on the wire when MP came (the case is real)
    dp_out_before = sum(1 for t, vc, _, _ in out if vc == VC.DP and t < mp_sent)
    dp_sent_before = sum(1 for t in sender.sent_at[VC.DP] if t < mp_sent)
    assert dp_sent_before - dp_out_before >= 2 * PACKET.packet_flits


@pytest.mark.parametrize("rate, seed", [((1, 2), 1), ((1, 2), 2), ((2, 3), 3)])
def test_random_backpressure_loses_duplicates_and_interleaves_nothing(rate, seed):
    rng = random.Random(seed)
    streams = [(rng.randrange(0, 200), rng.choice(DATA_VCS), rng.randrange(1, 5))
               for _ in range(12)]
    sender, out, result = _run(streams, rate=rate, cycles=1500, take=0.35, gap=0.2, seed=seed)
    assert result["overflow"] == 0
    assert all(n <= DEPTH for n in result["most"].values())
    for v in DATA_VCS:      # every flit once, in its VC's order
        assert [d for _, vc, d, _ in out if vc == v] == sender.sent[v]
    assert sum(len(s) for s in sender.sent.values()) == sum(8 * p for _, _, p in streams)
    owner = None             # packets never interleave on the wire
    for _, vc, _, last in out:
        assert owner in (None, vc)
        owner = None if last else vc
    # never above the rate: at most a flits in any b consecutive cycles (+ one saved)
    a, b = rate
    times = [t for t, *_ in out]
    assert all(times[i + a + 1] - times[i] >= b for i in range(len(times) - a - 1))


def test_a_link_below_full_rate_needs_the_packet_format():
    with pytest.raises(FredError, match="PacketFormat"):
        PacketLink(SHAPE, latency=LATENCY, rate=(1, 2), depth=DEPTH)
