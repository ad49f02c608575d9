"""The I/O controller's packet buffer (hdl/designs/fabric/packet_assembler.py) and the controller
that uses it (hdl/designs/fabric/io_controller.py) in Amaranth's simulator: a packet is offered
only when all of it is in the buffer, so it leaves in consecutive cycles; the controller's
packet p leaves ceil((p + 1) k 375/16) cycles after its memory's first offer (the paced
limiter's rounding, then the buffer's one cycle); no flit is lost, duplicated, reordered or
corrupted under random producer gaps, consumer stalls and credit gaps. The assembler's
producer and consumer are ``run_streams``'s (tests/conftest.py: valid held until the
transfer); the controller's bench is its own, since its output is a credit link (no
``ready``: the L1's credits come back after random gaps)."""

import random
from fractions import Fraction

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import engine_writes, flit_value
from hdl.designs.fabric.io_controller import IoController
from hdl.designs.fabric.packet_assembler import PacketAssembler
from hdl.designs.fabric.packet_fabric_top import packet_format
from hdl.designs.layouts import chunked_flit_layout, flit_layout

FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=1)


def _assemble(run_streams, flits, size, *, seed, idle=0.5, backpressure=0.3):
    """Push ``flits`` data words (the last one with ``last``) through a PacketAssembler of
    ``size``-flit packets with ``run_streams`` (valid held until the transfer), random
    producer gaps (``idle``) and consumer stalls (``backpressure``); returns (the words taken,
    in order, with their ``last`` and cycle; per taken flit, how many flits the producer had
    pushed before that cycle)."""
    dut = PacketAssembler(flit_layout(FLIT), packet_flits=size)
    words = [FLIT.pack([n], last=int(n == flits - 1)) for n in range(flits)]
    result = run_streams(dut, inputs={"i": (dut.i, words)}, outputs={"o": dut.o},
                         idle=idle, backpressure=backpressure, rng=random.Random(seed),
                         until=lambda received: len(received["o"]) == flits,
                         max_cycles=50 * flits + 100)
    pushed = result["sent"]["i"]
    taken = []
    for cycle, word in result["received"]["o"]:
        lanes, last, _ = FLIT.unpack(word)
        taken.append((lanes[0], last, cycle, sum(1 for c in pushed if c < cycle)))
    return taken


