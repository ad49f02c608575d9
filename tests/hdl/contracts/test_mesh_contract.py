"""The mesh router's contract (hdl/contracts/mesh.py): dimension-order routes worked by hand,
flit packing, parameter errors."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import (EAST, LOCAL, NORTH, SOUTH, WEST, XY, YX, MeshFlitFormat,
                                check_router_parameters, route_hops, route_port)


def test_route_port_corrects_x_first_under_xy_and_y_first_under_yx():
    # from (1, 1) to (3, 0): east then north (XY), north then east (YX)
    assert route_port(1, 1, 3, 0, XY) == EAST
    assert route_port(1, 1, 3, 0, YX) == NORTH
    assert route_port(3, 1, 3, 0, XY) == NORTH
    assert route_port(1, 0, 3, 0, YX) == EAST
    assert route_port(2, 2, 0, 3, XY) == WEST and route_port(2, 2, 0, 3, YX) == SOUTH
    assert route_port(2, 2, 2, 2, XY) == LOCAL == route_port(2, 2, 2, 2, YX)


def test_route_hops_of_a_two_by_one_route():
    # (0, 0) -> (2, 1): XY crosses (0,0) E, (1,0) E, (2,0) S, (2,1) local
    assert route_hops((0, 0), (2, 1), XY) == [((0, 0), LOCAL, EAST), ((1, 0), WEST, EAST),
                                              ((2, 0), WEST, SOUTH), ((2, 1), NORTH, LOCAL)]
    assert [node for node, _, _ in route_hops((0, 0), (2, 1), YX)] == [(0, 0), (0, 1), (1, 1), (2, 1)]


def test_flit_pack_round_trip_and_errors():
    flit = MeshFlitFormat(data_width=16, coord_bits=3, packet_flits=4)
    assert flit.width == 16 + 1 + 1 + 3 + 3
    word = flit.pack(data=0xBEEF, last=1, vc=1, dest_x=5, dest_y=2)
    assert flit.unpack(word) == {"data": 0xBEEF, "last": 1, "vc": 1, "dest_x": 5, "dest_y": 2}
    with pytest.raises(FredError, match="dest_x 8 does not fit 3 coordinate bits"):
        flit.pack(data=0, last=0, vc=0, dest_x=8, dest_y=0)
    with pytest.raises(FredError, match="vc must be 0"):
        flit.pack(data=0, last=0, vc=2, dest_x=0, dest_y=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"data_width": 0, "coord_bits": 3, "packet_flits": 4}, "data_width must be an integer in 1..1024"),
    ({"data_width": 32, "coord_bits": 9, "packet_flits": 4}, "coord_bits must be an integer in 1..8"),
    ({"data_width": 32, "coord_bits": 3, "packet_flits": 0}, "packet_flits must be an integer in 1..64"),
])
def test_bad_flit_parameters_name_the_parameter(kwargs, message):
    with pytest.raises(FredError, match=message):
        MeshFlitFormat(**kwargs)


def test_depth_must_hold_a_packet():
    flit = MeshFlitFormat(data_width=32, coord_bits=3, packet_flits=4)
    with pytest.raises(FredError, match=r"depth \(3\) must hold a whole packet"):
        check_router_parameters(flit=flit, depth=3)
    with pytest.raises(FredError, match="order must be"):
        route_port(0, 0, 1, 1, "zz")
