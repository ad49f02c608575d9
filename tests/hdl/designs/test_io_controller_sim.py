"""The I/O controller's rate (hdl/designs/fabric/rate_limiter.py on the links' token
accumulator, hdl/designs/fabric/link.py ``rate_gate``) in Amaranth's simulator: exactly a flits
in every b cycles under continuous demand, at most one flit above the rate after an idle
spell, and nothing passed while the consumer refuses."""

import pytest
from amaranth.sim import Simulator

from hdl.designs.fabric.rate_limiter import RateLimiter


def _passed(rate, cycles, *, idle=0, ready=lambda t: True):
    """Flits through a RateLimiter of ``rate`` in ``cycles`` cycles of continuous demand after
    ``idle`` cycles without any; ``ready(t)`` the consumer's ready in cycle t."""
    dut = RateLimiter(8, rate=rate)
    out = {"n": 0, "stalled_pass": 0}

    async def bench(ctx):
        if idle:
            await ctx.tick().repeat(idle)
        ctx.set(dut.i.valid, 1)
        for t in range(cycles):
            ctx.set(dut.o.ready, int(ready(t)))
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out["n"] += 1
            if ctx.get(dut.i.ready) and not ready(t):
                out["stalled_pass"] += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("rate", [(16, 375), (3, 4), (1, 2)])
def test_continuous_demand_passes_exactly_a_flits_every_b_cycles(rate):
    a, b = rate
    # from the start (saved tokens: b - 1) n cycles pass floor((b - 1 + n a) / b) flits
    n = 4 * b
    assert _passed(rate, n)["n"] == (b - 1 + n * a) // b
    # the I/O controller's 16/375: 64 flits in 1500 cycles, not the 1500 / 24 = 62 of a cap
    # that drops each interval's remainder


def test_an_idle_spell_saves_at_most_one_flit():
    a, b = 16, 375
    n = 2 * b
    assert _passed((a, b), n, idle=5 * b)["n"] <= n * a // b + 1


def test_nothing_passes_while_the_consumer_refuses():
    out = _passed((3, 4), 40, ready=lambda t: t % 3 == 0)
    assert out["stalled_pass"] == 0
    assert out["n"] <= 14


def test_a_paced_limiter_makes_the_first_flit_wait_its_interval_too():
    """The I/O controller's memory: flit k goes in cycle ceil((k + 1) b / a) - 1, so n flits
    take n b / a cycles (the model's size / bandwidth), not (n - 1) b / a + 1."""
    a, b = 16, 375
    dut = RateLimiter(8, rate=(a, b), paced=True)
    times = []

    async def bench(ctx):
        await ctx.tick().repeat(3 * b)          # before the start: nothing may be saved
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 1)
        for t in range(4 * b):
            if ctx.get(dut.o.valid):
                times.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert times == [-(-(k + 1) * b // a) - 1 for k in range(len(times))]
    assert len(times) == 4 * a


def test_a_paced_limiter_saves_nothing_while_it_has_no_flit():
    """The controller's write side: a flit that arrives after an idle spell (the first one of
    a reduce-out, after the switches' selects) still takes its whole interval."""
    a, b = 16, 375
    dut = RateLimiter(8, rate=(a, b), paced=True)
    times = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(2 * b)           # idle: no flit
        ctx.set(dut.i.valid, 1)
        for t in range(b):
            if ctx.get(dut.o.valid):
                times.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert times[0] == -(-b // a) - 1        # 23: the flit's own interval, nothing saved
