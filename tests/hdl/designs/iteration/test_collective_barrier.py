"""``CollectiveBarrier`` (hdl/designs/iteration/collective_barrier.py) cycle by cycle in the
Amaranth simulator, hand-computed: 3 NPUs whose runs end at different cycles."""

from __future__ import annotations

import pytest


def _run(events, cycles):
    """``events``: {cycle: (run_over bits, trace_done bits)} (held for that cycle only; the
    start pulse in cycle 0). Returns ``may_start`` per cycle, sampled before the clock edge."""
    from amaranth.sim import Simulator

    from hdl.designs.iteration import CollectiveBarrier
    dut = CollectiveBarrier(3)
    seen = []

    async def bench(ctx):
        for cycle in range(cycles):
            ctx.set(dut.start, cycle == 0)
            over, done = events.get(cycle, (0, 0))
            ctx.set(dut.run_over, over)
            ctx.set(dut.trace_done, done)
            seen.append(ctx.get(dut.may_start))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_an_npu_that_finished_a_run_waits_until_every_npu_has_finished_it():
    # NPU 0 ends its run in cycle 2, NPU 2 in cycle 4, NPU 1 in cycle 6; NPU 1 again in 9
    seen = _run({2: (0b001, 0), 4: (0b100, 0), 6: (0b010, 0), 9: (0b010, 0)}, 12)
    assert seen[:3] == [0b111] * 3
    assert seen[3:5] == [0b110] * 2           # NPU 0 finished: it waits
    assert seen[5:7] == [0b010] * 2           # and NPU 2
    assert seen[7:10] == [0b111] * 3          # the last one ended in 6: everyone may start in 7
    assert seen[10:] == [0b101] * 2           # NPU 1 finished its next run first


def test_runs_ending_in_one_cycle_and_ended_traces_hold_nobody():
    # all three in cycle 2: free the next cycle; then NPU 2's trace is over (bit held), so the
    # runs of 0 and 1 ending free them
    seen = _run({2: (0b111, 0), 5: (0b001, 0b100), 6: (0b010, 0b100)}, 9)
    assert seen == [0b111] * 6 + [0b110, 0b111, 0b111]


def test_a_barrier_of_no_npu_is_refused():
    from hdl.contracts.errors import FredError
    from hdl.designs.iteration import CollectiveBarrier
    with pytest.raises(FredError, match="at least 1 NPU"):
        CollectiveBarrier(0)
