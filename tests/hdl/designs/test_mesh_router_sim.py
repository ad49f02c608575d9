"""The mesh router's parts (hdl/designs/mesh/) in Amaranth's simulator: the route compute
against ``route_port`` for every position and destination of a 4 x 4 coordinate space, the
credit counters' room / error rules, and the router's latency and parameter checks. The
router under traffic is the cocotb bench's (cocotb_tests/bench_mesh_router.py)."""

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_PORTS, VC_ORDERS, WEST, EAST, MeshFlitFormat, route_port
from hdl.designs.mesh import MeshRouter
from hdl.designs.mesh.output_credits import OutputCredits
from hdl.designs.mesh.route_compute import RouteCompute
from hdl.designs.registry import get_design

FLIT = MeshFlitFormat(data_width=32, coord_bits=3, packet_flits=4)


def _run(dut, bench, *, clocked=True):
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("order", VC_ORDERS)
def test_route_compute_matches_the_reference_everywhere(order):
    dut = RouteCompute(coord_bits=2, order=order)
    mismatches = []

    async def bench(ctx):
        for here in range(16):
            for there in range(16):
                x, y, dx, dy = here % 4, here // 4, there % 4, there // 4
                ctx.set(dut.pos_x, x), ctx.set(dut.pos_y, y)
                ctx.set(dut.dest_x, dx), ctx.set(dut.dest_y, dy)
                port = ctx.get(dut.port)
                if port != 1 << route_port(x, y, dx, dy, order):
                    mismatches.append((x, y, dx, dy, port))
    _run(dut, bench, clocked=False)
    assert not mismatches


def test_output_credits_room_has_and_error():
    dut = OutputCredits(flit=FLIT, depth=5)

    async def bench(ctx):
        assert ctx.get(dut.room) == 0b11 and ctx.get(dut.has) == 0b11
        ctx.set(dut.spend, 0b01)
        await ctx.tick()
        await ctx.tick()        # VC 0: 5 - 2 = 3 < packet_flits: no room, still credits
        ctx.set(dut.spend, 0)
        assert ctx.get(dut.room) == 0b10 and ctx.get(dut.has) == 0b11
        ctx.set(dut.give, 0b01)
        await ctx.tick()
        assert ctx.get(dut.room) == 0b11 and ctx.get(dut.error) == 0
        await ctx.tick()
        await ctx.tick()        # 6 > depth: a credit never given came back
        assert ctx.get(dut.error) == 1
    _run(dut, bench)


def test_router_latency_is_measured_two_cycles():
    dut = MeshRouter(flit=FLIT, depth=8)
    seen = []

    async def bench(ctx):
        ctx.set(dut.pos_x, 1), ctx.set(dut.pos_y, 1)
        ctx.set(dut.i[WEST].valid, 1)
        ctx.set(dut.i[WEST].payload.as_value(), FLIT.pack(data=0x1234, last=1, vc=0, dest_x=3, dest_y=1))
        await ctx.tick()
        ctx.set(dut.i[WEST].valid, 0)
        for cycle in range(1, 6):
            if ctx.get(dut.o[EAST].valid):
                seen.append((cycle, FLIT.unpack(ctx.get(dut.o[EAST].payload.as_value()))["data"]))
            assert not any(ctx.get(dut.o[p].valid) for p in range(MESH_PORTS) if p != EAST)
            await ctx.tick()
    _run(dut, bench)
    assert seen == [(dut.latency, 0x1234)]


def test_bad_parameters_fail_before_building():
    with pytest.raises(FredError, match="must hold a whole packet"):
        MeshRouter(flit=FLIT, depth=2)
    with pytest.raises(FredError, match="flit must be a MeshFlitFormat"):
        MeshRouter(flit=None, depth=8)
    assert get_design("mesh-router") is get_design("mesh_router")


def test_output_credits_rate_one_in_four_moves_a_flit_every_fourth_cycle():
    dut = OutputCredits(flit=FLIT, depth=64, rate=(1, 4))
    moved = []

    async def bench(ctx):
        for cycle in range(20):
            go = ctx.get(dut.has) & 1
            ctx.set(dut.spend, go)
            if go:
                moved.append(cycle)
            await ctx.tick()
    _run(dut, bench)
    assert moved == [0, 4, 8, 12, 16]
    with pytest.raises(FredError, match="0 < a <= b"):
        OutputCredits(flit=FLIT, depth=8, rate=(2, 1))
