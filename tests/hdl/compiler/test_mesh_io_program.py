"""Weight-streaming programs on the mesh (hdl/compiler/mesh_io_program.py): the trees and the
stripes on the busiest link, by hand on 2 x 2 and against the paper's 5 x 4 figures."""

import numpy as np
import pytest

from hdl.compiler.mesh_io_program import io_load_program, link_stripes, neighbour, tree_children, tree_flits
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, NORTH, SOUTH, WEST, MeshFabricSpec
from hdl.contracts.mesh_io import MeshIoSpec

SMALL = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2), controllers=8, queue_depth=64)


def test_x_y_tree_from_a_corner_goes_along_the_row_then_down_the_columns():
    # controller 0 sits north of NPU 0: X-Y tree 0 -> 1 (east), 0 -> 2 and 1 -> 3 (south)
    children = tree_children(SMALL)
    assert [children[r][0] for r in range(4)] == [(EAST, SOUTH), (SOUTH,), (), ()]
    # its Y-X tree (tree 1): 0 -> 2 (south), 0 -> 1 (east), 2 -> 3 (east)
    assert [children[r][1] for r in range(4)] == [(EAST, SOUTH), (), (EAST,), ()]


def test_2_x_2_stripes_on_the_busiest_link_by_hand():
    # two controllers per corner; X-Y: each column link carries the trees of the 2 corners of
    # its row's ends (4 stripes), each row link only its own corner's (2); Y-X the other way;
    # half each: 3 everywhere
    loads = {mode: link_stripes(SMALL, mode) for mode in ("tree-xy", "tree-yx", "tree-split")}
    assert loads["tree-xy"][(0, SOUTH)] == 4 and loads["tree-xy"][(0, EAST)] == 2
    assert loads["tree-yx"][(0, SOUTH)] == 2 and loads["tree-yx"][(0, EAST)] == 4
    assert set(loads["tree-split"].values()) == {3}
    assert len(loads["tree-split"]) == 8


def test_the_papers_wafer_busiest_link_carries_12_11_or_8_5_stripes():
    # the model's figures (sysmodel.collectives._mesh_io); the paper's rule is 2 N - 1 = 9
    spec = MeshIoSpec()
    assert [io_load_program(spec, 10, m).hottest for m in ("tree-xy", "tree-yx", "tree-split")] == [12, 11, 8.5]


def test_every_npu_receives_every_stripe_and_forwards_at_most_three_ways():
    spec = MeshIoSpec()
    program = io_load_program(spec, 7, "tree-split")
    assert program.expect == 18 * 7 and program.recv_total == 20 * 18 * 7
    # odd stripe: controller 0's X-Y tree takes the extra flit, controller 1's Y-X tree
    assert program.per_tree[:4] == [4, 3, 3, 4]
    assert max(len(ports) for per in tree_children(spec) for ports in per) == 3
    assert tree_flits(spec, 7, "tree-yx")[:2] == [0, 7]


def test_odd_stripes_spread_their_extra_flits_over_both_trees():
    # 3-flit stripes on the 5 x 4 mesh: the model's busiest link is 8.5 stripes = 25.5 flits;
    # whole flits cannot do better than 26. With the extra flit always on the X-Y tree the
    # busiest link carried 29 (the 54-flit io-load row of docs/fabric_validation.md, RTL/model
    # 1.079); alternating it between controllers gives 26.
    program = io_load_program(MeshIoSpec(), 3, "tree-split")
    assert max(f for sends in program.forwarded for f in sends.values()) == 26
    assert sum(program.per_tree) == 18 * 3


def test_bad_requests_fail_before_anything_is_built():
    with pytest.raises(FredError, match="positive number of flits"):
        io_load_program(SMALL, 0)
    with pytest.raises(FredError, match="unknown I/O mode"):
        io_load_program(SMALL, 4, "tree-zz")
    with pytest.raises(FredError, match="holds 64 per direction"):
        io_load_program(SMALL, 40, "tree-xy")
    with pytest.raises(FredError, match="no neighbour"):
        neighbour(SMALL, 0, NORTH)
    assert neighbour(SMALL, 3, WEST) == 2


