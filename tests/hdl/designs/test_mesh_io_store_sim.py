"""Gradient reduce-out (``io-store``) on the RTL mesh (hdl/designs/mesh/mesh_io_store_top.py)
in Amaranth's simulator on a 2 x 2 mesh with its 8 boundary controllers: every controller
receives each of its trees' flits once, in order, each the sum of all four NPUs' contributions
(its checker), under random idle too; never faster than the busiest link's stripes at the
link rate. The 5 x 4 wafer runs under Verilator (tests/cocotb_tests/test_mesh_io_cocotb.py)."""

import pytest

from hdl.compiler.mesh_io_program import io_store_program
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from hdl.contracts.errors import FredError
from hdl.designs.mesh.mesh_io_store_top import STORE_NPU_READ, MeshIoStoreTop, store_controller_read
from hdl.designs.mesh.reduce_forwarder import LEAF_ORDERS

SMALL = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, io_rate=(1, 2), queue_depth=64)


def _check(run_mesh_io_top, spec, mode, stripe, stall=0, leaf_order="tree"):
    program = io_store_program(spec, stripe, mode, max_stripe=8)
    out = run_mesh_io_top(MeshIoStoreTop(spec, max_stripe=8, leaf_order=leaf_order), stripe=stripe, mode_index=program.mode_index,
                          stall=stall, npu_read=STORE_NPU_READ, controller_read=store_controller_read(spec))
    assert out["global"]["all_done"] and not out["global"]["protocol_error"]
    assert all(n["idle"] for n in out["npus"])
    for k, c in enumerate(out["controllers"]):
        assert (c["received"], c["errors"], c["first_error"], c["complete"]) == (program.expect[k], 0, 0, 1)
    a, b = spec.mesh.link_rate
    assert out["global"]["cycles"] >= program.hottest * stripe * b / a
    if spec.mesh.dtype == "fp16":
        assert [(c["hash0"], c["hash1"]) for c in out["controllers"]] == program.expected_hashes
    return out


def test_every_controller_gets_every_npus_sum_in_order_also_under_random_idle(run_mesh_io_top):
    out = _check(run_mesh_io_top, SMALL, "tree-split", 6)
    # 3 stripes of 6 flits on the busiest link at 1/4: 72 cycles and the trees' latency
    assert out["global"]["cycles"] < 72 + 60
    idle = _check(run_mesh_io_top, SMALL, "tree-split", 6, stall=32768)
    assert idle["global"]["cycles"] > out["global"]["cycles"]


@pytest.mark.full
@pytest.mark.parametrize("mode", IO_MODES)
def test_every_mode_and_an_odd_stripe(mode, run_mesh_io_top):
    _check(run_mesh_io_top, SMALL, mode, 5)


@pytest.mark.parametrize("dtype", ["int32", pytest.param("fp16", marks=pytest.mark.full)])
def test_each_reducing_member_adds_its_router_and_reducer_as_the_models_platform_says(dtype, run_mesh_io_top):
    """One controller (north of NPU 0), one flit per NPU, X-Y trees on 2 x 2 and 2 x 3: the
    deepest leaf is one mesh link further on 2 x 3, and the flit takes that link (wire +
    router) and one more reducing member (its router to the local output, its reducer, in
    fp16 its three adder levels: ``reduce_member_cycles``) longer: what the model's platform of the RTL mesh charges per
    member (sysmodel.mesh_rtl_model.mesh_io_platform)."""
    from hdl.contracts.mesh import router_latency
    from hdl.contracts.mesh_io import reduce_member_cycles
    cycles = []
    for cols in (2, 3):
        spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=cols, dtype=dtype), controllers=1, queue_depth=8)
        cycles.append(_check(run_mesh_io_top, spec, "tree-xy", 1)["global"]["cycles"])
    assert cycles[1] - cycles[0] == SMALL.mesh.link_latency + router_latency() + reduce_member_cycles(dtype) == \
        {"int32": 7, "fp16": 25}[dtype]


def test_an_unknown_leaf_order_is_refused_before_anything_is_built():
    with pytest.raises(FredError, match="leaf_order must be one of tree, farthest-first, nearest-first"):
        MeshIoStoreTop(SMALL, leaf_order="random")


@pytest.mark.full
def test_at_a_latency_bound_size_the_leaf_order_decides_which_flit_crosses_the_busiest_link_last(run_mesh_io_top):
    """The wafer's io-store at 3-flit stripes on the split trees (fabric-validate's 54-flit
    row; Amaranth sim, 15-40 s per order): the busiest links (the corner NPUs' vertical
    links, 25-26 flits) start with the corners' own leaf values and stay busy; what follows their
    last flit is that flit's way to its controller, which depends on the tree it belongs to.
    Each NPU sending the trees of its nearest controllers last (``farthest-first``) finishes
    well before the build's tree order; the trees of its farthest controllers last
    (``nearest-first``: the deepest path after the busiest link) reaches the model's busiest
    link + deepest path, which is therefore the order-independent figure, not the RTL's
    (docs/mesh_rtl.md, "Gradient reduce-out")."""
    from sysmodel.mesh_rtl_model import mesh_io_model_cycles
    spec = MeshIoSpec()
    cycles = {order: _check(run_mesh_io_top, spec, "tree-split", 3, leaf_order=order)["global"]["cycles"]
              for order in LEAF_ORDERS}
    model = mesh_io_model_cycles(spec, 3, mode="tree-split", op="io-store").cycles
    print(f"io-store 54 by leaf order: {cycles}, model {model:.1f}")
    assert cycles["farthest-first"] < cycles["tree"] < cycles["nearest-first"]
    assert abs(cycles["nearest-first"] / model - 1) < 0.02, (cycles, model)


def test_fp16_sums_are_the_golden_fixed_order_bit_for_bit_under_random_idle(run_mesh_io_top):
    """fp16 on 2 x 3 (10 controllers; the root NPUs of the row trees have three children, so
    the arrival order of their flits varies, more so under random idle): every controller's
    two hashes equal the golden model's fixed order ((N + E) + (S + W)) + own
    (``store_fp16_sums``). Adding the pairs as (N + S) + (E + W) in ``Fp16ReduceSum`` fails it."""
    from hdl.compiler.mesh_io_program import tree_children
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=3, dtype="fp16"), controllers=10, io_rate=(1, 2),
                      queue_depth=64)
    assert max(len(c) for per_tree in tree_children(spec) for c in per_tree) == 3
    _check(run_mesh_io_top, spec, "tree-split", 4, stall=32768)


@pytest.mark.full
@pytest.mark.parametrize("mode", IO_MODES)
def test_fp16_every_mode_without_idle(mode, run_mesh_io_top):
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=3, dtype="fp16"), controllers=10, io_rate=(1, 2),
                      queue_depth=64)
    _check(run_mesh_io_top, spec, mode, 5)
