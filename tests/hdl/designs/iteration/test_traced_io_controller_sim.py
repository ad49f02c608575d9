"""A traced I/O controller (hdl/designs/iteration/traced_io_controller.py) alone in Amaranth's
simulator: two I/O collectives' programs from its loader (engine, header, stripe), each run
started by a ``run`` pulse, the L1's credits coming back after random gaps. Every flit that
leaves is checked (data, packet number from 0 in each run, stripe, flow); a run ends only once
the last flit has left (the assembler empty), not when the engine's last flit entered the
paced memory side (docs/fabric_iteration.md, "The packet FRED fabric's I/O iteration")."""

import random
from fractions import Fraction

import pytest
from amaranth.sim import Simulator

from hdl.contracts.flit import FlitFormat
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes, flit_value
from hdl.contracts.trace_program import CONTROLLER_STRIPE_REG, PACKET_HEADER_REGS, loader_entries, loader_writes
from hdl.designs.fabric.packet_fabric_top import packet_format
from hdl.designs.iteration.traced_io_controller import TracedIoController

FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=1)
RATE = Fraction(1, 4)
#: (flits, data weights, stripe, flow) of the two collectives
RUNS = [(20, (0x1234567, 0x89ABCDE), 2, 5), (12, (0x2468ACE, 0x1357BDF), 1, 3)]


def _program(flits, weights, stripe, flow):
    engine = dict(backpressure=0, seed=0, stages=[dict(
        send_count=flits, recv_count=0, ws=weights[0], hs=weights[1], wr=0, hr=0, own_only=flits, add_until=0,
        fwd_count=0, check_from=0, chunk=0xFFFFFFFF, last_base=0, out_base=0, in_base=0, org=0)])
    return {0: engine_writes(engine) + [(PACKET_HEADER_REGS["flow"], flow), (PACKET_HEADER_REGS["vc"], 0),
                                        (CONTROLLER_STRIPE_REG, stripe)]}


def _run(program_and_start, seed, gaps):
    rng = random.Random(seed)
    fmt = packet_format(1, dest_ports=4, stripes=3)
    dut = TracedIoController(flit=FLIT, packet=fmt, depth=8, rate=RATE, programs=64)
    entries = loader_entries([_program(*r) for r in RUNS], 1, deferred=frozenset({ENGINE_REGS.index("stages")}))
    fields = fmt.header
    runs = []

    async def bench(ctx):
        await program_and_start(ctx, dut, loader_writes(entries, 1, 64))
        returns = []
        for flits, *_ in RUNS:
            ctx.set(dut.release, 1)      # the NPUs are all there: the deferred stage count
            for _ in range(200):
                if ctx.get(dut.ready):
                    break
                await ctx.tick()
            assert ctx.get(dut.ready) and not ctx.get(dut.done)
            ctx.set(dut.release, 0)
            ctx.set(dut.run, 1)
            await ctx.tick()
            ctx.set(dut.run, 0)
            run = {"sent": [], "run_done": None}
            for cycle in range(20_000):
                ctx.set(dut.credit_in[0], int(cycle in returns))
                if cycle in returns:
                    returns.remove(cycle)
                if ctx.get(dut.o.valid):
                    tag = ctx.get(dut.o.payload.tag)
                    run["sent"].append((cycle, ctx.get(dut.o.payload.data),
                                        *((tag >> fields[n].offset) & ((1 << fields[n].width) - 1)
                                          for n in ("seq", "stripe", "flow"))))
                    returns.append(max(cycle + 1 + rng.choice(gaps), max(returns, default=0) + 1))
                done = ctx.get(dut.run_done)
                await ctx.tick()
                if done:
                    run["run_done"] = cycle
                    break
            runs.append(run)
            while returns:      # the L1 frees the rest of its slots (credits are link state)
                cycle += 1
                ctx.set(dut.credit_in[0], int(cycle in returns))
                if cycle in returns:
                    returns.remove(cycle)
                await ctx.tick()
            ctx.set(dut.credit_in[0], 0)
            ctx.set(dut.next, 1)
            await ctx.tick()
            ctx.set(dut.next, 0)
        for _ in range(100):
            await ctx.tick()
        runs.append({n: ctx.get(getattr(dut, n)) for n in dut.read_names})

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return runs


@pytest.mark.parametrize("seed,gaps", [(0, [0]), (1, [0, 0, 3, 40, 400]), (2, [0, 90])])
def test_each_run_sends_its_program_and_ends_after_its_last_flit(program_and_start, seed, gaps):
    *runs, reads = _run(program_and_start, seed, gaps)
    for run, (flits, weights, stripe, flow) in zip(runs, RUNS):
        sent = run["sent"]
        assert [data for _, data, *_ in sent] == [flit_value(weights, i, 0) for i in range(flits)]
        assert [s for _, _, s, _, _ in sent] == [i // 8 for i in range(flits)]     # numbered from 0 per run
        assert {(st, fl) for *_, st, fl in sent} == {(stripe, flow)}
        # the run ends after its last flit left (with credits late, the last packet waits in
        # the assembler long after the engine's done)
        assert run["run_done"] is not None and run["run_done"] > sent[-1][0]
        # and no earlier than the memory's time for the stream
        assert run["run_done"] >= flits / RATE
    assert reads == {"done": 1, "runs": 2, "sent": RUNS[-1][0], "run_errors": 0, "link_errors": 0}