@pytest.mark.parametrize("n", [4, 5, 6])
def test_on_a_square_mesh_the_split_trees_give_the_papers_2n_minus_1(n):
    # the paper's rule (a link of (2N - 1) P on an N x N mesh) is the split trees' busiest link
    # with a controller on every boundary port; 5 x 4 lies between N = 4 (7) and N = 5 (9)
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=n, cols=n), controllers=4 * n)
    assert io_load_program(spec, 1, "tree-split").hottest == 2 * n - 1


def test_reduce_out_parents_reverse_the_broadcast_trees_by_hand():
    from hdl.compiler.mesh_io_program import io_store_program, tree_parents
    parents = tree_parents(SMALL)
    # controller 0 north of NPU 0: X-Y tree 0 is 0 -> 1, 0 -> 2, 1 -> 3; reversed: 1 and 2 send
    # to 0 (west, north), 3 to 1 (north), 0 out by its north side to the controller
    assert [parents[r][0] for r in range(4)] == [NORTH, WEST, NORTH, NORTH]
    # its Y-X tree (tree 1): 0 -> 2, 0 -> 1, 2 -> 3; reversed: 3 sends west to 2
    assert [parents[r][1] for r in range(4)] == [NORTH, WEST, NORTH, WEST]
    program = io_store_program(SMALL, 5, "tree-split", max_stripe=8)
    # every controller receives its stripe (its two trees' flits): 3 + 2
    assert program.expect == [5] * 8 and program.per_tree[:4] == [3, 2, 2, 3]
    with pytest.raises(FredError, match="partial sums of 2 per tree"):
        io_store_program(SMALL, 5, "tree-split", max_stripe=2)
    with pytest.raises(FredError, match="positive"):
        io_store_program(SMALL, 0, max_stripe=8)


def test_reduce_out_sums_are_linear_and_catch_a_missing_or_doubled_npu():
    from hdl.contracts.mesh_io import store_sum, store_sum_factors, store_value
    a, b, c = store_sum_factors(20)
    assert all(store_sum(20, t, i) == (a * i + b * t + c) % 65536 for t in range(36) for i in range(300))
    for r in range(20):
        assert (store_sum(20, 3, 7) - store_value(r, 3, 7)) % 65536 != store_sum(20, 3, 7)
        assert (store_sum(20, 3, 7) + store_value(r, 3, 7)) % 65536 != store_sum(20, 3, 7)


def test_the_fp16_golden_reduce_out_adds_each_members_slots_in_the_fixed_order_by_hand():
    """2 x 2, one controller north of NPU 0, X-Y tree (0 -> 1 -> 3, 0 -> 2): NPU 1 adds its
    south child 3, NPU 0 its east child 1 and south child 2, each as ((N + E) + (S + W)) + own
    with +0 in the empty slots (hdl.designs.mesh.fp16_reduce_sum)."""
    from hdl.compiler.mesh_io_program import store_fp16_sums
    from hdl.contracts.dtypes import get_dtype
    from hdl.contracts.mesh_io import store_value_fp16
    add = lambda a, b: int(get_dtype("fp16").add(np.uint16(a), np.uint16(b)))
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=2, cols=2, dtype="fp16"), controllers=1)
    for seq in range(2):
        own = [store_value_fp16(r, 0, seq) for r in range(4)]
        npu1 = add(add(add(0, 0), add(own[3], 0)), own[1])
        npu0 = add(add(add(0, npu1), add(own[2], 0)), own[0])
        assert int(store_fp16_sums(spec, [2, 0])[0][seq]) == npu0
    assert all(0x3800 <= store_value_fp16(r, t, i) & 0x7FFF < 0x4000 for r in range(20) for t in range(36) for i in range(64))
