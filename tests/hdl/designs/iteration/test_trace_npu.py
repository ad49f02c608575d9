"""The trace NPU (hdl/designs/iteration/trace_npu.py) in the Amaranth simulator: between two
collectives of different sizes its engine takes no flit, although its program loader has
already rewritten the engine's ``send_total`` (which drops the engine's ``done``); the next
collective's flits wait at ``rx`` until the engine has started on it (docs/fabric_iteration.md,
"Several collectives per NPU on the circuit FRED fabric")."""

from __future__ import annotations

from hdl.contracts.npu_engine import ENGINE_REGS, STAGE_REGS, engine_writes
from hdl.contracts.trace_program import (COLLECTIVE_BIT, TRACE_NODES, TRACE_TABLE_ADDR, TRACE_TABLE_DATA,
                                         loader_entries, loader_writes)

PROGRAMS = 64
COMPUTE = 20                 # cycles between the two collectives


def _engine(send: int, recv: int) -> dict:
    """An engine program of one stage: ``send`` flits of its own data, ``recv`` flits received
    and not checked (``check_from`` = ``recv``): the test counts flits, not their data."""
    stage = {name: 0 for name in STAGE_REGS}
    stage.update(send_count=send, own_only=send, recv_count=recv, check_from=recv, chunk=1,
                 ws=1, wr=1)
    return {"backpressure": 0, "seed": 1, "stages": [stage]}


def test_the_next_collectives_flits_wait_while_the_loader_rewrites_the_engine(program_and_start):
    from amaranth.sim import Simulator

    from hdl.contracts.fabric import fabric_spec
    from hdl.contracts.flit import FlitFormat
    from hdl.designs.fabric.fabric_top import TAG_WIDTH
    from hdl.designs.iteration.trace_npu import TraceNpu
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2)
    dut = TraceNpu(FlitFormat(dtype=spec.dtype, lanes=spec.lanes, tag_width=TAG_WIDTH), depth=8,
                   programs=PROGRAMS)
    # two collectives of different sizes (send_total 3, then 5), a compute node between them
    first, second = _engine(send=3, recv=4), _engine(send=5, recv=6)
    stages = frozenset({ENGINE_REGS.index("stages")})
    entries = loader_entries([{0: engine_writes(first)}, {0: engine_writes(second)}], 1, deferred=stages)
    words = [COLLECTIVE_BIT, COMPUTE, COLLECTIVE_BIT]
    writes = ([(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in words], (TRACE_NODES, len(words))]
              + loader_writes(entries, 1, PROGRAMS))
    out = {"taken": [], "starts": []}

    async def bench(ctx):
        ctx.set(dut.tx.ready, 1)
        await program_and_start(ctx, dut, writes)
        ctx.set(dut.start, 0)
        for cycle in range(200):
            # a neighbour with flits always waiting (the next collective's as soon as the last is sent)
            ctx.set(dut.rx.valid, 1)
            ctx.set(dut.rx.payload.data, cycle)
            if ctx.get(dut.done):
                break
            if ctx.get(dut.rx.valid) and ctx.get(dut.rx.ready):
                out["taken"].append(cycle)
            await ctx.tick()
        ctx.set(dut.rx.valid, 0)
        out.update(done=ctx.get(dut.done), received=ctx.get(dut.received), extra=ctx.get(dut.extra),
                   run_errors=ctx.get(dut.run_errors), sent=ctx.get(dut.sent))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert out["done"]
    # exactly the two collectives' flits were taken, 4 then 6, none between them (each one would
    # be an extra of the finished collective, lost at the next start, and missing from the next)
    taken = out["taken"]
    assert len(taken) == 4 + 6, taken
    gap = taken[4] - taken[3]
    assert gap > COMPUTE, taken
    assert out["received"] == 6 and out["extra"] == 0 and out["sent"] == 5
    assert out["run_errors"] == 0
