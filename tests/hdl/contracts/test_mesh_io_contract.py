"""The mesh I/O contract (hdl/contracts/mesh_io.py): where the controllers sit, the flit word's
check bits, the spec's validation."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import EAST, NORTH, SOUTH, WEST, MeshFabricSpec
from hdl.contracts.mesh_io import MeshIoSpec, edge_io_ports, io_check, io_word


def test_the_papers_18_controllers_take_every_boundary_port_of_5_x_4_once():
    ports = edge_io_ports(5, 4, 18)
    assert len(set(ports)) == 18
    assert ports[:5] == [(0, 0, NORTH), (0, 1, NORTH), (0, 2, NORTH), (0, 3, NORTH), (0, 3, EAST)]
    assert ports[9] == (4, 3, SOUTH) and ports[13] == (4, 0, WEST) and ports[-1] == (0, 0, WEST)
    # the corners take two controllers, by two different router ports
    assert sum(1 for r, c, _ in ports if (r, c) == (0, 0)) == 2


def test_fewer_controllers_spread_evenly_and_too_many_are_refused():
    assert edge_io_ports(2, 2, 4) == [(0, 0, NORTH), (0, 1, EAST), (1, 1, SOUTH), (1, 0, WEST)]
    with pytest.raises(FredError, match="do not fit the 8 boundary ports"):
        edge_io_ports(2, 2, 9)


def test_the_word_and_check_bits_name_the_flit():
    assert io_word(5, 3) == 5 | 3 << 24
    assert io_check(0b101_110, 1) == (0b110 ^ 0b101 ^ 1)
    assert io_check(8, 0) != io_check(9, 0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(controllers=0), "controllers must be"),
    (dict(controllers=19), "do not fit"),
    (dict(io_rate=(3, 2)), "0 < a <= b"),
    (dict(queue_depth=1), "queue_depth"),
    (dict(mesh="5x4"), "MeshFabricSpec"),
])
def test_bad_specs_are_named(kwargs, message):
    with pytest.raises(FredError, match=message):
        MeshIoSpec(**kwargs)


def test_attach_rank_is_row_major():
    spec = MeshIoSpec(mesh=MeshFabricSpec(rows=5, cols=4))
    assert [spec.attach_rank(k) for k in (0, 4, 9, 13, 17)] == [0, 3, 19, 16, 0]
