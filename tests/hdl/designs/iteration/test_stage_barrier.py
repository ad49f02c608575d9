"""``StageBarrier`` (hdl/designs/iteration/stage_barrier.py) cycle by cycle in the Amaranth
simulator, hand-computed: 3 NPUs passing the two stage boundaries at different cycles."""

from __future__ import annotations

import pytest


def _run(past_from, cycles):
    """``past_from``: per NPU, per boundary s, the first cycle its ``past`` bit s is high (held
    from then on; None: never); the start pulse in cycle 0. Returns ``open`` per cycle,
    sampled before the clock edge."""
    from amaranth.sim import Simulator

    from hdl.designs.iteration import StageBarrier
    dut = StageBarrier(len(past_from))
    seen = []

    async def bench(ctx):
        for cycle in range(cycles):
            ctx.set(dut.start, cycle == 0)
            ctx.set(dut.past, sum(1 << (2 * r + s) for r, firsts in enumerate(past_from)
                                  for s, first in enumerate(firsts) if first is not None and cycle >= first))
            seen.append(ctx.get(dut.open))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_a_stage_opens_the_cycle_after_the_last_npu_passed_the_one_before():
    # boundary 0: NPUs past it in cycles 2, 5, 3 -> open from 6; boundary 1: 7, 9, 8 -> from 10
    seen = _run([(2, 7), (5, 9), (3, 8)], 12)
    assert seen[:6] == [0] * 6
    assert seen[6:10] == [0b01] * 4
    assert seen[10:] == [0b11] * 2


def test_start_closes_every_stage_and_a_held_bit_keeps_it_open():
    # every bit high from cycle 0: the start pulse holds open at 0 in cycle 1, open from 2
    seen = _run([(0, 0), (0, 0)], 4)
    assert seen == [0, 0, 0b11, 0b11]
    # one NPU never past boundary 1: it never opens
    assert _run([(1, 1), (1, None)], 5)[-1] == 0b01


def test_a_barrier_of_no_npu_is_refused():
    from hdl.contracts.errors import FredError
    from hdl.designs.iteration import StageBarrier
    with pytest.raises(FredError, match="at least 1 NPU"):
        StageBarrier(0)