@pytest.mark.parametrize("flits,size,seed", [(8 * 7 + 5, 8, 1), (64, 8, 2), (30, 4, 3), (9, 1, 4)])
def test_no_flit_is_lost_and_a_packet_is_offered_only_once_all_of_it_is_in(flits, size, seed,
                                                                           run_streams):
    taken = _assemble(run_streams, flits, size, seed=seed)
    assert [word for word, *_ in taken] == list(range(flits))       # none lost, duplicated, reordered
    assert [last for _, last, *_ in taken] == [int(w == flits - 1) for w in range(flits)]
    for word, _, _, pushed in taken:
        packet_end = min((word // size + 1) * size, flits)
        assert pushed >= packet_end, (word, pushed)    # the whole packet was in the buffer


def test_a_chunks_end_ends_the_assembled_packet_as_the_packetizer_cuts_it(run_streams):
    """A paced NPU's stream in 12-flit chunks (``cut`` on each chunk's last flit,
    :func:`~hdl.designs.layouts.chunked_flit_layout`), 8-flit packets: the assembler's packets
    are the packetizer's, 8 + 4 flits per chunk, so a flit is offered once its chunk-cut
    packet is in (flit 12's packet is flits 12-19, not 8-15) and not later than that (flit 8's
    is 8-11); ``cut`` and ``last`` leave with their flits."""
    flits, size, chunk = 36, 8, 12
    dut = PacketAssembler(chunked_flit_layout(FLIT), packet_flits=size)
    cut_bit = 1 << (FLIT.data_width + 1 + FLIT.tag_width)       # data, last, tag, then cut
    words = [FLIT.pack([n], last=int(n == flits - 1)) | cut_bit * (n % chunk == chunk - 1)
             for n in range(flits)]
    result = run_streams(dut, inputs={"i": (dut.i, words)}, outputs={"o": dut.o}, idle=0.5,
                         backpressure=0.0, rng=random.Random(7),
                         until=lambda received: len(received["o"]) == flits, max_cycles=2000)
    pushed = result["sent"]["i"]
    taken = [(word, cycle) for cycle, word in result["received"]["o"]]
    assert [word for word, _ in taken] == words                 # none lost, reordered, altered
    starts = [c + o for c in range(0, flits, chunk) for o in range(0, chunk, size)]
    for n, (_, cycle) in enumerate(taken):
        start = max(s for s in starts if s <= n)
        end = min(start + size, (start // chunk + 1) * chunk)
        assert sum(1 for c in pushed if c < cycle) >= end, n     # its whole packet was in
    # offered the cycle after its packet's last flit entered (the consumer never stalls)
    for start in starts:
        end = min(start + size, (start // chunk + 1) * chunk)
        assert taken[start][1] <= pushed[end - 1] + 1 or taken[start][1] == taken[start - 1][1] + 1


def test_a_whole_packet_leaves_in_consecutive_cycles_when_the_consumer_takes_it(run_streams):
    taken = _assemble(run_streams, 8 * 5 + 3, 8, seed=5, idle=0.7, backpressure=0.0)
    cycles = [cycle for _, _, cycle, _ in taken]
    for p in range(6):
        packet = cycles[8 * p:8 * (p + 1)]
        assert packet == list(range(packet[0], packet[0] + len(packet)))


def test_packet_flits_is_checked():
    with pytest.raises(FredError, match="packet_flits must be an integer >= 1, got 0"):
        PacketAssembler(flit_layout(FLIT), packet_flits=0)


def _controller(flits, *, credit_gap, seed, depth=16):
    """Run an IoController at 16/375 that sends ``flits`` flits of its memory, the L1 returning
    a credit per received flit after a random gap (``credit_gap(rng)`` cycles); returns the
    cycle of the memory's first offer (the engine's first ``tx.valid``) and every flit that
    left (cycle, data, last, seq), and the packetizer's credit error."""
    rng = random.Random(seed)
    fmt = packet_format(1)
    dut = IoController(flit=FLIT, packet=fmt, depth=depth, rate=Fraction(16, 375))
    w, h = 0x1234567, 0x89ABCDE
    engine = dict(backpressure=0, seed=0, stages=[dict(
        send_count=flits, recv_count=0, ws=w, hs=h, wr=0, hr=0, own_only=flits, add_until=0,
        fwd_count=0, check_from=0, chunk=0xFFFFFFFF, last_base=0, out_base=0, in_base=0, org=0)])
    seq = fmt.header["seq"]
    out = {"sent": [], "first_offer": None, "credit_error": 0}
    limit = (flits + 16) * 375 // 16 + 500 * flits

    async def bench(ctx):
        for reg, value in engine_writes(engine):
            ctx.set(dut.engine.we, 1)
            ctx.set(dut.engine.waddr, reg)
            ctx.set(dut.engine.wdata, value)
            await ctx.tick()
        ctx.set(dut.engine.we, 0)
        ctx.set(dut.engine.start, 1)
        ctx.set(dut.tx.start, 1)
        await ctx.tick()
        ctx.set(dut.engine.start, 0)
        ctx.set(dut.tx.start, 0)
        returns = []          # cycles at which the L1 frees a slot (a credit back)
        for cycle in range(limit):
            if out["first_offer"] is None and ctx.get(dut.engine.tx.valid):
                out["first_offer"] = cycle
            ctx.set(dut.credit_in[0], int(cycle in returns))
            if cycle in returns:
                returns.remove(cycle)
            if ctx.get(dut.o.valid):
                tag = ctx.get(dut.o.payload.tag)
                out["sent"].append((cycle, ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.last),
                                    (tag >> seq.offset) & ((1 << seq.width) - 1)))
                # one credit a cycle at most, each after its flit's gap
                returns.append(max(cycle + 1 + credit_gap(rng), max(returns, default=0) + 1))
            out["credit_error"] |= ctx.get(dut.tx.credit_error)
            await ctx.tick()
            if len(out["sent"]) == flits and not returns:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, (w, h)


def _check_stream(out, weights, flits, k=8):
    sent = out["sent"]
    assert [data for _, data, _, _ in sent] == [flit_value(weights, i, 0) for i in range(flits)]
    assert [seq for _, _, _, seq in sent] == [i // k for i in range(flits)]
    assert [last for _, _, last, _ in sent] == [int(i % k == k - 1 or i == flits - 1) for i in range(flits)]
    assert out["credit_error"] == 0
    packets = [[cycle for cycle, *_ in sent[s:s + k]] for s in range(0, flits, k)]
    for packet in packets:               # a packet leaves whole, one flit per cycle
        assert packet == list(range(packet[0], packet[0] + len(packet)))
    return packets


def test_a_controller_packet_leaves_at_link_rate_after_its_memory_time():
    """Credits plentiful (returned the next cycle): packet p of k = 8 flits is read by the
    paced memory (flit j at the end of its interval, ceil((j + 1) 375/16) - 1 cycles after the
    first offer) and offered the cycle after its last flit is in: its first flit leaves at
    ceil((p + 1) 8 x 375/16) = 188, 375, 563, ..., the stream's shorter last packet (4 flits of
    20) at ceil(20 x 375/16) = 469; each in 8 (4) consecutive cycles."""
    flits = 20
    out, weights = _controller(flits, credit_gap=lambda rng: 0, seed=0)
    packets = _check_stream(out, weights, flits)
    t0 = out["first_offer"]
    ends = [min((p + 1) * 8, flits) for p in range(len(packets))]
    assert [packet[0] - t0 for packet in packets] == [-(-end * 375 // 16) for end in ends]
    assert [packet[0] - t0 for packet in packets] == [188, 375, 469]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_controller_flit_is_lost_under_random_credit_gaps(seed):
    """The L1 frees its slots late and in bursts (credits back 0-400 cycles after the flit):
    every flit leaves once, in order, with its data and its packet's number; a packet starts
    only with credits for all of it and so still leaves in consecutive cycles, never before
    its memory time; the packetizer never sees more credits than its depth."""
    flits = 45
    out, weights = _controller(flits, credit_gap=lambda rng: rng.choice([0, 0, 3, 40, 400]), seed=seed,
                               depth=8)
    packets = _check_stream(out, weights, flits)
    t0 = out["first_offer"]
    for p, packet in enumerate(packets):
        assert packet[0] - t0 >= -(-min((p + 1) * 8, flits) * 375 // 16)
