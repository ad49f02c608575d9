"""ReductionUnit as a stream block (Amaranth simulator): handshake, throughput, latency,
backpressure, sideband, registered control paths and parameter validation."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import Fragment, unsigned
from amaranth.sim import Simulator

from cocotb_tests.adder_vectors import random_pairs
from cocotb_tests.lib.seeds import get_seed
from hdl.contracts.errors import FredError
from hdl.contracts.dtypes import get_dtype
from hdl.designs.reduction import FloatAdder, IntAdder, ReductionUnit
from hdl.contracts.timing import (FLOAT_ADDER_STAGES, INT_ADDER_STAGES, OUTPUT_REGISTER_LATENCY,
                             reduction_latency)
from hdl.designs.stream_buffer import StreamBuffer


def _elaborated(component):
    """``component`` after elaboration (a component built and never elaborated is a bug that
    Amaranth warns about; these tests read properties of components they really build)."""
    Fragment.get(component, None)
    return component


def _operands(name, flits, lanes, seed):
    a, b = random_pairs(name, flits * lanes, np.random.default_rng(seed))
    return a.reshape(flits, lanes), b.reshape(flits, lanes)


@pytest.mark.parametrize("name", ("fp16", "bf16", "fp32", "int32"))
def test_one_flit_per_cycle_and_latency_measured(name, adder_driver):
    """No idle, no backpressure: a/b transfer every cycle, o every cycle after the fill."""
    flits, lanes = 300, 2
    unit = ReductionUnit(dtype=name, lanes=lanes)
    width = unit.dtype.width
    a, b = _operands(name, flits, lanes, 3)
    run = adder_driver.run_unit(unit, adder_driver.pack_flits(a, width), adder_driver.pack_flits(b, width))
    assert (adder_driver.unpack_flits(run.outputs, width, lanes) == get_dtype(name).add(a, b)).all()
    input_span = run.input_cycles[-1] - run.input_cycles[0]
    output_span = run.output_cycles[-1] - run.output_cycles[0]
    throughput = (flits - 1) / output_span
    latency = run.output_cycles[0] - run.input_cycles[0]
    print(f"{name}: throughput {throughput:.4f} flits/cycle, latency {latency} cycles")
    assert input_span == flits - 1          # inputs accepted back to back
    assert output_span == flits - 1         # one flit per cycle after the fill
    assert latency == unit.latency          # the property is what the hardware does
    # every flit takes exactly `latency` cycles when nothing stalls
    assert [o - i for i, o in zip(run.input_cycles, run.output_cycles)] == [unit.latency] * flits


@pytest.mark.parametrize("name, stall, idle", [("fp16", 0.7, 0.5), ("fp32", 0.5, 0.0),
                                               ("int32", 0.6, 0.3), ("bf16", 0.0, 0.6)])
def test_heavy_backpressure_and_idle_lose_nothing(name, stall, idle, adder_driver):
    flits, lanes = 1500, 2
    unit = ReductionUnit(dtype=name, lanes=lanes)
    width = unit.dtype.width
    a, b = _operands(name, flits, lanes, get_seed(f"adder.stream.{name}"))
    run = adder_driver.run_unit(unit, adder_driver.pack_flits(a, width), adder_driver.pack_flits(b, width), output_stall=stall,
                   input_idle=idle, seed=get_seed(f"adder.stream.{name}.pattern"))
    assert len(run.outputs) == flits
    assert (adder_driver.unpack_flits(run.outputs, width, lanes) == get_dtype(name).add(a, b)).all()


def test_sideband_follows_operand_a(adder_driver):
    flits, lanes = 400, 3
    unit = ReductionUnit(dtype="bf16", lanes=lanes, sideband=unsigned(9))
    rng = np.random.default_rng(5)
    a, b = _operands("bf16", flits, lanes, 6)
    side_a = rng.integers(0, 512, flits).tolist()
    side_b = [(s + 1) % 512 for s in side_a]   # b's sideband differs and must be ignored
    run = adder_driver.run_unit(unit, adder_driver.pack_flits(a, 16), adder_driver.pack_flits(b, 16), sidebands=side_a,
                   b_sidebands=side_b, output_stall=0.4, input_idle=0.2, seed=7)
    assert run.sidebands == side_a
    assert (adder_driver.unpack_flits(run.outputs, 16, lanes) == get_dtype("bf16").add(a, b)).all()


def test_a_and_b_transfer_only_together():
    unit = ReductionUnit(dtype="fp16", lanes=1)
    seen = []

    async def bench(ctx):
        ctx.set(unit.o.ready, 1)
        await ctx.tick()
        for a_valid, b_valid in ((1, 0), (0, 1), (0, 0), (1, 1)):
            ctx.set(unit.a.valid, a_valid)
            ctx.set(unit.b.valid, b_valid)
            seen.append((a_valid, b_valid, ctx.get(unit.a.ready), ctx.get(unit.b.ready)))
            await ctx.tick()
        ctx.set(unit.a.valid, 0)
        ctx.set(unit.b.valid, 0)
        outputs = 0
        for _ in range(unit.latency + 3):
            outputs += ctx.get(unit.o.valid)
            await ctx.tick()
        seen.append(outputs)

    sim = Simulator(unit)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # a alone and b alone are not accepted; both together are; exactly one flit comes out
    assert seen == [(1, 0, 0, 1), (0, 1, 1, 0), (0, 0, 0, 0), (1, 1, 1, 1), 1]


def test_output_ready_reaches_no_other_port_combinationally():
    unit = ReductionUnit(dtype="fp16", lanes=1)
    observed = []

    async def bench(ctx):
        ctx.set(unit.o.ready, 0)
        ctx.set(unit.a.valid, 1)
        ctx.set(unit.b.valid, 1)
        for _ in range(unit.latency + 4):   # fill the pipeline and the output buffer
            await ctx.tick()
        ctx.set(unit.a.valid, 0)
        ctx.set(unit.b.valid, 0)
        for a_valid in (0, 1):
            ctx.set(unit.a.valid, a_valid)
            ctx.set(unit.b.valid, a_valid)
            for ready in (0, 1, 0, 1):   # within one cycle: nothing else may move
                ctx.set(unit.o.ready, ready)
                await ctx.delay(1e-8)
                observed.append((ctx.get(unit.a.ready), ctx.get(unit.b.ready), ctx.get(unit.o.valid)))
            ctx.set(unit.o.ready, 0)

    sim = Simulator(unit)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert observed == [(0, 0, 1)] * 8   # stalled: ready stays low, valid high, whatever o.ready does


def test_latency_from_parameters_matches_components():
    """``hdl.contracts.timing`` states the latencies; the components read them (the simulations
    above measure that the hardware does what the properties say)."""
    assert OUTPUT_REGISTER_LATENCY == _elaborated(StreamBuffer(8)).latency == 1
    assert FloatAdder.latency == FLOAT_ADDER_STAGES == 6 and IntAdder.latency == INT_ADDER_STAGES == 0
    for dtype, adder in (("fp16", FloatAdder), ("bf16", FloatAdder), ("fp32", FloatAdder),
                         ("int32", IntAdder)):
        unit = _elaborated(ReductionUnit(dtype=dtype, lanes=1))
        assert unit.latency == reduction_latency(dtype) == adder.latency + 1


def test_payload_layout():
    plain = _elaborated(ReductionUnit(dtype="fp32", lanes=4))
    assert plain.payload_shape == unsigned(128)
    framed = _elaborated(ReductionUnit(dtype="fp16", lanes=2, sideband=unsigned(5)))
    assert set(dict(framed.payload_shape.members)) == {"data", "sideband"}
    assert framed.payload_shape.size == 32 + 5


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="fp8", lanes=4), "unknown dtype 'fp8'"),
    (dict(dtype="fp16", lanes=0), "lanes must be in 1..1024, got 0"),
    (dict(dtype="fp16", lanes=4.0), "lanes must be an int"),
    (dict(dtype="fp16", lanes=True), "lanes must be an int"),
    (dict(dtype="fp16", lanes=2000), "lanes must be in 1..1024"),
    (dict(dtype="fp16", lanes=2, sideband="framing"), "sideband must be None or an Amaranth shape"),
])
def test_bad_parameters_are_named(kwargs, message):
    with pytest.raises(FredError, match=message):
        ReductionUnit(**kwargs)


def test_parameters_are_keyword_only():
    with warnings.catch_warnings():   # the half-built object is collected here, unused
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError):
            ReductionUnit("fp16", 4)
        gc.collect()
