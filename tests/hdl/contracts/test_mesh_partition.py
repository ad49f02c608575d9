"""The mesh's cut into two parts for the lock-step simulator (hdl/contracts/mesh_partition.py):
which routers each part holds, which wires are cut, and the parts' cut buses (pure Python:
``MeshFabricTop.cut_fields`` needs no elaboration)."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, WEST, MeshFabricSpec
from hdl.contracts.mesh_partition import MeshPartition, mesh_partition


def test_the_paper_mesh_is_cut_between_its_second_and_third_column():
    spec = MeshFabricSpec()
    partition = mesh_partition(spec)
    assert partition.cut_col == 2
    parts = [partition.npu_part(rank) for rank in range(spec.npus)]
    assert parts == [0, 0, 1, 1] * 5          # ten routers and twenty engines each
    wires = partition.cut_wires()
    # both directions of the five links between router columns x = 2 and x = 3, row by row
    assert [(w.name, w.source, w.sink, w.source_part, w.sink_part) for w in wires[:2]] == [
        (f"wire_2_1_{EAST}", (2, 1), (3, 1), 0, 1), (f"wire_3_1_{WEST}", (3, 1), (2, 1), 1, 0)]
    assert len(wires) == 10 and {w.source[1] for w in wires} == {1, 2, 3, 4, 5}
    assert all(partition.part_of(w.source) == w.source_part != partition.part_of(w.sink) for w in wires)


def test_part_zeros_cut_out_is_part_ones_cut_in_field_for_field():
    from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop
    spec = MeshFabricSpec()
    partition = mesh_partition(spec)
    tops = [MeshFabricTop(spec, partition=partition, part=p) for p in range(2)]
    for top in tops:
        top._MustUse__silence = True   # inspected, not elaborated
    fields = [top.cut_fields() for top in tops]
    for p, q in ((0, 1), (1, 0)):
        outs = [(name, width) for bus, name, width in fields[p] if bus == "cut_out"]
        ins = [(name, width) for bus, name, width in fields[q] if bus == "cut_in"]
        assert outs == ins
    # per cut wire: the flit (valid + data) one way, the two VCs' credits the other
    width = spec.flit.width
    assert len(tops[0].cut_out) == len(tops[1].cut_in) == 5 * (1 + width) + 5 * 2


@pytest.mark.parametrize("cut_col, message", [(0, "column in 1..3"), (4, "column in 1..3"), (True, "column")])
def test_bad_cuts_are_refused(cut_col, message):
    with pytest.raises(FredError, match=message):
        MeshPartition(MeshFabricSpec(), cut_col)


def test_mesh_tops_check_their_partition():
    from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop
    partition = mesh_partition(MeshFabricSpec())
    with pytest.raises(FredError, match="both partition and part"):
        MeshFabricTop(MeshFabricSpec(), partition=partition)
    with pytest.raises(FredError, match="not a part"):
        MeshFabricTop(MeshFabricSpec(), partition=partition, part=2)
    with pytest.raises(FredError, match="not a part"):
        MeshFabricTop(MeshFabricSpec(rows=2, cols=2), partition=partition, part=0)
