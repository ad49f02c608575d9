"""The RTL mesh with I/O controllers (hdl/designs/mesh/mesh_io_top.py) in Amaranth's simulator
on a 2 x 3 mesh with its 10 boundary controllers: every NPU receives every controller's stripe,
each tree's flits in order and unchanged (the NPUs' checkers), under each tree mode; the time is
bounded below by the busiest link's stripes (hdl.compiler.mesh_io_program.link_stripes) at the
link rate. The 5 x 4 wafer runs under Verilator (tests/cocotb_tests/test_mesh_io_cocotb.py)."""

import pytest

from hdl.compiler.mesh_io_program import io_load_program
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from hdl.designs.mesh.mesh_io_top import IO_CONTROLLER_READ, IO_NPU_READ, MeshIoTop


SMALL = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, io_rate=(1, 2), queue_depth=64)
WIDER = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=3), controllers=10, io_rate=(1, 2), queue_depth=64)


def _check(run_mesh_io_top, spec, mode, stripe, stall=0):
    program = io_load_program(spec, stripe, mode)
    out = run_mesh_io_top(MeshIoTop(spec), stripe=program.stripe_flits, mode_index=program.mode_index,
                          stall=stall, npu_read=IO_NPU_READ, controller_read=IO_CONTROLLER_READ)
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    for npu in out["npus"]:
        assert (npu["received"], npu["errors"], npu["first_error"]) == (program.expect, 0, 0)
        assert npu["complete"] and npu["idle"]
    assert all(c["sent"] == stripe and c["done"] for c in out["controllers"])
    # never faster than the busiest link's stripes at the link rate
    a, b = spec.mesh.link_rate
    assert out["global"]["cycles"] >= program.hottest * stripe * b / a
    return out


def test_every_npu_gets_every_stripe_in_order_on_split_trees_also_under_random_idle(run_mesh_io_top):
    out = _check(run_mesh_io_top, SMALL, "tree-split", 6)
    # 3 stripes of 6 flits on every link at 1/4: 72 cycles and the trees' latency
    assert out["global"]["cycles"] < 72 + 60
    # half the cycles idle at every controller and forwarder: slower, still exact and complete
    idle = _check(run_mesh_io_top, SMALL, "tree-split", 6, stall=32768)
    assert idle["global"]["cycles"] > out["global"]["cycles"]


@pytest.mark.full
@pytest.mark.parametrize("mode", IO_MODES)
def test_every_mode_on_a_2_x_3_mesh(mode, run_mesh_io_top):
    _check(run_mesh_io_top, WIDER, mode, 6)
