"""Fred_m(P), its configuration checker and its configuration memory in Amaranth's simulator,
plus parameter validation. Fast: small P, int32."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from cocotb_tests.lib.seeds import seeded_rng
from hdl.base.errors import FredError
from hdl.base.compiler.encoding import SwitchConfig, config_bits
from hdl.base.compiler.flows import Flow
from hdl.base.compiler.functional import simulate
from hdl.base.compiler.router import route
from hdl.base.config_port import ConfigError, config_word_layout, config_words
from hdl.base.flit import FlitFormat
from hdl.base.timing import reduction_latency, switch_latency, switch_stages
from hdl.designs import get_design
from hdl.switch import FredSwitch
from hdl.switch.config_checker import ConfigChecker

from switch_sim import run_streams


def _decodes(value, ports, middle):
    try:
        SwitchConfig.from_int(value, ports=ports, middle=middle)
        return True
    except FredError:
        return False


@pytest.mark.parametrize("ports,middle", [(2, 2), (4, 3), (8, 2), (8, 3)])
def test_config_checker_agrees_with_the_compiler_decoder(ports, middle):
    rng = seeded_rng(f"checker.{ports}.{middle}")
    bits = config_bits(ports, middle)
    dut = ConfigChecker(ports=ports, middle=middle)
    values = []
    flows = [Flow(inputs=(p,), outputs=((p + 1) % ports,)) for p in range(ports)]
    legal = route(ports=ports, middle=middle, flows=flows).phases[0].config.to_int()
    all_reduce = route(ports=ports, middle=middle,
                       flows=[Flow(inputs=tuple(range(ports)), outputs=tuple(range(ports)))]
                       ).phases[0].config.to_int()
    for base in (legal, all_reduce, 0):
        values.append(base)
        for _ in range(60):   # one to three flipped bits: mostly illegal, some legal
            value = base
            for _ in range(rng.randint(1, 3)):
                value ^= 1 << rng.randrange(bits)
            values.append(value)
    values += [rng.getrandbits(bits) for _ in range(40)]
    results = []

    async def bench(ctx):
        for value in values:
            ctx.set(dut.config, value)
            await ctx.delay(1e-9)
            results.append(ctx.get(dut.legal))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    expected = [_decodes(v, ports, middle) for v in values]
    assert results == expected
    assert any(expected) and not all(expected)


def _switch(**params):
    """The ``fred_switch`` top with the registry's defaults for what ``params`` leaves out."""
    return get_design("switch").build(**params)


def test_stages_and_latency_from_parameters():
    """The latency is a formula of (P, dtype), exposed without building hardware; the properties
    of built components read it (their measured latency is checked by the benches)."""
    for ports in (2, 4, 8, 16, 32, 64):
        assert switch_stages(ports) == 2 * (ports.bit_length() - 1) - 1
    assert switch_latency(ports=8, middle=3, dtype="int32") == 3 * 2 + 2
    fp16_adder = reduction_latency("fp16")
    assert switch_latency(ports=4, middle=2, dtype="fp16") == 2 * (fp16_adder + 1) + 1
    flit = FlitFormat(dtype="int32", lanes=1, tag_width=8)
    sw = FredSwitch(ports=8, middle=3, flit=flit)
    assert sw.stages == 5 and sw.latency == switch_latency(ports=8, middle=3, dtype="int32")
    from amaranth.back import rtlil
    rtlil.convert(sw)   # elaborates: the recursion asserts that its parts add up to the latency


@pytest.mark.parametrize("kwargs,message", [
    (dict(ports=6, middle=3), "power of two"),
    (dict(ports=1, middle=3), "ports"),
    (dict(ports=4, middle=1), "middle"),
    (dict(ports=4, middle=3, dtype="fp8"), "dtype"),
    (dict(ports=4, middle=3, lanes=0), "lanes"),
    (dict(ports=4, middle=3, phases=0), "phases"),
    (dict(ports=4, middle=3, tag_width=0), "tag_width"),
])
def test_bad_parameters_are_refused_with_a_clear_error(kwargs, message):
    with pytest.raises(FredError, match=message):
        _switch(**kwargs)


def _config_packet(words, slot, phases, last_at=None):
    last_at = len(words) - 1 if last_at is None else last_at
    layout = config_word_layout(phases)
    return [layout.pack(data=w, last=i == last_at, phase=slot) for i, w in enumerate(words)]


