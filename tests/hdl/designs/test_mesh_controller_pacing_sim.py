"""The mesh I/O controllers count their 128 GBps link as the FRED fabric's do (docs/mesh_rtl.md,
"I/O controllers on the mesh"): ``RateToken`` (hdl/designs/mesh/rate_token.py) is the links'
``rate_gate`` (hdl/designs/fabric/link.py), and paced it makes every flit wait its whole b / a
cycles, the first included. Hand-computed departures in Amaranth's simulator: the token alone,
the weight-streaming controller (``IoController``) and the mesh link's unpaced 1/4 unchanged."""

import pytest
from amaranth.sim import Simulator

from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import MeshIoSpec
from hdl.designs.mesh.io_controller import IoController
from hdl.designs.mesh.rate_token import RateToken

A, B = 16, 375     # 128 GBps of the NPU's 3 TBps port


def _paced_departure(k: int, a: int = A, b: int = B) -> int:
    """Cycle (from the first cycle the device waits) in which flit k leaves: the end of its
    interval, ceil((k + 1) b / a) - 1."""
    return -(-(k + 1) * b // a) - 1


def _sim(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_hand_computed_departures():
    # 16/375: the first flit at 23 (not at once), the second at 46, the k-th at ceil((k+1) x 23.4375) - 1
    assert [_paced_departure(k) for k in range(5)] == [23, 46, 70, 93, 117]
    assert _paced_departure(15) == 374          # 16 flits in 375 cycles exactly


def test_a_paced_token_makes_the_first_flit_wait_its_interval_and_the_kth_leave_at_its_end():
    dut = RateToken((A, B), paced=True)
    times = []

    async def bench(ctx):
        await ctx.tick().repeat(3 * B)        # before the start, not waiting: nothing saved
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        ctx.set(dut.waiting, 1)
        for t in range(2 * B):
            go = ctx.get(dut.token)
            ctx.set(dut.spend, go)
            if go:
                times.append(t)
            await ctx.tick()

    _sim(dut, bench)
    assert times == [_paced_departure(k) for k in range(2 * A)]


def test_a_paced_token_saves_nothing_while_not_waiting():
    """The controller's sink: a flit arriving at an idle controller is written b / a cycles
    later, however long the controller was idle."""
    dut = RateToken((A, B), paced=True)
    times = []

    async def bench(ctx):
        await ctx.tick().repeat(2 * B)        # idle: no flit to write
        ctx.set(dut.waiting, 1)
        for t in range(B):
            go = ctx.get(dut.token)
            ctx.set(dut.spend, go)
            if go:
                times.append(t)
                ctx.set(dut.waiting, 0)       # one flit only
            await ctx.tick()

    _sim(dut, bench)
    assert times == [23]


@pytest.mark.parametrize("rate,expected", [((1, 4), [0, 4, 8, 12, 16]), ((A, B), [0, 23, 46, 70])])
def test_an_unpaced_token_moves_its_first_flit_at_once(rate, expected):
    """A router port (the mesh's 1/4 links): a flit crosses in one cycle, so the first goes at
    once, then one at the end of each interval (the links' rule, unchanged)."""
    dut = RateToken(rate)
    times = []

    async def bench(ctx):
        for t in range(expected[-1] + 2):
            go = ctx.get(dut.token)
            ctx.set(dut.spend, go)
            if go:
                times.append(t)
            await ctx.tick()

    _sim(dut, bench)
    assert times == expected


def test_the_weight_streaming_controller_sends_flit_k_at_the_end_of_its_interval():
    """``IoController`` with credits to spare: ``start`` in cycle 0, flit k leaves in cycle
    1 + ceil((k + 1) 375 / 16) - 1 (its ``o.valid``), 5 flits in 118 cycles: 5 x 23.4 from the
    start, not 4 x 23.4 + 1."""
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, io_rate=(A, B), queue_depth=64)
    dut = IoController(spec=spec, index=0, dest=(1, 1))
    times = []

    async def bench(ctx):
        await ctx.tick().repeat(50)           # programmed before the start: nothing saved
        ctx.set(dut.stripe, 5)
        ctx.set(dut.mode, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for t in range(1, 160):
            if ctx.get(dut.o.valid):
                times.append(t)
                ctx.set(dut.credit, 1)        # the router frees the slot at once
            else:
                ctx.set(dut.credit, 0)
            await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.error) == 0

    _sim(dut, bench)
    assert times == [1 + _paced_departure(k) for k in range(5)] == [24, 47, 71, 94, 118]


def _cycles(run_mesh_io_top, op: str, io_rate) -> int:
    """One controller (north of NPU 0) on a 2 x 2 mesh, X-Y trees, a 1-flit stripe: weight
    streaming (``io-load``) or the reduce-out (``io-store``), the run's cycles."""
    from hdl.compiler.mesh_io_program import io_load_program, io_store_program
    from hdl.designs.mesh.mesh_io_store_top import STORE_NPU_READ, MeshIoStoreTop, store_controller_read
    from hdl.designs.mesh.mesh_io_top import IO_CONTROLLER_READ, IO_NPU_READ, MeshIoTop
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=1, io_rate=io_rate, queue_depth=8)
    if op == "io-load":
        program = io_load_program(spec, 1, "tree-xy")
        out = run_mesh_io_top(MeshIoTop(spec), stripe=1, mode_index=program.mode_index, stall=0,
                              npu_read=IO_NPU_READ, controller_read=IO_CONTROLLER_READ)
        assert all(n["received"] == program.expect and n["errors"] == 0 for n in out["npus"])
    else:
        program = io_store_program(spec, 1, "tree-xy", max_stripe=8)
        out = run_mesh_io_top(MeshIoStoreTop(spec, max_stripe=8), stripe=1, mode_index=program.mode_index,
                              stall=0, npu_read=STORE_NPU_READ, controller_read=store_controller_read(spec))
        (c,) = out["controllers"]
        assert (c["received"], c["errors"], c["complete"]) == (program.expect[0], 0, 1)
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    return out["global"]["cycles"]


@pytest.mark.parametrize("op", ["io-load", "io-store"])
def test_one_flit_through_a_paced_controller_takes_its_whole_interval_longer(op, run_mesh_io_top):
    """The mechanism on a 2 x 2 mesh: with the controller's link at 16/375 a load's only flit
    leaves the controller 23 cycles after the start and a store's is written 23 cycles after it
    arrived (ceil(375/16) - 1: the flit moves in the last cycle of its interval), against the
    same run with a full-rate controller (1, 1: no counter); the model's term is 375/16 =
    23.4375 (``sysmodel.network.Traffic.controller_lead_s``)."""
    assert _cycles(run_mesh_io_top, op, (A, B)) - _cycles(run_mesh_io_top, op, (1, 1)) == _paced_departure(0) == 23
