"""The NPU's I/O checker (hdl/designs/mesh/io_checker.py) catches what the mesh could do wrong
to a tree's flits: a duplicate, a gap (a loss), a corrupted bit, a flit on the wrong VC, one
flit too many."""

from amaranth.sim import Simulator

from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import MeshIoSpec, io_check, io_word
from hdl.designs.mesh.io_checker import IoChecker

SPEC = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8)


def _flit(seq, tree, *, vc=None, flip=0):
    data = io_word(seq, tree) | io_check(seq, tree) << 32
    return dict(data=data ^ flip, vc=tree % 2 if vc is None else vc)


def run(flits, expect):
    dut = IoChecker(spec=SPEC)
    out = {}

    async def bench(ctx):
        ctx.set(dut.expect, expect)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for f in flits:
            ctx.set(dut.eject.valid, 1)
            ctx.set(dut.eject.payload.data, f["data"])
            ctx.set(dut.eject.payload.vc, f["vc"])
            await ctx.tick()
        ctx.set(dut.eject.valid, 0)
        await ctx.tick()
        out.update(received=ctx.get(dut.received), errors=ctx.get(dut.errors),
                   first=ctx.get(dut.first_error), complete=ctx.get(dut.complete))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_in_order_trees_interleaved_pass():
    flits = [_flit(0, 3), _flit(0, 4), _flit(1, 3), _flit(1, 4), _flit(2, 3)]
    assert run(flits, 5) == dict(received=5, errors=0, first=0, complete=1)


def test_each_fault_is_one_error_at_its_arrival():
    good = [_flit(0, 3), _flit(1, 3)]
    assert run(good + [_flit(1, 3)], 9)["first"] == 3                  # duplicate
    assert run(good + [_flit(3, 3)], 9)["errors"] == 1                 # gap: flit 2 lost
    assert run(good + [_flit(2, 3, flip=1 << 33)], 9)["errors"] == 1   # a check bit flipped
    assert run(good + [_flit(2, 3, flip=1 << 1)], 9)["errors"] == 1    # an index bit flipped
    assert run(good + [_flit(2, 3, vc=0)], 9)["errors"] == 1           # tree 3 is on VC 1
    assert run(good + [_flit(0, 16)], 9)["errors"] == 1                # no tree 16 (8 controllers)
    out = run(good + [_flit(2, 3)], 2)                                 # one too many
    assert (out["errors"], out["first"], out["complete"]) == (1, 3, 0)
