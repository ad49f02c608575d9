"""The trace sequencer (hdl/designs/iteration/trace_sequencer.py) in the Amaranth simulator: node
timing, the engine handshake, the recorded start/end cycles, an empty trace; the overlapped
sequencer's two lanes (compute under a collective, a compute node that waits for the issued
collectives, a full issue queue)."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.trace_program import (COLLECTIVE_BIT, TRACE_NODES, TRACE_READ_ADDR, TRACE_TABLE_ADDR,
                                         TRACE_TABLE_DATA, WAIT_BIT)


def _run(program_and_start, words, engine_cycles, cycles=40, **options):
    """Load ``words``, start, play an engine that is done ``engine_cycles`` cycles after the
    cycle it sees its start; returns (cycle of done, engine start cycles, [(start, end)] per
    node, nodes_done). ``options``: the sequencer's (``overlap``, ``issue_depth``)."""
    from amaranth.sim import Simulator

    from hdl.designs.iteration import TraceSequencer
    dut = TraceSequencer(depth=8, **options)
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


def test_overlapped_compute_runs_under_a_collective_and_a_wait_node_waits_for_it(program_and_start):
    words = [3, COLLECTIVE_BIT, 4, WAIT_BIT | 1, 2, COLLECTIVE_BIT, WAIT_BIT | 2, 1]
    done_at, started, times, nodes_done = _run(program_and_start, words, engine_cycles=5, overlap=True)
    # node 0: cycles 0-2. The collective is issued in cycle 3 (one cycle of the node lane), taken
    # by the idle collective lane then, its engine started in 4 and seen done in 10 (5 engine
    # cycles from 5): (4, 11). Node 2 runs under it from cycle 4; the wait node holds until
    # the collective's last cycle (10), which counts, and takes it; the second collective is
    # issued in 13, started in 14, seen done in 20; the second wait node holds until then.
    assert times == [(0, 3), (4, 11), (4, 8), (10, 11), (11, 13), (14, 21), (20, 21), (21, 22)]
    assert started == [4, 14] and done_at == 22 and nodes_done == 8


def test_overlapped_compute_without_wait_does_not_wait_and_a_full_queue_holds_the_issue(program_and_start):
    # an issue queue of one: the second collective waits in it, the third holds the node lane
    words = [COLLECTIVE_BIT, COLLECTIVE_BIT, COLLECTIVE_BIT, 2]
    done_at, started, times, _ = _run(program_and_start, words, engine_cycles=3, overlap=True, issue_depth=1)
    # collective 0: taken in its issue cycle 0, started in 1, seen done in 5 (3 engine cycles
    # from 2): (1, 6). Collective 1 is queued in 1; the lane takes it in 6 (after its last
    # cycle), starts it in 7: (7, 12). Collective 2 waits for room in the queue until 7 (the
    # queue emptied in 6); collective 1's successor, taken in 12: (13, 18). The compute node
    # starts in 8 and waits for none of them.
    assert times == [(1, 6), (7, 12), (13, 18), (8, 10)]
    assert started == [1, 7, 13] and done_at == 18


def test_the_overlapped_sequencer_checks_its_parameters():
    from hdl.designs.iteration import TraceSequencer
    with pytest.raises(FredError, match="overlap must be True or False"):
        TraceSequencer(depth=8, overlap=1)
    with pytest.raises(FredError, match="issue_depth must be an integer in 1..65536"):
        TraceSequencer(depth=8, overlap=True, issue_depth=0)
