"""``TreeStripeNpu`` alone in Amaranth: the packets it sends, in order, against the golden
model of its order (:func:`hdl.compiler.io_stripe_trees.home_late_order`: the one packet order
with its L1's own stripes ``delay`` places late; docs/fabric_rtl.md, "Fred-B's weight streaming
and reduce-out on the fabric", point 9), under credits returned after random waits."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.compiler.io_stripe_trees import home_late_order
from hdl.contracts.flit import FlitFormat
from hdl.contracts.io_stripes import tree_npu_writes
from hdl.designs.fabric.fabric_top import TAG_WIDTH
from hdl.designs.fabric.packet_fabric_top import packet_format
from hdl.designs.fabric.tree_stripe_npu import TreeStripeNpu

DEPTH = 16


def _sent_packets(program_and_start, stripes: int, stripe_flits: int, home, delay: int,
                  seed: int) -> list[tuple[int, int, int]]:
    """``(flow, seq, flits)`` of every packet the NPU sends, in order; the L1's input buffer
    (``DEPTH`` flits) frees each flit after a random wait of 0-5 cycles."""
    fmt = packet_format(8)
    npu = TreeStripeNpu(flit=FlitFormat(dtype="int32", lanes=1, tag_width=TAG_WIDTH), packet=fmt,
                        depth=DEPTH, stripes=stripes)
    words = tree_npu_writes(ws=3, hs=7, stripes=stripes, stripe_flits=stripe_flits, phase=7, vc=1,
                            home=home, delay=delay)
    total = stripes * stripe_flits
    packets: list[list[int]] = []
    rng = random.Random(seed)

    async def bench(ctx):
        await program_and_start(ctx, npu, words)
        freeing, flits, cycles = [], 0, 0
        while flits < total or freeing:
            cycles += 1
            assert cycles < 20 * total, "the NPU stopped sending"
            due = sum(1 for at in freeing if at <= cycles)
            freeing = [at for at in freeing if at > cycles]
            ctx.set(npu.credit_in[1], min(due, 2))
            freeing += [cycles + 1] * max(0, due - 2)
            if ctx.get(npu.o.valid):
                word = ctx.get(npu.o.payload)
                header = fmt.unpack_header(word.tag)
                if not packets or packets[-1][3]:
                    packets.append([header["flow"], header["seq"], 0, 0])
                assert packets[-1][:2] == [header["flow"], header["seq"]], "a header changed inside a packet"
                packets[-1][2] += 1
                packets[-1][3] = word.last
                flits += 1
                freeing.append(cycles + rng.randrange(6))
            await ctx.tick()
        assert ctx.get(npu.done) and ctx.get(npu.sent) == total

    sim = Simulator(npu)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return [(flow, seq, n) for flow, seq, n, _ in packets]


@pytest.mark.parametrize("stripes, stripe_flits, home, delay", [
    (5, 20, (), 0),                 # the one order
    (5, 20, (1, 3), 0),             # home stripes, no delay: still the one order
    (5, 20, (1, 3), 4),             # the small fabric's late order (each packet of 8, 8, 4)
    (18, 3, (0, 5, 10, 15), 14),    # Fred-B's wafer at 54 flits, L1 0: one round, one packet each
    (4, 12, (0, 1, 2, 3), 2),       # every stripe home: the one order again
    (6, 17, (5,), 40),              # a delay past the end: stripe 5 last
])
def test_the_npu_sends_its_packets_in_the_late_order(program_and_start, stripes, stripe_flits, home, delay):
    sent = _sent_packets(program_and_start, stripes, stripe_flits, home, delay, seed=stripes + delay)
    expected = [(k, p, min(8, stripe_flits - 8 * p))
                for k, p in home_late_order(stripes, stripe_flits, 8, home, delay)]
    assert sent == expected