def test_switch_top_loads_selects_and_routes_an_all_reduce():
    """End to end in the Amaranth simulator: a bad packet, a good one, select, traffic."""
    ports, middle, dtype = 4, 2, "int32"
    rng = seeded_rng("top.sim")
    top = _switch(ports=ports, middle=middle, dtype=dtype, lanes=2, phases=2, tag_width=8)
    fmt = top.flit
    flows = [Flow(inputs=(0, 1, 2), outputs=(0, 1, 2)), Flow(inputs=(3,), outputs=(3,))]
    config = route(ports=ports, middle=middle, flows=flows).phases[0].config
    words = config.encode()
    assert len(words) == config_words(ports, middle) == top.config_words
    length = 20
    data = [fmt.element.random_bits(np.random.default_rng(rng.getrandbits(32)), (length, 2))
            for _ in range(ports)]
    expected = simulate(ports, middle, config, dtype, data)
    log = {}

    async def bench(ctx):
        async def write(payloads):
            for payload in payloads:
                ctx.set(top.config.valid, 1)
                ctx.set(top.config.payload.as_value(), payload)
                await ctx.tick().until(top.config.ready)
            ctx.set(top.config.valid, 0)
            await ctx.tick().repeat(2)

        await write(_config_packet(words + [0], 1, top.phases))      # one word too many
        log["long"] = ctx.get(top.error)
        await write(_config_packet(words, 1, top.phases))
        log["good"] = (ctx.get(top.error), ctx.get(top.loaded))
        ctx.set(top.phase.valid, 1)
        ctx.set(top.phase.payload, 1)
        # inputs are held while the select is pending
        ctx.set(top.i[0].valid, 1)
        await ctx.delay(1e-9)
        log["held"] = ctx.get(top.i[0].ready)
        ctx.set(top.i[0].valid, 0)
        cycles = 0
        while True:
            _, _, ready = await ctx.tick().sample(top.phase.ready)
            cycles += 1
            if ready:
                break
        ctx.set(top.phase.valid, 0)
        log["select_cycles"] = cycles
        await ctx.tick()
        log["active"] = (ctx.get(top.active_phase), ctx.get(top.active_valid), ctx.get(top.error))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert log["long"] == ConfigError.WORD_COUNT
    assert log["good"] == (ConfigError.NONE, 0b10)
    assert log["held"] == 0
    assert log["select_cycles"] == top.select_cycles
    assert log["active"] == (1, 1, ConfigError.NONE)

    # traffic on the configured switch (a fresh simulation starting from the loaded state is
    # not possible, so drive the datapath alone with the same configuration)
    sw = FredSwitch(ports=ports, middle=middle, flit=fmt)
    inputs = {f"i{p}": (sw.i[p], [fmt.pack(data[p][n], last=n == length - 1, tag=n)
                                   for n in range(length)]) for p in range(ports)}
    result = run_streams(sw, inputs=inputs, outputs={f"o{p}": sw.o[p] for p in range(ports)},
                         settings=[(sw.config, config.to_int())], idle=0.3, backpressure=0.3,
                         rng=rng, max_cycles=3000)
    for p in range(ports):
        got = [fmt.unpack(w) for _, w in result["received"][f"o{p}"]]
        assert [lanes for lanes, _, _ in got] == [list(map(int, row)) for row in expected[p]]
        assert [tag for _, _, tag in got] == list(range(length))


def test_no_combinational_path_from_output_ready_to_any_valid():
    """Fill the switch with every output stalled, then toggle the output readies within one
    cycle: no output valid and no input ready may move before the clock edge."""
    ports, middle = 4, 2
    sw = FredSwitch(ports=ports, middle=middle, flit=FlitFormat(dtype="int32", lanes=1, tag_width=8))
    config = route(ports=ports, middle=middle,
                   flows=[Flow(inputs=(0, 1, 2, 3), outputs=(0, 1, 2, 3))]).phases[0].config
    observed = []

    async def bench(ctx):
        ctx.set(sw.config, config.to_int())
        for p in range(ports):
            ctx.set(sw.i[p].valid, 1)
            ctx.set(sw.i[p].payload.as_value(), p + 1)
        await ctx.tick().repeat(20)
        for pattern in (0b0000, 0b1111, 0b0101, 0b1010, 0b0000):
            for p in range(ports):
                ctx.set(sw.o[p].ready, (pattern >> p) & 1)
            await ctx.delay(1e-9)
            observed.append(tuple(ctx.get(sw.o[p].valid) for p in range(ports))
                            + tuple(ctx.get(sw.i[p].ready) for p in range(ports)))

    sim = Simulator(sw)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(set(observed)) == 1, observed
    assert observed[0][:ports] == (1,) * ports
