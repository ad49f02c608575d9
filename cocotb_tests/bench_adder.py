"""cocotb bench for the reduction unit ``fred_adder`` (hdl.designs.reduction.ReductionUnit).

Bench parameters (``bench_params()``): ``dtype``, ``lanes`` (as built); ``count`` random
operand pairs (cocotb_tests.adder_vectors.random_pairs); ``specials`` (bool: also every
special-class pair); ``idle`` (probability, per input stream independently, of an idle
cycle) and ``backpressure`` (probability of o.ready low); ``latency`` (the unit's
``latency`` property, checked by ``throughput_and_latency``).

Expected sums come from hdl.contracts.dtypes; the output stream must carry them in order, bit for
bit, with nothing lost, duplicated or reordered.
"""

from __future__ import annotations

import cocotb
import numpy as np

from cocotb_tests.adder_vectors import as_flits, random_pairs, special_pairs
from cocotb_tests.lib import (StreamHarness, bench_params, get_seed, metrics, never,
                              random_backpressure, random_idle, seeded_rng)
from hdl.contracts.dtypes import get_dtype, pack_lanes, unpack_lanes


def _pack(flits: np.ndarray, width: int) -> list[int]:
    return [pack_lanes(row, width) for row in flits.tolist()]


def _operands(params):
    dtype = get_dtype(params["dtype"])
    lanes = params["lanes"]
    rng = np.random.default_rng(get_seed(f"bench_adder.operands.{dtype.name}"))
    a, b = random_pairs(dtype, params.get("count", 10_000), rng)
    if params.get("specials", True):
        sa, sb = special_pairs(dtype)
        a, b = np.concatenate([sa, a]), np.concatenate([sb, b])
    expected = dtype.add(a, b).astype(np.uint64)
    a_flits, b_flits = as_flits(a, b, lanes)
    expected_flits, _ = as_flits(expected, expected, lanes)
    return dtype, a_flits, b_flits, expected_flits


@cocotb.test()
async def random_and_special_pairs(dut):
    """Specials + random pairs, independent idle on a and b, random backpressure on o."""
    params = bench_params()
    dtype, a_flits, b_flits, expected_flits = _operands(params)
    width, lanes = dtype.width, params["lanes"]
    a_words, b_words = _pack(a_flits, width), _pack(b_flits, width)
    expected = _pack(expected_flits, width)
    rng = seeded_rng(f"bench_adder.traffic.{dtype.name}")
    harness = StreamHarness(dut, dut.clk, watchdog_cycles=1000)
    received = []
    mismatches = []

    def on_output(cycle, word):
        index = len(received)
        received.append(word)
        if index >= len(expected) or word != expected[index]:
            mismatches.append(index)

    a_driver = harness.driver("a", idle=random_idle(rng, params.get("idle", 0.1)))
    b_driver = harness.driver("b", idle=random_idle(rng, params.get("idle", 0.1)))
    sink = harness.sink("o", backpressure=random_backpressure(rng, params.get("backpressure", 0.3)),
                        on_transfer=on_output)
    for agent in (a_driver, b_driver, sink):
        agent.record_cycles = False   # millions of flits in the full run
    a_driver.send_all(a_words)
    b_driver.send_all(b_words)
    harness.outstanding = lambda: len(expected) - len(received)
    await harness.start()
    await harness.wait_until(lambda: len(received) >= len(expected), what="every sum out")
    await harness.cycles(50)   # a duplicate or spurious flit would surface here
    assert a_driver.transfers == b_driver.transfers == len(expected), "a and b did not transfer together"
    lines = []
    for index in mismatches[:10]:
        if index >= len(expected):
            lines.append(f"extra flit {index}: {received[index]:#x}")
            continue
        for lane, got in enumerate(unpack_lanes(received[index], width, lanes)):
            if got != int(expected_flits[index, lane]):
                lines.append(f"flit {index} lane {lane}: {int(a_flits[index, lane]):#x} + "
                             f"{int(b_flits[index, lane]):#x} = {got:#x}, expected "
                             f"{int(expected_flits[index, lane]):#x}")
    assert len(received) == len(expected), f"{len(received)} flits out, {len(expected)} expected"
    assert not mismatches, f"{len(mismatches)} wrong flit(s):\n" + "\n".join(lines)
    pairs = int(expected_flits.size)
    dut._log.info("%s: %d flits (%d lane pairs) bit-exact in %d cycles", dtype.name,
                  len(expected), pairs, harness.cycle)
    metrics.record(flits=len(expected), pairs=pairs, cycles=harness.cycle)


@cocotb.test()
async def throughput_and_latency(dut):
    """No idle, no backpressure: one flit per cycle in and out; latency as the property says."""
    params = bench_params()
    dtype = get_dtype(params["dtype"])
    flits = params.get("flits", 1000)
    rng = np.random.default_rng(get_seed(f"bench_adder.throughput.{dtype.name}"))
    a, b = random_pairs(dtype, flits * params["lanes"], rng)
    a_flits, b_flits = as_flits(a, b, params["lanes"])
    expected = _pack(dtype.add(a_flits, b_flits).astype(np.uint64), dtype.width)
    harness = StreamHarness(dut, dut.clk)
    a_driver = harness.driver("a", idle=never())
    b_driver = harness.driver("b", idle=never())
    sink = harness.sink("o", backpressure=never(), keep=True)
    a_driver.send_all(_pack(a_flits, dtype.width))
    b_driver.send_all(_pack(b_flits, dtype.width))
    await harness.start()
    await harness.wait_until(lambda: sink.transfers == flits, what="all flits out")
    assert sink.items == expected
    in_cycles, out_cycles = a_driver.transfer_cycles, sink.transfer_cycles
    assert b_driver.transfer_cycles == in_cycles
    throughput = (flits - 1) / (out_cycles[-1] - out_cycles[0])
    input_rate = (flits - 1) / (in_cycles[-1] - in_cycles[0])
    latency = out_cycles[0] - in_cycles[0]
    dut._log.info("%s: throughput %.4f flits/cycle (inputs %.4f), latency %d cycles",
                  dtype.name, throughput, input_rate, latency)
    metrics.record(throughput=throughput, input_rate=input_rate, latency=latency, flits=flits)
    assert throughput == 1.0 and input_rate == 1.0
    if "latency" in params:
        assert latency == params["latency"], f"latency {latency} != property {params['latency']}"
