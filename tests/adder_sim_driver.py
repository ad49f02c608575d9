"""Drive a ReductionUnit in Amaranth's Python simulator (shared by the tests/test_adder_* files).

:func:`run_unit` pushes operand flits through a/b with optional random idle cycles on
the inputs and random backpressure on o, and returns every flit transferred on o, in
order, plus cycle counts. Payloads are plain ints (lanes packed lane 0 at the LSBs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.sim import Simulator



@dataclass
class SimRun:
    outputs: list          #: payload ints (data only) transferred on o, in order
    sidebands: list        #: sideband ints (None when the unit has no sideband)
    cycles: int            #: clock cycles simulated
    first_output_cycle: int | None  #: cycle of the first o transfer
    first_input_cycle: int | None   #: cycle of the first a/b transfer
    output_cycles: list = None      #: cycle of every o transfer
    input_cycles: list = None       #: cycle of every a/b transfer


def pack_flits(values: np.ndarray, width: int) -> list[int]:
    """(flits, lanes) array of bit patterns -> list of packed ints (lane 0 at the LSBs)."""
    values = np.asarray(values, dtype=np.uint64)
    flits, lanes = values.shape
    words = [0] * flits
    for lane in range(lanes):
        column = values[:, lane].tolist()
        shift = lane * width
        for i, v in enumerate(column):
            words[i] |= v << shift
    return words


def unpack_flits(words, width: int, lanes: int) -> np.ndarray:
    mask = (1 << width) - 1
    out = np.zeros((len(words), lanes), dtype=np.uint64)
    for lane in range(lanes):
        out[:, lane] = [(w >> (lane * width)) & mask for w in words]
    return out


def run_unit(unit, a_words, b_words, *, sidebands=None, b_sidebands=None, input_idle=0.0,
             output_stall=0.0, seed=0, max_cycles=None) -> SimRun:
    """Simulate ``unit`` on the flit sequences ``a_words``/``b_words`` (equal lengths).

    ``input_idle``: probability that a or b (independently) withholds valid in a cycle.
    ``output_stall``: probability that o.ready is low in a cycle.
    """
    assert len(a_words) == len(b_words)
    count = len(a_words)
    rng = np.random.default_rng(seed)
    # twice the expected cycle count: a transfer needs a and b offered and o ready
    rate = max(0.01, (1 - input_idle) ** 2 * (1 - output_stall))
    limit = max_cycles or int(2 * (count + unit.latency + 10) / rate) + 1000
    has_sideband = unit.sideband is not None
    result = SimRun([], [], 0, None, None, [], [])

    async def bench(ctx):
        a_next = b_next = 0
        cycle = 0
        a, b, o = unit.a, unit.b, unit.o
        a_data = a.payload.data if has_sideband else a.payload
        b_data = b.payload.data if has_sideband else b.payload
        o_data = o.payload.data if has_sideband else o.payload
        a_idle = rng.random(limit) < input_idle
        b_idle = rng.random(limit) < input_idle
        stall = rng.random(limit) < output_stall
        a_offer = b_offer = False
        while len(result.outputs) < count:
            if cycle >= limit:
                raise AssertionError(f"no progress: {len(result.outputs)}/{count} flits out "
                                     f"after {cycle} cycles")
            # a producer keeps valid and payload while it waits for ready (stream rules)
            if not a_offer and a_next < count and not a_idle[cycle]:
                a_offer = True
                ctx.set(a_data, a_words[a_next])
                if has_sideband:
                    ctx.set(a.payload.sideband, sidebands[a_next])
            if not b_offer and b_next < count and not b_idle[cycle]:
                b_offer = True
                ctx.set(b_data, b_words[b_next])
                if has_sideband and b_sidebands is not None:
                    ctx.set(b.payload.sideband, b_sidebands[b_next])
            ctx.set(a.valid, a_offer)
            ctx.set(b.valid, b_offer)
            ctx.set(o.ready, not stall[cycle])
            a_fire = a_offer and ctx.get(a.ready)
            b_fire = b_offer and ctx.get(b.ready)
            assert a_fire == b_fire, f"cycle {cycle}: a and b did not transfer together"
            if a_fire:
                if result.first_input_cycle is None:
                    result.first_input_cycle = cycle
                result.input_cycles.append(cycle)
                a_next += 1
                b_next += 1
                a_offer = b_offer = False
            if not stall[cycle] and ctx.get(o.valid):
                if result.first_output_cycle is None:
                    result.first_output_cycle = cycle
                result.output_cycles.append(cycle)
                result.outputs.append(ctx.get(o_data))
                if has_sideband:
                    result.sidebands.append(ctx.get(o.payload.sideband))
            await ctx.tick()
            cycle += 1
        result.cycles = cycle

    sim = Simulator(unit)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return result
