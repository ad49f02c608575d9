"""I/O controllers in the fabric contract (hdl/contracts/fabric.py): where they attach, how an
I/O request names them, and the errors for what does not fit."""

from fractions import Fraction

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import (IO_RATE, fabric_spec, io_controllers_needed, make_request)


def test_the_papers_18_controllers_make_the_fred_d_l1_a_fred_3_12():
    spec = fabric_spec("fred-d", io_controllers=18)
    # 18 round-robin over 5 L1s: 4, 4, 4, 3, 3 -> 4 I/O ports on every L1: 4 NPUs + 4 uplinks + 4
    assert spec.io_ports_per_l1 == 4 and spec.l1_ports == 12
    per_l1 = [sum(1 for k in range(18) if spec.port_of(20 + k)[0] == j) for j in range(5)]
    assert per_l1 == [4, 4, 4, 3, 3]
    # controller k on L1 k mod 5, after the NPU and uplink ports (those do not move)
    assert spec.port_of(20) == (0, 8) and spec.port_of(24) == (4, 8) and spec.port_of(25) == (0, 9)
    assert spec.port_of(37) == (2, 11)
    assert spec.port_of(6) == (1, 2)            # an NPU keeps its port
    assert spec.endpoints == 38


def test_without_controllers_nothing_moves():
    spec = fabric_spec("fred-b")
    assert spec.io_controllers == 0 and spec.l1_ports == 5 and spec.endpoints == 20
    with pytest.raises(FredError, match=r"ranks 0..19\)"):
        spec.port_of(20)


def test_the_controller_rate_is_128_gbps_over_3_tbps():
    assert IO_RATE == Fraction(16, 375)
    with pytest.raises(FredError, match="io_rate must be in"):
        fabric_spec("fred-d", io_controllers=1, io_rate=Fraction(3, 2))


def test_an_io_request_roots_group_g_at_controller_g():
    spec = fabric_spec("fred-d", io_controllers=4)
    request = make_request(spec, op="io-reduce", size_flits=8, strategy="MP2-DP5-PP2", dim="dp")
    assert [c.root for c in request.collectives] == [20, 21, 22, 23]
    assert all(len(c.members) == 5 and max(c.members) < 20 for c in request.collectives)
    wafer = make_request(spec, op="io-broadcast", size_flits=8, group="wafer")
    assert wafer.collectives[0].root == 20 and wafer.collectives[0].members == tuple(range(20))


def test_an_io_request_needs_a_controller_per_group_and_no_pp():
    spec = fabric_spec("fred-d", io_controllers=1)
    assert io_controllers_needed(spec, op="io-broadcast", strategy="MP2-DP5-PP2", dim="dp") == 4
    with pytest.raises(FredError, match=r"needs 4 I/O controller\(s\), one per group; fabric fred-d has 1"):
        make_request(spec, op="io-broadcast", size_flits=8, strategy="MP2-DP5-PP2", dim="dp")
    with pytest.raises(FredError, match="not PP"):
        io_controllers_needed(spec, op="io-broadcast", strategy="MP2-DP5-PP2", dim="pp")
