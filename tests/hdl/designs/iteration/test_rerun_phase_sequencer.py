"""The switch's phase sequencer rerun per collective (hdl/designs/iteration/rerun_phase_sequencer.py)
in the Amaranth simulator: each collective's phase counts loaded after the one before finished,
phase 0 selected again, no flit let in between, nothing after the last."""

from __future__ import annotations

from hdl.contracts.trace_program import loader_entries, loader_writes

PHASES = 2


def _registers(total: int, share: int, mask: int) -> list[tuple[int, int]]:
    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    return sequencer_registers(PHASES, [(total, share, mask)])


def test_each_collective_runs_its_counts_once_then_the_switch_holds_its_inputs(program_and_start):
    from amaranth.sim import Simulator

    from hdl.designs.iteration import RerunPhaseSequencer
    dut = RerunPhaseSequencer(ports=2, phases=PHASES, programs=8)
    # three collectives on the same flows: 2 flits per port, then 3, then 3 again (a repeat:
    # nothing to write, one empty entry)
    programs = [{0: _registers(4, 2, 0b11)}, {0: _registers(6, 3, 0b11)}, {0: _registers(6, 3, 0b11)}]
    entries = loader_entries(programs, 1)
    assert [e[0] for e in entries] == [0, 0, 0, 1, 0, 1, 1]     # 4 writes, 2 writes, none
    out = {}

    async def bench(ctx):
        await program_and_start(ctx, dut, loader_writes(entries, 1, 8))
        ctx.set(dut.select_ready, 1)
        runs, selects = [], []
        for cycle in range(60):
            allow = ctx.get(dut.allow)
            ctx.set(dut.accepted, allow)           # every allowed port has a flit waiting
            if ctx.get(dut.select_valid):
                selects.append(cycle)
                runs.append([0, 0])
            for p in range(2):
                if allow >> p & 1:
                    runs[-1][p] += 1
            await ctx.tick()
        out.update(runs=runs, selects=selects, finished=ctx.get(dut.finished), allow=ctx.get(dut.allow))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert out["runs"] == [[2, 2], [3, 3], [3, 3]]
    # the loader writes collective 0's 4 registers after start, then starts the sequencer
    # (one select cycle, counting from the next); a later collective: go, its writes, start
    first, second, third = out["selects"]
    assert first == 5
    assert second - first == 1 + 2 + 1 + 2 + 1 and third - second == 1 + 3 + 1 + 1 + 1
    assert out["finished"] == 1 and out["allow"] == 0       # no collective left: inputs held


def test_a_collective_of_more_phases_starts_at_its_phase_0_whatever_the_drain_time(program_and_start):
    """A one-phase collective (a ring's) followed by a two-phase one in other slots (a
    hierarchical all-reduce's): its number of phases reaches the sequencer with its start, so
    the sequencer waiting in the ring's phase does not select a phase 1 of it, and the start is
    not lost however long the switch takes to drain for a select (here 10 cycles)."""
    from amaranth.sim import Simulator

    from hdl.contracts.trace_program import SLOT_BASE
    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    from hdl.designs.iteration import RerunPhaseSequencer
    phases, drain = 4, 10
    dut = RerunPhaseSequencer(ports=2, phases=phases, programs=16)
    programs = [{0: [(SLOT_BASE, 0), *sequencer_registers(phases, [(4, 2, 0b11)])]},
                {0: [(SLOT_BASE, 1), *sequencer_registers(phases, [(2, 2, 0b01), (2, 2, 0b10)])]}]
    entries = loader_entries(programs, 1)
    out = {"selects": [], "allowed": []}

    async def bench(ctx):
        await program_and_start(ctx, dut, loader_writes(entries, 1, 16))
        waited = 0
        for _ in range(80):
            allow = ctx.get(dut.allow)
            ctx.set(dut.accepted, allow)           # every allowed port has a flit waiting
            ready = bool(ctx.get(dut.select_valid)) and waited + 1 >= drain
            waited = waited + 1 if ctx.get(dut.select_valid) and not ready else 0
            ctx.set(dut.select_ready, ready)
            if ready:
                out["selects"].append(ctx.get(dut.select_slot))
                out["allowed"].append(0)
            if allow:
                out["allowed"][-1] += bin(allow).count("1")
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # the ring's slot 0 (4 flits), then the next collective's slots 1 and 2 (its base is 1) with
    # their own counts: 2 flits at port 0, then 2 at port 1
    assert out["selects"] == [0, 1, 2]
    assert out["allowed"] == [4, 2, 2]


def test_a_collective_without_phases_on_the_switch_is_skipped(program_and_start):
    """A switch that a collective does not use (0 phases: Fred-C's L2 planes 1-3 in a ring
    across the L1s) moves on to the next collective at once instead of waiting for flits that
    never come (it was stuck there, and every later collective through it stalled)."""
    from amaranth.sim import Simulator

    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    from hdl.designs.iteration import RerunPhaseSequencer
    dut = RerunPhaseSequencer(ports=2, phases=PHASES, programs=16)
    unused = {0: sequencer_registers(PHASES, [])}
    programs = [{0: _registers(4, 2, 0b11)}, unused, unused, {0: _registers(6, 3, 0b11)}]
    entries = loader_entries(programs, 1)
    out = {"runs": []}

    async def bench(ctx):
        await program_and_start(ctx, dut, loader_writes(entries, 1, 16))
        ctx.set(dut.select_ready, 1)
        for _ in range(60):
            allow = ctx.get(dut.allow)
            ctx.set(dut.accepted, allow)           # every allowed port has a flit waiting
            if ctx.get(dut.select_valid):
                out["runs"].append(0)
            if out["runs"]:
                out["runs"][-1] += bin(allow).count("1")
            await ctx.tick()
        out.update(finished=ctx.get(dut.finished), allow=ctx.get(dut.allow))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert out["runs"] == [4, 6]            # the two collectives that use it, in order
    assert out["finished"] == 1 and out["allow"] == 0

