"""The write pacer (hdl/designs/fabric/write_pacer.py; docs/fabric_rtl.md, "Host rules") in
Amaranth's simulator: a writer of ``divisor`` sharing a sink of a / b flits per cycle sends
whole packets at a / (b ``divisor``) after an unpaced first packet; ``divisor`` 0 passes the
stream untouched; no flit is lost, duplicated, reordered or corrupted under random producer
gaps and consumer stalls. And the compiler's side (:func:`write_paces`): which NPUs are paced,
by how many writers."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.designs.fabric.rate_limiter import RateLimiter
from hdl.designs.fabric.write_pacer import WritePacer
from hdl.designs.layouts import flit_layout

FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=1)


def _pace(flits, *, rate, divisor, size, seed=0, produce=1.0, consume=1.0):
    """``flits`` words through a WritePacer; returns [(word, last, cycle)] as taken at ``o``
    and the cycle of each flit's acceptance at ``i``."""
    rng = random.Random(seed)
    dut = WritePacer(flit_layout(FLIT), rate=rate, packet_flits=size)
    taken, accepted = [], []

    async def bench(ctx):
        ctx.set(dut.divisor, divisor)
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        cycle, n = 0, 0
        limit = 4 * flits * rate[1] * max(divisor, 1) // rate[0] + 200
        while len(taken) < flits and cycle < limit:
            offer = n < flits and rng.random() < produce
            ctx.set(dut.i.valid, int(offer))
            ctx.set(dut.i.payload.data, n)
            ctx.set(dut.i.payload.last, int(n == flits - 1))
            ctx.set(dut.o.ready, int(rng.random() < consume))
            if divisor == 0:      # untouched: o is i, combinationally
                assert ctx.get(dut.o.valid) == int(offer)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                taken.append((ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.last), cycle))
            if offer and ctx.get(dut.i.ready):
                accepted.append(cycle)
                n += 1
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return taken, accepted


def _starts(taken, size):
    return [cycle for index, (_, _, cycle) in enumerate(taken) if index % size == 0]


@pytest.mark.parametrize("divisor", [1, 2, 3])
def test_whole_packets_leave_at_the_sinks_rate_over_its_writers(divisor):
    """rate 1/4, 4-flit packets: a flit costs 4 x divisor cycles, a packet 16 x divisor. The
    first packet goes unpaced (offered the cycle after its 4 flits entered, cycles 0-3); every
    later packet starts exactly 16 x divisor cycles after the one before (the limiter is
    exact: no drift), and each leaves in consecutive cycles."""
    size, flits = 4, 24
    taken, _ = _pace(flits, rate=(1, 4), divisor=divisor, size=size)
    assert [word for word, _, _ in taken] == list(range(flits))
    assert [last for _, last, _ in taken] == [0] * (flits - 1) + [1]
    starts = _starts(taken, size)
    assert starts[0] == size
    assert [b - a for a, b in zip(starts[1:], starts[2:])] == [size * 4 * divisor] * (len(starts) - 2)
    for p, start in enumerate(starts):
        assert [c for _, _, c in taken[p * size:(p + 1) * size]] == list(range(start, start + size))


def test_the_paper_controller_rate_is_exact_over_a_long_write():
    """16/375 (128 GBps of a 3 TBps link), one writer, 8-flit packets: after the first packet,
    96 flits take exactly 96 x 375 / 16 = 2,250 cycles (12 packets of 187.5 cycles), the
    rate's rounding never accumulates."""
    taken, _ = _pace(8 + 96 + 8, rate=(16, 375), divisor=1, size=8)
    starts = _starts(taken, 8)
    assert starts[13] - starts[1] == 96 * 375 // 16
    assert all(187 <= b - a <= 188 for a, b in zip(starts[1:], starts[2:]))


def test_divisor_zero_passes_the_stream_untouched():
    taken, accepted = _pace(20, rate=(16, 375), divisor=0, size=8)
    assert [word for word, _, _ in taken] == list(range(20))
    assert [c for _, _, c in taken] == accepted == list(range(20))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_flit_is_lost_duplicated_or_reordered_under_gaps_and_stalls(seed):
    """Random producer gaps and consumer stalls (the packetizer's credits): every word once,
    in order, ``last`` on the last only; no packet starts less than its pacing time (8 x 2 x 4
    cycles at 1/4 over 2 writers) after the one before, past the unpaced first."""
    taken, _ = _pace(45, rate=(1, 4), divisor=2, size=8, seed=seed, produce=0.6, consume=0.5)
    assert [word for word, _, _ in taken] == list(range(45))
    assert [last for _, last, _ in taken] == [0] * 44 + [1]
    starts = _starts(taken, 8)
    assert all(b - a >= 8 * 2 * 4 - 8 for a, b in zip(starts[1:], starts[2:]))


def test_a_run_time_divisor_needs_a_paced_limiter():
    with pytest.raises(FredError, match="must be paced"):
        RateLimiter(flit_layout(FLIT), rate=(1, 4), divisor_bits=8)


def test_write_paces_counts_the_writers_into_each_controller():
    """The compiler's side: an NPU is paced by the number of NPUs whose online unicasts go to
    the same controller; an NPU that sends to an NPU, or does not send, is not paced."""
    from types import SimpleNamespace
    from hdl.compiler.packet_fabric_program import write_paces
    from hdl.contracts.fabric import fabric_spec
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=2)
    sends = [8, 8, 8, 0, 8, 8, 0, 0]
    program = SimpleNamespace(engines=[{"stages": [{"send_count": n}]} for n in sends])
    # NPUs 0, 1, 5 -> controller 6; NPU 2 -> controller 7; NPU 4 -> NPU 3; NPU 3 sends nothing
    flows = [6, 6, 7, 6, 3, 6, 0, 0]
    headers = [{"flow": f} for f in flows]
    assert write_paces(spec, program, headers) == {0: 3, 1: 3, 2: 1, 3: 0, 4: 0, 5: 3}
    # only the online endpoints' headers name a destination
    assert write_paces(spec, program, headers, ranks={0, 2}) == {0: 1, 1: 0, 2: 1, 3: 0, 4: 0, 5: 0}


def test_write_paces_of_the_far_write_scenario():
    """dp-under-far-write on the 6-NPU Fred-D: NPU 3 (NPU 1 of L1 1) writes into controller 6,
    alone; the DP all-reduce's NPUs (in-switch, not online) are not paced."""
    from cocotb_tests.fabric.packet_fabric_sim import _packet, packet_load_sequence
    from hdl.compiler.concurrent_program import concurrent_program
    from hdl.contracts.fabric import fabric_spec
    from hdl.designs.fabric.packet_fabric_top import PACE_REG
    from studies.concurrent_case import scenario_classes
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=1)
    classes = scenario_classes(spec, "dp-under-far-write", size=16, load_size=64, delay=40)
    program, request, vcs, delays, _ = concurrent_program(spec, classes)
    load = packet_load_sequence(spec, request, program, _packet(spec, 8, True), vcs, delays)
    assert {unit: value for unit, reg, value in load["writes"] if reg == PACE_REG} == {
        0: 0, 1: 0, 2: 0, 3: 1, 4: 0, 5: 0}
