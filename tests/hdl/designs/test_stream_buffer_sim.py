"""StreamBuffer in Amaranth's simulator: order, no loss/duplication, registered ready, throughput."""

import random

from amaranth.sim import Simulator

from cocotb_tests.lib.seeds import seeded_rng
from hdl.designs.stream_buffer import StreamBuffer


def _run(items, *, idle, backpressure, rng, cycles_limit=100_000):
    dut = StreamBuffer(16)
    received, sent_cycles, received_cycles = [], [], []

    async def source(ctx):
        for index, item in enumerate(items):
            while rng.random() < idle:
                await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, item)
            await ctx.tick().until(dut.i.ready)   # transfer happens at this edge
            sent_cycles.append(index)
            ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        cycle = 0
        while len(received) < len(items) and cycle < cycles_limit:
            ready = rng.random() >= backpressure
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                received.append(payload)
                received_cycles.append(cycle)
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return received, received_cycles


def test_random_idle_and_backpressure_preserve_the_stream():
    rng = seeded_rng("test_stream_buffer_sim.random")
    items = [rng.randrange(1 << 16) for _ in range(3000)]
    received, _ = _run(items, idle=0.3, backpressure=0.4, rng=rng)
    assert received == items


def test_full_throughput_without_backpressure():
    rng = random.Random(0)  # no randomness used: idle = backpressure = 0
    items = list(range(500))
    received, cycles = _run(items, idle=0.0, backpressure=0.0, rng=rng)
    assert received == items
    assert cycles[-1] - cycles[0] == len(items) - 1   # one transfer per cycle after fill


def test_input_ready_does_not_depend_combinationally_on_output_ready():
    dut = StreamBuffer(8)
    observed = []

    async def bench(ctx):
        # fill both registers while the output stalls
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        for value in (1, 2):
            ctx.set(dut.i.payload, value)
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        for ready in (0, 1, 0, 1):  # toggling o.ready must not move i.ready before the edge
            ctx.set(dut.o.ready, ready)
            await ctx.delay(1e-9)
            observed.append(ctx.get(dut.i.ready))
        assert ctx.get(dut.o.valid) == 1 and ctx.get(dut.o.payload) == 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert observed == [0, 0, 0, 0]
