"""The packet trace NPU's write pacer (hdl/designs/iteration/packet_trace_npu.py, ``io_rate``) in
the Amaranth simulator: a collective whose sends go into an I/O controller leaves at the
controller's rate over its writers (the pace register, loaded per collective by the NPU's
program loader), whole packets at link rate, the run's first packet unpaced; an unpaced
collective leaves at link rate; a node ends only once its last flit has left the pacer
(docs/fabric_rtl.md, "Writers paced to their controller"; docs/fabric_iteration.md, "Weight
streaming")."""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.contracts.npu_engine import ENGINE_REGS, STAGE_REGS, engine_writes
from hdl.contracts.trace_program import (COLLECTIVE_BIT, PACKET_HEADER_REGS, PACKET_PACE_REG, TRACE_NODES,
                                         TRACE_TABLE_ADDR, TRACE_TABLE_DATA, loader_entries, loader_writes)

PROGRAMS = 64
COMPUTE = 30                 # cycles of the compute nodes between the collectives
PACKET = 8                   # flits per packet
RATE = Fraction(16, 375)     # the paper's controller: 128 GBps of a 3 TBps NPU link


def _engine(send: int) -> dict:
    """An engine program of one stage: ``send`` flits of its own data, nothing received, in
    one chunk (as the compiler's chains, whose chunk is all ones: a packet also ends at each
    chunk's end)."""
    stage = {name: 0 for name in STAGE_REGS}
    stage.update(send_count=send, own_only=send, chunk=0xFFFFFFFF, ws=1, wr=1)
    return {"backpressure": 0, "seed": 1, "stages": [stage]}


def _run(runs, program_and_start):
    """``runs``: per collective (flits sent, pace). Returns per run the cycles its flits left
    the NPU and the cycle its node ended (the trace's node count stepping past it), with the
    cycle its engine was started (counted from the trace's start)."""
    from amaranth.sim import Simulator

    from hdl.contracts.fabric import fabric_spec
    from hdl.contracts.flit import FlitFormat
    from hdl.contracts.packet import VC
    from hdl.designs.fabric.fabric_top import TAG_WIDTH
    from hdl.designs.fabric.packet_fabric_top import packet_format
    from hdl.designs.iteration import PacketTraceNpu
    spec = fabric_spec("fred-b", npus=4, npus_per_l1=2)
    dut = PacketTraceNpu(flit=FlitFormat(dtype=spec.dtype, lanes=spec.lanes, tag_width=TAG_WIDTH),
                         packet=packet_format(8, PACKET), depth=24, nodes=16, programs=PROGRAMS,
                         io_rate=RATE)
    vc = int(VC.DP)
    stages = frozenset({ENGINE_REGS.index("stages")})
    programs = [{0: [*engine_writes(_engine(send)), (PACKET_HEADER_REGS["vc"], vc), (PACKET_PACE_REG, pace)]}
                for send, pace in runs]
    entries = loader_entries(programs, 1, deferred=stages)
    words = [COLLECTIVE_BIT]
    for _ in runs[1:]:
        words += [COMPUTE, COLLECTIVE_BIT]
    writes = ([(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in words], (TRACE_NODES, len(words))]
              + loader_writes(entries, 1, PROGRAMS))
    out = {"sent": [], "nodes": []}

    async def bench(ctx):
        await program_and_start(ctx, dut, writes)
        ctx.set(dut.start, 0)
        nodes, credit = 0, 0
        for cycle in range(6000):
            # an L1 input that always has room: each flit's credit comes back the next cycle
            ctx.set(dut.credit_in[vc], credit)
            credit = 0
            if ctx.get(dut.o.valid):
                out["sent"].append(cycle)
                credit = 1
            if ctx.get(dut.nodes_done) != nodes:
                nodes = ctx.get(dut.nodes_done)
                out["nodes"].append((nodes, cycle))
            if ctx.get(dut.done):
                break
            await ctx.tick()
        out.update(done=ctx.get(dut.done), link_errors=ctx.get(dut.link_errors),
                   run_errors=ctx.get(dut.run_errors))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert out["done"] and out["link_errors"] == 0 and out["run_errors"] == 0, out
    return out


def _per_run(out, runs):
    """The departure cycles split by run (in order: a run's flits all leave before its node
    ends, which the caller checks) and each collective node's end cycle."""
    ends = [cycle for count, cycle in out["nodes"] if count % 2 == 1]   # collective nodes: 1, 3, 5
    sent, split = list(out["sent"]), []
    for send, _ in runs:
        split.append(sent[:send])
        sent = sent[send:]
    assert not sent
    return split, ends


def test_a_paced_collective_leaves_at_the_controllers_rate_over_its_writers_and_ends_when_sent(program_and_start):
    a, b = RATE.numerator, RATE.denominator
    runs = [(24, 1), (16, 0), (24, 2)]
    split, ends = _per_run(_run(runs, program_and_start), runs)
    for (send, pace), times, end in zip(runs, split, ends):
        assert len(times) == send
        # a node ends only once every flit of its run has left the NPU
        assert end >= times[-1], (times, end)
        # whole packets at link rate: each packet's flits in consecutive cycles
        for p in range(0, send, PACKET):
            assert times[p + PACKET - 1] - times[p] == PACKET - 1, times
        if pace == 0:       # link rate: the run's flits back to back (a packet starts with credits)
            assert times[-1] - times[0] == send - 1, times
            continue
        # the run's first packet bypasses the pacer: out within the engine's and the assembler's
        # cycles of the run's start (not a paced packet's 8 x 375/16 x pace cycles later) --
        # the pacer restarts per run
        period = PACKET * b * pace / a
        assert times[PACKET] - times[0] >= period * (PACKET - 1) / PACKET, times
        # rate bound of the pacer: in any window at most window x a / (b pace) + packet + 1 flits
        for i in range(send):
            for j in range(i, send):
                assert j - i + 1 <= (times[j] - times[i] + 1) * a / (b * pace) + PACKET + 1, (i, j, times)
        # and no slower than the rate: the flits after the first packet leave within the
        # limiter's (send - packet) intervals of the first packet, plus a packet's assembly
        assert times[-1] - times[PACKET - 1] <= (send - PACKET) * b * pace / a + PACKET + 2, times
        assert times[-1] - times[PACKET - 1] >= (send - PACKET) * b * pace / a - PACKET - 1, times
    # the first packet of the second paced run leaves right after its node starts: compare with
    # the unpaced run's start (its node end + compute + the sequencer's cycles)
    assert split[2][0] - ends[1] <= COMPUTE + PACKET + 6, (split[2][:2], ends)


def test_an_io_rate_outside_a_flit_per_cycle_is_refused():
    from hdl.contracts.errors import FredError
    from hdl.contracts.flit import FlitFormat
    from hdl.designs.fabric.fabric_top import TAG_WIDTH
    from hdl.designs.fabric.packet_fabric_top import packet_format
    from hdl.designs.iteration import PacketTraceNpu
    with pytest.raises(FredError, match="io_rate"):
        PacketTraceNpu(flit=FlitFormat(dtype="int32", lanes=1, tag_width=TAG_WIDTH), packet=packet_format(8, 8),
                       depth=24, nodes=4, programs=4, io_rate=Fraction(3, 2))
