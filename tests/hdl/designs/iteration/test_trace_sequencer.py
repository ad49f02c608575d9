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
    # node 0: cycles 0-2. The collective is issued in cycle 3 (one cycle of the node lane),
    # taken from the queue in cycle 4, its engine started in 5 (the lane's first cycle) and
    # seen done in 11 (5 engine cycles from 6): (5, 12). Node 2 runs under it from cycle 4;
    # the wait node holds until one collective has finished (counted in 12) and takes that
    # cycle; the second collective is issued in 15, started in 17, seen done in 23; the
    # second wait node holds until then.
    assert times == [(0, 3), (5, 12), (4, 8), (12, 13), (13, 15), (17, 24), (24, 25), (25, 26)]
    assert started == [5, 17] and done_at == 26 and nodes_done == 8


def test_overlapped_compute_without_wait_does_not_wait_and_a_full_queue_holds_the_issue(program_and_start):
    # an issue queue of one: the second collective is issued once the lane took the first
    words = [COLLECTIVE_BIT, COLLECTIVE_BIT, 2]
    done_at, started, times, _ = _run(program_and_start, words, engine_cycles=3, overlap=True, issue_depth=1)
    # issued in 0 and (queue full in 1) 2; the lane: taken in 1, started in 2, done seen in 6
    # (3 engine cycles from 3): (2, 7); taken in 7, started in 8, done in 12: (8, 13). The
    # compute node starts in 3 (after the second issue) and does not wait for either.
    assert times == [(2, 7), (8, 13), (3, 5)]
    assert started == [2, 8] and done_at == 13


def test_the_overlapped_sequencer_checks_its_parameters():
    from hdl.designs.iteration import TraceSequencer
    with pytest.raises(FredError, match="overlap must be True or False"):
        TraceSequencer(depth=8, overlap=1)
    with pytest.raises(FredError, match="issue_depth must be an integer in 1..65536"):
        TraceSequencer(depth=8, overlap=True, issue_depth=0)
