"""The loading trace sequencer and its program loader (hdl/designs/iteration/) in the Amaranth
simulator: each collective's engine program written while the NPU computes, a deferred write
held until its node, repeats, the cycles a node waits for its program."""

from __future__ import annotations

from hdl.contracts.trace_program import (COLLECTIVE_BIT, TRACE_NODES, TRACE_READ_ADDR, TRACE_TABLE_ADDR,
                                         TRACE_TABLE_DATA, loader_entries, loader_writes)

STAGES = 50     # the deferred register of these tests


def _run(program_and_start, words, programs, engine_cycles, cycles=80, overlap=False):
    """Load ``words`` and the loader entries of ``programs``, start, play two engines done
    ``engine_cycles`` cycles after each start; returns (node times, engine start cycles, lane
    writes as (cycle, lane, reg, value), load_stall, done cycle)."""
    from amaranth.sim import Simulator

    from hdl.designs.iteration import LoadingTraceSequencer
    dut = LoadingTraceSequencer(depth=8, programs=16, lanes=2, overlap=overlap)
    out = {}

    async def bench(ctx):
        entries = loader_entries(programs, 2, deferred=frozenset({STAGES}))
        writes = [(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in words], (TRACE_NODES, len(words)),
                  *loader_writes(entries, 2, 16)]
        await program_and_start(ctx, dut, writes)
        started, lane_writes, due, done_at = [], [], None, None
        for cycle in range(cycles):
            ctx.set(dut.engine_done, due is not None and cycle >= due)
            if ctx.get(dut.engine_start):
                started.append(cycle)
                due = cycle + 1 + engine_cycles
            we = ctx.get(dut.lane_we)
            for lane in range(2):
                if we >> lane & 1:
                    lane_writes.append((cycle, lane, ctx.get(dut.lane_waddr) >> 6 * lane & 63,
                                        ctx.get(dut.lane_wdata) >> 32 * lane & 0xFFFFFFFF))
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
        out.update(times=times, started=started, lane_writes=lane_writes,
                   load_stall=ctx.get(dut.load_stall), done_at=done_at)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_programs_load_under_compute_deferred_writes_wait_and_collectives_repeat(program_and_start):
    first = {0: [(1, 11), (2, 12), (STAGES, 3)], 1: [(1, 21)]}
    second = {0: [(1, 11), (2, 99)], 1: [(1, 21), (STAGES, 2)]}      # only two registers change
    # compute 6, collective 0 twice, compute 1, collective 1 once
    out = _run(program_and_start, [6, COLLECTIVE_BIT | 2, 1, COLLECTIVE_BIT], [first, second], engine_cycles=3)
    # program 0: two entries from cycle 0 (lane 0 regs 1 and 2 beside lane 1's reg 1), its
    # deferred stages write in collective 0's first cycle (6), which starts the engines a cycle later
    assert out["lane_writes"][:4] == [(0, 0, 1, 11), (0, 1, 1, 21), (1, 0, 2, 12), (6, 0, STAGES, 3)]
    # two runs, each: the start cycle, 3 engine cycles, the cycle done is seen
    assert out["started"][:2] == [7, 12]
    assert out["times"][1] == (6, 17)
    # program 1 loads from the cycle after collective 0's last (16): only reg 2 of lane 0 (the
    # rest is unchanged), under the 1-cycle compute node, then lane 1's deferred stages once
    # collective 1 is reached
    assert out["lane_writes"][4:] == [(17, 0, 2, 99), (18, 1, STAGES, 2)]
    assert out["times"][2] == (17, 18)
    assert out["started"][2] == 19 and out["times"][3] == (18, 24)
    assert out["load_stall"] == 1 + 1      # a cycle for each deferred write
    assert out["done_at"] == 24


def test_without_programs_it_runs_as_the_one_program_sequencer(program_and_start):
    out = _run(program_and_start, [3, 0, COLLECTIVE_BIT, 2], [], engine_cycles=5, cycles=40)
    # the TraceSequencer's own test's node times (tests/hdl/designs/iteration/test_trace_sequencer.py)
    assert out["times"] == [(0, 3), (3, 4), (4, 11), (11, 13)]
    assert out["started"] == [4] and out["lane_writes"] == [] and out["load_stall"] == 0


def test_overlapped_programs_load_as_the_collective_lane_reaches_them(program_and_start):
    first = {0: [(1, 11), (2, 12), (STAGES, 3)], 1: [(1, 21)]}
    second = {0: [(1, 11), (2, 99)], 1: [(1, 21), (STAGES, 2)]}
    # the previous test's trace, overlapped: the compute node runs under collective 0
    out = _run(program_and_start, [6, COLLECTIVE_BIT | 2, 1, COLLECTIVE_BIT], [first, second], engine_cycles=3,
               overlap=True)
    # collective 0 issued in 6 and taken by the idle lane then: its first cycle is 7, where the
    # deferred stages write; its runs start in 8 and 13 (each: start, 3 engine cycles, done seen)
    assert out["lane_writes"][:4] == [(0, 0, 1, 11), (0, 1, 1, 21), (1, 0, 2, 12), (7, 0, STAGES, 3)]
    assert out["started"] == [8, 13, 20]
    assert out["times"][:3] == [(0, 6), (7, 18), (7, 8)]
    # collective 1, issued in 8, waits in the queue for the lane (idle from 18); program 1
    # loads from the cycle after collective 0's last run was seen done (17), its deferred write
    # in collective 1's first cycle (19)
    assert out["lane_writes"][4:] == [(18, 0, 2, 99), (19, 1, STAGES, 2)]
    assert out["times"][3] == (19, 25)
    assert out["load_stall"] == 1 + 1 and out["done_at"] == 25
