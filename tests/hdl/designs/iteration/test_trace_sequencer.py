"""The trace sequencer (hdl/designs/iteration/trace_sequencer.py) in the Amaranth simulator: node
timing, the engine handshake, the recorded start/end cycles, an empty trace."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import COLLECTIVE_BIT, TRACE_NODES, TRACE_READ_ADDR, TRACE_TABLE_ADDR, TRACE_TABLE_DATA


def _run(program_and_start, words, engine_cycles, cycles=40):
    """Load ``words``, start, play an engine that is done ``engine_cycles`` cycles after the
    cycle it sees its start; returns (cycle of done, engine start cycles, [(start, end)] per
    node, nodes_done)."""
    from amaranth.sim import Simulator

    from hdl.designs.iteration import TraceSequencer
    dut = TraceSequencer(depth=8)
    out = {}

    async def bench(ctx):
        writes = [(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in words], (TRACE_NODES, len(words))]
        await program_and_start(ctx, dut, writes)
        started, done_at, due = [], None, None
        for cycle in range(cycles):
            # the engine: runs from the cycle after its start, done once engine_cycles ran
            ctx.set(dut.engine_done, due is not None and cycle >= due)
            if ctx.get(dut.engine_start):
                started.append(cycle)
                due = cycle + 1 + engine_cycles
            if done_at is None and ctx.get(dut.done):
                done_at = cycle
            await ctx.tick()
        times = []
        for i in range(len(words)):
            ctx.set(dut.we, 1)
            ctx.set(dut.waddr, TRACE_READ_ADDR)
            ctx.set(dut.wdata, i)
            await ctx.tick()
            times.append((ctx.get(dut.node_start), ctx.get(dut.node_end)))
        out.update(done_at=done_at, started=started, times=times, nodes_done=ctx.get(dut.nodes_done))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out["done_at"], out["started"], out["times"], out["nodes_done"]


def test_nodes_run_back_to_back_and_a_collective_waits_for_the_engine(program_and_start):
    done_at, started, times, nodes_done = _run(program_and_start, [3, 0, COLLECTIVE_BIT, 2], engine_cycles=5)
    # 3 cycles; 0 cycles still takes one; the collective: the start cycle, 5 engine cycles,
    # the cycle in which done is seen; 2 cycles. Cycle 0 is the one after the start pulse.
    assert times == [(0, 3), (3, 4), (4, 11), (11, 13)]
    assert started == [4] and done_at == 13 and nodes_done == 4


def test_an_empty_trace_is_done_at_once_and_the_depth_is_checked(program_and_start):
    done_at, started, _, nodes_done = _run(program_and_start, [], engine_cycles=1, cycles=3)
    assert done_at == 0 and started == [] and nodes_done == 0
    from hdl.designs.iteration import TraceSequencer
    with pytest.raises(FredError, match="depth must be an integer in 1..65536"):
        TraceSequencer(depth=0)
