"""Checkpoint spills (``io-write`` / ``io-read``) on the RTL mesh
(hdl/designs/mesh/mesh_io_spill_top.py) in Amaranth's simulator on a 2 x 2 mesh with its 8
boundary controllers: every controller receives each NPU's stripe once, in order, intact (which
NPU, which controller, which flit: its checker), and every NPU each controller's, also under
random idle of every sender and controller sink; never faster than a controller's link moving
one stripe per NPU. The 5 x 4 wafer runs under Verilator (tests/cocotb_tests/test_mesh_io_cocotb.py)."""

import pytest

from hdl.compiler.mesh_io_program import io_spill_program, spill_dests, spill_order
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, NORTH, SOUTH, WEST, MeshFabricSpec
from hdl.contracts.mesh_io import SPILL_OPS, MeshIoSpec, spill_check, spill_word
from hdl.designs.mesh.mesh_io_spill_top import SPILL_READ, MeshIoSpillTop

SMALL = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, io_rate=(1, 2), queue_depth=64)


def _check(run_mesh_io_top, op, stripe, stall=0, spec=SMALL):
    program = io_spill_program(spec, stripe, op)
    out = run_mesh_io_top(MeshIoSpillTop(spec), stripe=stripe, mode_index=program.mode_index, stall=stall,
                          npu_read=SPILL_READ, controller_read=SPILL_READ)
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    senders, receivers = ("npus", "controllers") if op == "io-write" else ("controllers", "npus")
    for u in out[senders]:
        assert u["sent"] == program.sends
    for u in out[receivers]:
        assert (u["received"], u["errors"], u["first_error"], u["complete"]) == (program.expect, 0, 0, 1)
    # each controller's link moves one stripe per NPU at its rate (a, b)
    a, b = spec.io_rate
    assert out["global"]["cycles"] >= spec.mesh.npus * stripe * b / a
    return out


@pytest.mark.parametrize("op", SPILL_OPS)
def test_every_stripe_reaches_its_receiver_once_in_order_also_under_random_idle(op, run_mesh_io_top):
    fast = _check(run_mesh_io_top, op, 5)
    idle = _check(run_mesh_io_top, op, 5, stall=32768)
    assert idle["global"]["cycles"] > fast["global"]["cycles"]


def test_the_checker_counts_a_gap_a_duplicate_a_stranger_a_wrong_vc_and_a_corrupt_flit():
    """Controller 2's checker (io-write, VC 1) on hand-made flits: NPU 0's flits 0, 1 good; its
    flit 1 again (duplicate), flit 3 (a gap), NPU 1's flit 0 addressed to controller 3
    (another receiver's), NPU 1's flit 0 on VC 0, NPU 1's flit 0 with a flipped check bit, NPU
    5 (no such NPU): six bad arrivals, the first the third flit."""
    from amaranth.sim import Simulator
    from hdl.designs.mesh.spill_checker import SpillChecker
    dut = SpillChecker(spec=SMALL, at="controller", index=2, vc=1)
    flits = [(0, 0, 2, 1, 0), (1, 0, 2, 1, 0), (1, 0, 2, 1, 0), (3, 0, 2, 1, 0), (0, 1, 3, 1, 0),
             (0, 1, 2, 0, 0), (0, 1, 2, 1, 1), (0, 5, 2, 1, 0)]
    seen = {}

    async def bench(ctx):
        ctx.set(dut.expect, 100)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for seq, npu, ctl, vc, flip in flits:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.vc, vc)
            ctx.set(dut.i.payload.data, spill_word(seq, npu, ctl) | (spill_check(seq, npu, ctl) ^ flip) << 32)
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        await ctx.tick()
        seen.update(received=ctx.get(dut.received), errors=ctx.get(dut.errors), first=ctx.get(dut.first_error))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == {"received": 8, "errors": 6, "first": 3}


def test_a_flit_names_its_stripe_and_a_spill_leaves_the_mesh_by_its_controllers_side():
    """The word (which flit, which NPU, which controller) and where a write is addressed: the
    I/O position beside the controller's router on its side, X-Y for north/south, Y-X for
    east/west (the other order would leave by that side in the sender's row or column)."""
    assert spill_word(5, 3, 2) == 5 | 3 << 16 | 2 << 24
    assert spill_check(9, 3, 2) == (9 ^ 1 ^ 3 ^ 2) & 7
    sides = [side for _, _, side in SMALL.ports()]
    assert sides == [NORTH, NORTH, EAST, EAST, SOUTH, SOUTH, WEST, WEST]
    # 2 x 2: router coordinates 1..2, the I/O ring at 0 and 3
    assert spill_dests(SMALL) == [(1, 0, 0), (2, 0, 0), (3, 1, 1), (3, 2, 1), (2, 3, 0), (1, 3, 0),
                                  (0, 2, 1), (0, 1, 1)]


def test_a_writer_serves_its_nearest_controllers_first_and_a_reader_its_farthest_npus():
    """By hand on the 2 x 2 mesh: controllers 0 and 7 sit at NPU 0 (hop 0), 1, 2 at NPU 1 and 5, 6
    at NPU 2 (hop 1), 3, 4 at NPU 3 (hop 2); ties by index. Controller 0's reads go to NPU 3
    (2 hops) first and to its own NPU 0 last. On the wafer every NPU writes to its own
    controllers first and every controller reads into its own NPU last, each order a
    permutation of every destination."""
    assert spill_order(SMALL, "io-write", 0) == [0, 7, 1, 2, 5, 6, 3, 4]
    assert spill_order(SMALL, "io-read", 0) == [3, 1, 2, 0]
    wafer = MeshIoSpec(mesh=MeshFabricSpec(), controllers=18)   # the 5 x 4 wafer
    npus, controllers = range(wafer.mesh.npus), range(wafer.controllers)
    for rank in npus:
        order = spill_order(wafer, "io-write", rank)
        own = [k for k in controllers if wafer.attach_rank(k) == rank]
        assert sorted(order) == list(controllers) and order[:len(own)] == own
    for k in controllers:
        order = spill_order(wafer, "io-read", k)
        assert sorted(order) == list(npus) and order[-1] == wafer.attach_rank(k)


def test_bad_spills_are_refused_by_name():
    with pytest.raises(FredError, match="io-write or io-read"):
        io_spill_program(SMALL, 3, "io-load")
    with pytest.raises(FredError, match="positive number of flits"):
        io_spill_program(SMALL, 0, "io-write")
    with pytest.raises(FredError, match="16-bit flit index"):
        io_spill_program(SMALL, 1 << 16, "io-read")
    with pytest.raises(FredError, match="io-write or io-read"):
        spill_order(SMALL, "io-store", 0)
    with pytest.raises(FredError, match=r"io-read's senders are 0..7 \(controllers\), got 8"):
        spill_order(SMALL, "io-read", 8)
    with pytest.raises(FredError, match=r"io-write's senders are 0..3 \(NPUs\), got -1"):
        spill_order(SMALL, "io-write", -1)
