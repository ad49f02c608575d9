"""Engine programs of the RTL mesh fabric (hdl/compiler/mesh_program.py): the model's plans,
the two chunks, destinations per stage, and bad requests failing before anything is built."""

import pytest

from hdl.compiler.algorithms import padded_to_pieces, two_chunk_flits
from hdl.compiler.mesh_program import mesh_program, rectangle_rows, snake_order
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MeshFabricSpec

SPEC = MeshFabricSpec()
WAFER = [list(range(20))]


def test_wafer_all_reduce_runs_two_chunks_of_three_stages_with_hand_computed_counts():
    program = mesh_program(SPEC, WAFER, 200, split=0.5)
    assert program.sizes == (100, 100)
    # chunk 0, rows first: rows of 4, columns of 5: pieces 20, 5 flits each; row reduce-scatter
    # of chunks of 25 (3 steps), column all-reduce of chunks of 5 (8 steps), row all-gather
    rank0 = program.engines[0]
    assert [(st["send_count"], st["recv_count"]) for st in rank0["stages"]] == [(75, 75), (40, 40), (75, 75)]
    assert rank0["dest"] == [1, 4, 1]            # row successor, column successor, row successor
    # chunk 1, columns first: column reduce-scatter in chunks of 20 (4 steps), row all-reduce
    # of chunks of 5 (6 steps), column all-gather
    chunk1 = program.engines[1]
    assert [(st["send_count"], st["recv_count"]) for st in chunk1["stages"]] == [(80, 80), (30, 30), (80, 80)]
    assert chunk1["dest"] == [4, 1, 4]


def test_ring_runs_both_directions_in_snake_order():
    group = [0, 1, 2, 3, 7]
    assert snake_order(SPEC, group) == [0, 1, 2, 3, 7]
    assert rectangle_rows(SPEC, group) is None
    program = mesh_program(SPEC, [group], 50, algorithm="ring")
    assert program.engines[0]["dest"][0] == 1 and program.engines[1]["dest"][0] == 7
    assert program.engines[2 * 7]["dest"][0] == 0 and program.engines[2 * 7 + 1]["dest"][0] == 3
    assert program.engines[2 * 5]["stages"][0]["send_count"] == 0     # not a member


@pytest.mark.parametrize("kwargs, message", [
    (dict(groups=WAFER, size_flits=0), "size must be a positive number of flits"),
    (dict(groups=[[0, 25]], size_flits=8), r"does not fit the 5 x 4 mesh"),
    (dict(groups=[[0, 1], [1, 2]], size_flits=8), "groups overlap at ranks \\[1\\]"),
    (dict(groups=[[0, 1, 2]], size_flits=8), "hierarchical 2D all-reduce needs a group that fills a rectangle"),
    (dict(groups=WAFER, size_flits=8, split=1.0), r"split must be in \(0, 1\)"),
    (dict(groups=WAFER, size_flits=8000), "an NPU holds 2048 per stage"),
    (dict(groups=WAFER, size_flits=8, algorithm="tree"), "unknown mesh algorithm"),
])
def test_bad_requests_fail_before_building(kwargs, message):
    with pytest.raises(FredError, match=message):
        mesh_program(SPEC, **kwargs)


@pytest.mark.parametrize("size, sizes", [(1, (1, 1)), (7, (6, 1)), (26, (20, 6)), (63, (40, 23)), (200, (100, 100))])
def test_chunks_are_whole_pieces_written_once_for_program_and_model(size, sizes):
    # chunk 0 whole multiples of the 20 pieces (at least one, leaving chunk 1 a flit), chunk 1
    # the rest; each sent padded to 20 pieces (the model of the RTL mesh times the same)
    assert two_chunk_flits(size, 0.5, 20) == sizes
    program = mesh_program(SPEC, WAFER, size, split=0.5)
    assert program.sizes == sizes
    sent = sum(st["send_count"] for st in program.engines[0]["stages"])
    assert sent == 2 * 3 / 4 * padded_to_pieces(sizes[0], 20) + 2 * 4 / 5 * padded_to_pieces(sizes[0], 20) / 4
